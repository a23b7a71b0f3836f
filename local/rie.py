"""Run a function under the real Runtime Interface Emulator on the host, and invoke RIE endpoints.

The host path uses the same entry script as the images (docker/lambda-entrypoint.sh),
so what the tests and `email-handler dev` exercise is what the containers run.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from common.errors import EmailHandlerError
from deploy.functions import BY_NAME, narrowed

REPO = Path(__file__).resolve().parents[1]
ENTRYPOINT = REPO / "docker" / "lambda-entrypoint.sh"
INVOKE_PATH = "/2015-03-31/functions/function/invocations"


class RieMissingError(EmailHandlerError, FileNotFoundError):
    """The RIE binary is not where RIE_BIN or the wheelhouse put it."""


class NoFreePortsError(EmailHandlerError, RuntimeError):
    """No run of free ports was found to claim."""


class ExitedError(EmailHandlerError, RuntimeError):
    """The process exited before its port opened."""


class PortTimeoutError(EmailHandlerError, TimeoutError):
    """A port opened, or an HTTP answer came, not within the time allowed."""


def rie_binary() -> Path:
    path = Path(os.environ.get("RIE_BIN", REPO / ".build" / "rie" / "aws-lambda-rie"))
    if not path.exists():
        raise RieMissingError(
            f"{path} not found: run `make wheelhouse` (it extracts the RIE from aws-sam-cli)"
        )
    return path


def _ephemeral_floor() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default; macOS's range starts at 49152


def free_port(count: int = 1) -> int:
    """The first of ``count`` consecutive ports that are free now, below the kernel's ephemeral range.

    Binding port 0 hands out an ephemeral port, and any outgoing connection (boto3 to the emulator, an RIE
    invoke) may take that same port as its local end before our server binds it: seen in CI as an RIE that
    exited with "address already in use". Ports below the ephemeral range are only ever taken by explicit
    binds, so the window closes to another chooser picking the same random port. That chooser may be
    another process (pytest-xdist workers, a second checkout's tests): a port handed out here is claimed
    for ``CLAIM_S`` in a directory every chooser on the machine shares, and a claimed port is not handed
    out again while the first taker may still be starting to listen on it (seen in CI: a compose stack's
    port, chosen before its image check, bound meanwhile by another worker's container)."""
    floor = min(_ephemeral_floor(), 32768)
    # A range that starts low (some containers use 1024-65535) leaves nothing below it: then any port will
    # do, and the race is only as likely as it is with bind(0).
    low, top = (20000, floor - count) if floor - count > 21000 else (20000, 65000 - count)
    for _ in range(500):
        base = random.randrange(low, top)
        socks: list[socket.socket] = []
        try:
            for port in range(base, base + count):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", port))
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
        if _claim(range(base, base + count)):
            return base
    raise NoFreePortsError(f"no {count} consecutive free ports between {low} and {top + count}")


CLAIM_S = 600.0  # longer than any stack takes from choosing its ports to listening on them
CLAIMS = Path(os.environ.get("TMPDIR", "/tmp")) / "service-email-handler-ports"


def _claim(ports: range) -> bool:
    """Claim every port of ``ports`` for ``CLAIM_S``, or none: False when one was handed out (here or in
    another process) less than that long ago. A claim is a file created with O_EXCL, so two processes
    cannot both win it; an expired one is taken over."""
    won: list[Path] = []
    for port in ports:
        path = CLAIMS / str(port)
        try:
            CLAIMS.mkdir(parents=True, exist_ok=True)
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
        except FileExistsError:
            try:
                expired = time.time() - path.stat().st_mtime > CLAIM_S
                if expired:  # taken over: a rename is atomic, so of two takers one sees it gone
                    path.rename(path.with_suffix(f".{os.getpid()}"))
                    path.with_suffix(f".{os.getpid()}").unlink()
                    os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
            except OSError:
                expired = False
            if not expired:
                for claimed in won:
                    claimed.unlink(missing_ok=True)
                return False
        except OSError:  # no shared directory to write to (another user's): choose as before, alone
            return True
        won.append(path)
    return True


class InvokeError(EmailHandlerError, RuntimeError):
    """The function returned a Lambda error payload (errorType/errorMessage)."""

    def __init__(self, payload: dict[str, Any]):
        super().__init__(f"{payload.get('errorType')}: {payload.get('errorMessage')}")
        self.payload = payload


def invoke(url: str, event: Any, timeout: float = 120.0) -> Any:
    """POST an event to an RIE invocation URL; raise InvokeError for a function error."""
    body = json.dumps(event).encode()
    request = urllib.request.Request(
        url.rstrip("/") + INVOKE_PATH if not url.endswith("invocations") else url,
        data=body,
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            status, raw = resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        # The RIE answers an init failure with 502 and the runtime's error document.
        status, raw = exc.code, exc.read()
    try:
        payload = json.loads(raw or b"null")
    except json.JSONDecodeError:
        # A timed-out or killed runtime: the RIE answers with plain text ("Task timed out after ...").
        raise InvokeError(
            {
                "errorType": "FunctionError" if status == 200 else f"HTTP{status}",
                "errorMessage": raw.decode(errors="replace").strip(),
            }
        ) from None
    if isinstance(payload, dict) and "errorType" in payload and "errorMessage" in payload:
        raise InvokeError(payload)
    return payload


def wait_for_port(
    port: int, host: str = "127.0.0.1", timeout: float = 30.0, proc: subprocess.Popen[bytes] | None = None
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise ExitedError(f"process exited with {proc.returncode} before {host}:{port} opened")
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise PortTimeoutError(f"{host}:{port} did not open within {timeout:.0f}s")


def wait_for_http(url: str, timeout: float = 30.0) -> None:
    """Wait until something answers HTTP at ``url``: any status will do, a 404 included.

    A published container port is opened by docker-proxy before the program inside listens; a TCP connect
    then succeeds and the first request is reset (curl's exit 56, seen in CI). Only an HTTP answer shows
    that the RIE itself is up."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except urllib.error.HTTPError:
            return
        except (OSError, http.client.HTTPException) as exc:
            if time.monotonic() >= deadline:
                raise PortTimeoutError(f"{url} gave no HTTP answer within {timeout:.0f}s: {exc}") from exc
            time.sleep(0.05)


@dataclass
class RieProcess:
    """One function under aws-lambda-rie on the host; output goes to ``log_path``."""

    function: str
    port: int
    env: dict[str, str]
    log_path: Path
    api_port: int = 0
    proc: subprocess.Popen[bytes] | None = field(default=None, init=False)
    _log: IO[bytes] | None = field(default=None, init=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, wait: bool = True) -> RieProcess:
        task_root = REPO / "images" / self.function

        spec = BY_NAME[self.function]
        # What Lambda sets from the function's configuration (the RIE reads the timeout; the
        # extractor sizes its parser child by the memory). Callers may shorten them for a test.
        # Only its own configuration variables, as the deploy gives them (deploy.functions.narrowed):
        # what this process inherits or was given of another function's, or a secret, is left out.
        env = narrowed(
            self.function,
            {
                "AWS_LAMBDA_FUNCTION_TIMEOUT": str(spec.timeout_s),
                "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(spec.memory_mb),
                **os.environ,
                **self.env,
            },
        )
        env.pop("AWS_LAMBDA_RUNTIME_API", None)
        env.update(
            RIE_BIN=str(rie_binary()),
            PYTHON=env.get("PYTHON", sys.executable),
            RIE_ADDRESS=f"127.0.0.1:{self.port}",
            # Each RIE's internal Runtime API needs its own port when several share a host.
            RIE_RUNTIME_API_ADDRESS=f"127.0.0.1:{self.api_port or free_port()}",
            PYTHONPATH=os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p),
            AWS_LAMBDA_FUNCTION_NAME=self.function,
            LAMBDA_TASK_ROOT=str(task_root),
        )
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")  # noqa: SIM115 (closed in stop())
        self.proc = subprocess.Popen(
            ["/bin/sh", str(ENTRYPOINT), "app.handler"],
            cwd=task_root,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        if wait:
            wait_for_port(self.port, proc=self.proc)
        return self

    def invoke(self, event: Any, timeout: float = 120.0) -> Any:
        return invoke(self.url, event, timeout)

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            # The RIE and its runtime child share a session: signal the whole group.
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        if self._log:
            self._log.close()
            self._log = None
