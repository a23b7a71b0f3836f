"""The embedded AWS emulator: a real moto server in this process (no Docker)."""

from __future__ import annotations

from typing import Any


class EmbeddedMoto:
    def __init__(self, host: str = "127.0.0.1", port: int = 4566):
        self.host, self.port = host, port
        self._server: Any = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> EmbeddedMoto:
        import logging

        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per request drowns everything else

        self._server = ThreadedMotoServer(ip_address=self.host, port=self.port, verbose=False)
        self._server.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None


class MotoProcess:
    """A moto server in its own process: for load (chaos test, benchmark), where sharing the
    caller's GIL with the emulator would measure the GIL instead of the code."""

    def __init__(self, port: int, host: str = "127.0.0.1"):
        self.host, self.port = host, port
        self._proc: Any = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> MotoProcess:
        import subprocess
        import sys

        from common.local.rie import wait_for_port

        self._proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", self.host, "-p", str(self.port)],
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port(self.port, self.host, timeout=60, proc=self._proc)
        return self

    def stop(self) -> None:
        if self._proc is not None:
            self._proc.terminate()
            self._proc.wait(10)
            self._proc = None
