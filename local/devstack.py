"""``email-handler dev``: the whole system on this machine without Docker.

An in-process moto server, the six functions under the real RIE on the host (the images' entry
script, the same ports as ``make up``), the local event wiring and the SMTP ingress. Every port is
checked before anything starts (:func:`check_ports`); each part reports as it starts, and is
registered for :meth:`DevStack.stop` before it starts, so a stop at any moment of start-up takes
down whatever is running, in reverse order.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cli.command import EMULATOR_PORT
from common.aws.sts import account_id
from common.errors import EmailHandlerError
from deploy import config, dns
from deploy.preflight import with_key_files
from local import provision
from local.concurrency import AccountConcurrency
from local.emulator import EmbeddedMoto
from local.env import (
    admin_credentials,
    cli_hint,
    function_credentials,
    function_environment,
    use_endpoint,
    write_admin_credentials,
)
from local.ingress import SmtpIngress
from local.ports import PORTS, SMTP_PORT
from local.rie import INVOKE_PATH, REPO, RieProcess, free_port, rie_binary, wait_for_port
from local.wiring import Endpoint, Wiring

HOST = "127.0.0.1"


def free_ports(count: int, avoid: set[int]) -> list[int]:
    """``count`` distinct ports the OS says are free now, none of them in ``avoid``."""
    found: list[int] = []
    while len(found) < count:
        port = free_port()
        if port not in avoid and port not in found:
            found.append(port)
    return found


@dataclass
class DevPorts:
    emulator: int = EMULATOR_PORT
    smtp: int = SMTP_PORT
    functions: dict[str, int] = field(default_factory=lambda: dict(PORTS))
    # Each RIE's internal Runtime API (its default, 9001, is a function port): picked free when not given.
    runtime_apis: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.runtime_apis:
            picked = free_ports(len(self.functions), {self.emulator, self.smtp, *self.functions.values()})
            self.runtime_apis = dict(zip(self.functions, picked, strict=True))

    def listeners(self) -> list[tuple[int, str, str]]:
        """Every port dev listens on: (port, what listens there, how to choose another)."""
        function_flag = "--function-port (the first of six consecutive ports)"
        return [
            (self.emulator, "AWS emulator", "--emulator-port"),
            (self.smtp, "SMTP ingress", "--smtp-port"),
            *((port, f"{name} RIE", function_flag) for name, port in self.functions.items()),
            *(
                (port, f"{name} RIE's internal Runtime API", "it is picked free at start: start again")
                for name, port in self.runtime_apis.items()
            ),
        ]


class FunctionStartError(EmailHandlerError, RuntimeError):
    """A function's RIE exited before it listened; the message quotes the end of its log."""


class PortsUnavailableError(EmailHandlerError):
    """Ports dev cannot listen on; the message names each one and what to do."""


class Interrupted(BaseException):
    """SIGINT or SIGTERM while starting (a BaseException, like KeyboardInterrupt: nothing swallows it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"signal {signum}")
        self.signum = signum


class SignalGuard:
    """What SIGINT and SIGTERM do to ``email-handler dev`` at each moment.

    While starting, a signal raises :class:`Interrupted` in the main thread, which ends any wait at
    once (a lock, a socket, a sleep); inside :meth:`critical` it is held until the block ends, so a
    child process is never started without being recorded for the stop. While running, a signal
    sets :attr:`signum` (:meth:`wait` polls it: a handler must not touch locks the main thread may
    hold); while stopping, signals are ignored (the stop is already under way).
    """

    def __init__(self) -> None:
        self.phase = "starting"
        self.signum = 0
        self._held = 0
        self._depth = 0

    def install(self) -> None:
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, self._on_signal)

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.signum = self.signum or signum
        if self.phase == "starting":
            if self._depth:
                self._held = self._held or signum
                return
            self.phase = "stopping"
            raise Interrupted(signum)

    @contextlib.contextmanager
    def critical(self) -> Iterator[None]:
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            if not self._depth and self._held and self.phase == "starting":
                self.phase = "stopping"
                raise Interrupted(self._held)

    def running(self) -> None:
        self.phase = "running"

    def wait(self, poll_s: float = 0.2) -> int:
        """While running: block until SIGINT or SIGTERM; returns the signal."""
        while not self.signum:
            time.sleep(poll_s)
        return self.signum

    def stopping(self) -> None:
        self.phase = "stopping"


def port_taken(port: int, host: str = HOST) -> bool:
    """Whether something listens on ``host:port`` (or holds it): the bind the server would do fails.
    SO_REUSEADDR, as the servers use it: connections still closing do not count."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def check_ports(ports: DevPorts) -> None:
    """Raise :class:`PortsUnavailableError` naming every port that is out of range, given twice or taken."""
    problems: list[str] = []
    owner: dict[int, str] = {}
    for port, what, how in ports.listeners():
        if not 0 < port < 65536:
            problems.append(f"port {port} ({what}) is not a valid port: choose another with {how}")
        elif port in owner:
            problems.append(
                f"port {port} is given to both the {owner[port]} and the {what}: choose another with {how}"
            )
        elif port_taken(port):
            problems.append(
                f"port {port} ({what}) is already in use, probably by another local stack: stop it "
                f"(`make down`, or Ctrl-C the other `email-handler dev`) or choose another port with {how}"
            )
        owner.setdefault(port, what)
    if problems:
        raise PortsUnavailableError("\n".join(problems))


