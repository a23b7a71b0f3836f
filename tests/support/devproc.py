"""`email-handler dev` as a user starts it: a subprocess on free ports, its output collected, stopped
with SIGINT (what Ctrl-C sends). Shared by the suites that drive the embedded stack end to end."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path

from deploy.functions import FUNCTIONS
from local.rie import free_port

REPO = Path(__file__).resolve().parents[2]


def consecutive_free_ports(count: int) -> int:
    return free_port(count)


@dataclass
class DevProcess:
    log_dir: Path
    aws: int = 0
    smtp: int = 0
    first: int = 0  # the first of the six function ports
    output: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)  # on top of this process's environment
    proc: subprocess.Popen[str] | None = None

    def __post_init__(self) -> None:
        # Free ports are only free until someone binds them: keep the three choices apart.
        self.first = self.first or consecutive_free_ports(len(FUNCTIONS))
        taken = set(range(self.first, self.first + len(FUNCTIONS)))
        while not self.aws or self.aws in taken:
            self.aws = free_port()
        taken.add(self.aws)
        while not self.smtp or self.smtp in taken:
            self.smtp = free_port()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.aws}"

    @property
    def text(self) -> str:
        return "".join(self.output)

    def start(self, ready_timeout: float = 180) -> DevProcess:
        """Start ``email-handler dev`` and wait for its ready line (AssertionError with its output if it does
        not come)."""
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ops.main",
                "dev",
                "--emulator-port",
                str(self.aws),
                "--smtp-port",
                str(self.smtp),
                "--function-port",
                str(self.first),
                "--log-dir",
                str(self.log_dir),
                "--visibility-timeout",
                "1",
            ],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, **self.env},
        )
        ready = threading.Event()

        def read() -> None:
            assert self.proc is not None and self.proc.stdout is not None
            for line in self.proc.stdout:
                self.output.append(line)
                if line.startswith("[dev] ready"):
                    ready.set()
            ready.set()  # the process ended: stop waiting (the assertion below says why)

        threading.Thread(target=read, daemon=True).start()
        assert ready.wait(ready_timeout) and self.proc.poll() is None, self.text[-3000:]
        return self

    def stop(self, timeout: float = 60) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise
