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
        from moto.server import ThreadedMotoServer

        self._server = ThreadedMotoServer(ip_address=self.host, port=self.port, verbose=False)
        self._server.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None