def ensure_rie() -> None:
    """Fetch the RIE binary on first use (it comes from the pinned aws-sam-cli wheel)."""

    try:
        rie_binary()
    except FileNotFoundError:
        script = REPO / "scripts" / "wheelhouse.sh"
        if not script.exists():
            raise

        subprocess.run([str(script)], check=True, cwd=REPO)


class DevStack:
    def __init__(
        self,
        env: dict[str, str],
        ports: DevPorts,
        log_dir: Path,
        visibility_s: int | None = None,
        report: Callable[[str], None] = print,
        activity: Callable[[str], None] | None = None,
        guard: SignalGuard | None = None,
        iam: bool = True,
        account: str = "default",
    ) -> None:
        self.env, self.ports, self.log_dir, self.visibility_s, self.iam = (
            env,
            ports,
            log_dir,
            visibility_s,
            iam,
        )
        self.account = account  # "fresh": the emulator models a new AWS account (local/fresh.py)
        self.report, self.activity = report, activity
        self.guard = guard
        self._stoppers: list[tuple[str, Callable[[], None]]] = []
        self.wiring: Any = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.ports.emulator}"

    def _step(self, what: str, start: Callable[[], Any]) -> Any:
        began = time.monotonic()
        self.report(f"[dev] {what} ...")
        result = start()
        self.report(f"[dev] {what}: ok ({time.monotonic() - began:.1f}s)")
        return result

    def start(self) -> DevStack:
        """Check every port, then start each part. Raises :class:`PortsUnavailableError` before anything
        started; whatever the start raises (a signal's exception too), :meth:`stop` undoes it."""

        # The owner's key first: one that cannot encrypt stops the start before anything runs.
        keys = with_key_files(config.load(self.env))  # the owner's and each mailbox's (MAILBOX_KEYS)
        check_ports(self.ports)
        ensure_rie()
        enforced = "IAM enforced" if self.iam else "IAM not enforced (--no-iam)"
        moto = self._register(
            "emulator", EmbeddedMoto(HOST, self.ports.emulator, iam=self.iam, account=self.account)
        )
        self._step(f"AWS emulator (moto, {enforced}) on {self.endpoint}", moto.start)
        # This process's own clients (provisioning, wiring, ingress) talk to the emulator as the local admin.
        self.credentials_file = write_admin_credentials()
        self.env = {**self.env, **admin_credentials(self.credentials_file)}
        use_endpoint(self.endpoint, self.env)
        cfg = replace(
            config.load(self.env), owner_key=keys.owner_key, mailbox_key_texts=keys.mailbox_key_texts
        )
        self._step(
            "provisioning (queues, tables, bucket, topics, wiring queues, the six roles)",
            lambda: provision.provision(cfg, wiring=True),
        )
        if self.account == "fresh":  # a new account: the domain waits for its DNS records, as on AWS
            self._fresh_account_note(cfg)
        # As on Lambda, each function runs with credentials of its own role (deploy/iam.py's policy).
        roles = {name: function_credentials(cfg, name, ensure_role=False) for name in self.ports.functions}
        procs = self._start_functions(roles)
        endpoints = {name: Endpoint(name, proc.url) for name, proc in procs.items()}
        # Each SQS-fed function's queue is polled with its role, as Lambda's event-source mapping does;
        # the account's concurrency (10 on a fresh account) throttles what runs at once.
        concurrency = AccountConcurrency.of_account()
        self.wiring = self._register(
            "wiring",
            Wiring(cfg, endpoints, self.visibility_s, report=self.activity, roles=roles, account=concurrency),
        )
        self._step("event wiring (SQS, S3, SNS, async invocations)", self.wiring.start)
        ingress = self._register("smtp", SmtpIngress(cfg, HOST, self.ports.smtp))
        self._step(f"SMTP ingress on {HOST}:{self.ports.smtp}", ingress.start)
        self.cfg = cfg
        return self

    def _fresh_account_note(self, cfg: Any) -> None:
        """The new account's first steps: the zone file to publish, then the owner's and AWS's clicks."""

        zone = dns.write(cfg, dns.records(cfg), Path(".build/dev"))
        print(
            f"[dev] new account: publish the domain's records with `email-handler dns publish {zone} "
            f"--endpoint {self.endpoint}`; then `email-handler model verify-address "
            f"{cfg.private_email}`, `model confirm-subscriptions` and `model grant-production` stand in "
            "for the owner and AWS",
            flush=True,
        )

    def _start_functions(self, roles: dict[str, dict[str, str]]) -> dict[str, Any]:
        """The six functions under the RIE, each with its role's credentials; started together, then
        waited for."""

        account = account_id()
        procs = {
            name: self._register(
                name,
                RieProcess(
                    name,
                    port,
                    function_environment(
                        {
                            **self.env,
                            **roles[name],
                            "ACCOUNT_ID": account,  # as the deploy sets it: no STS call at cold start
                            "AWS_ENDPOINT_URL": self.endpoint,
                            "PYTHON": sys.executable,
                        }
                    ),
                    self.log_dir / f"{name}.log",
                    api_port=self.ports.runtime_apis[name],
                ),
            )
            for name, port in self.ports.functions.items()
        }

        def functions() -> None:
            for proc in procs.values():
                with self.guard.critical() if self.guard else contextlib.nullcontext():
                    proc.start(wait=False)  # a child started is a child recorded
            for name, proc in procs.items():
                try:
                    wait_for_port(proc.port, proc=proc.proc)
                except RuntimeError as exc:  # it exited: its log says why (a port taken since the check ...)
                    tail = proc.output().strip().splitlines()[-3:]
                    raise FunctionStartError(f"{name}: {exc}; {proc.log_path}: " + " | ".join(tail)) from None

        self._step("six functions under the RIE", functions)
        return procs

    def _register(self, name: str, part: Any) -> Any:
        """Put ``part`` on the stop list before it starts: a stop during its start still stops it."""
        self._stoppers.append((name, part.stop))
        return part

    def stop(self) -> None:
        while self._stoppers:
            name, stop = self._stoppers.pop()
            try:
                stop()
            except Exception as exc:  # keep stopping the rest
                self.report(f"[dev] stopping {name} failed: {exc}")

    def summary(self) -> str:
        cfg = self.cfg
        iam = "enforced: each function runs as its own role" if self.iam else "not enforced"
        lines = [
            "",
            "[dev] ready. Ctrl-C stops everything.",
            f"  AWS emulator (moto)   {self.endpoint}",
            f"  SMTP ingress          smtp://127.0.0.1:{self.ports.smtp}   "
            f"accepts {', '.join(cfg.public_emails or [cfg.public_email])} and *@{cfg.thread_domain}",
        ]
        for name, port in self.ports.functions.items():
            lines.append(f"  {name:<21} http://127.0.0.1:{port}{INVOKE_PATH}")
        lines += [
            f"  function logs         {self.log_dir}/",
            f"  IAM                   {iam}",
            f"  admin credentials     {self.credentials_file} (profile local-admin; inject/outbox use them)",
            f"     with the AWS CLI:  {cli_hint(self.endpoint, self.credentials_file)}",
            "",
            "  send a test mail:  email-handler inject tests/fixtures/mail/latin1-charsets.eml",
            '     or over SMTP:  python3 -c "import smtplib; '
            f"smtplib.SMTP('127.0.0.1', {self.ports.smtp}).sendmail("
            f"'jane@corp.example', ['{cfg.public_email}'], "
            f"'From: Jane <jane@corp.example>\\r\\nTo: {cfg.public_email}"
            "\\r\\nSubject: Hello\\r\\n\\r\\nHi there')\"",
            "  see what went out: email-handler outbox",
        ]
        return "\n".join(lines)
