"""``email-handler dev``: the whole system on this machine without Docker.

An in-process moto server, the six functions under the real RIE on the host (the images' entry
script, the same ports as ``make up``), the local event wiring and the SMTP ingress. Each part
reports as it starts; :meth:`DevStack.stop` takes them down in reverse order.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from common.local.rie import INVOKE_PATH, REPO
from common.runtime.functions import FUNCTIONS

AWS_PORT, SMTP_PORT = 4566, 2525


@dataclass
class DevPorts:
    emulator: int = AWS_PORT
    smtp: int = SMTP_PORT
    functions: dict[str, int] = field(default_factory=lambda: {f.name: f.port for f in FUNCTIONS})


def function_env(name: str) -> dict[str, str]:
    """What Lambda would set from the function's configuration (the RIE reads the timeout)."""
    from common.runtime.functions import BY_NAME

    spec = BY_NAME[name]
    return {"AWS_LAMBDA_FUNCTION_TIMEOUT": str(spec.timeout_s), "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(spec.memory_mb)}


def ensure_rie() -> None:
    """Fetch the RIE binary on first use (it comes from the pinned aws-sam-cli wheel)."""
    from common.local.rie import rie_binary

    try:
        rie_binary()
    except FileNotFoundError:
        script = REPO / "scripts" / "wheelhouse.sh"
        if not script.exists():
            raise
        import subprocess

        subprocess.run([str(script)], check=True, cwd=REPO)


class DevStack:
    def __init__(self, env: dict[str, str], ports: DevPorts, log_dir: Path, visibility_s: int | None = None,
                 report: Callable[[str], None] = print, activity: Callable[[str], None] | None = None) -> None:
        self.env, self.ports, self.log_dir, self.visibility_s = env, ports, log_dir, visibility_s
        self.report, self.activity = report, activity
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
        from common.local.emulator import EmbeddedMoto
        from common.local.env import use_endpoint
        from common.local.ingress import SmtpIngress
        from common.local.rie import RieProcess, wait_for_port
        from common.local.wiring import Endpoint, Wiring
        from common.runtime import config
        from deploy import resources

        ensure_rie()
        moto = self._step(f"AWS emulator (moto) on {self.endpoint}",
                          lambda: EmbeddedMoto(port=self.ports.emulator).start())
        self._stoppers.append(("emulator", moto.stop))
        # This process's own clients (provisioning, wiring, ingress) talk to the emulator too.
        use_endpoint(self.endpoint, self.env)
        cfg = config.load(self.env)
        self._step("provisioning (queues, tables, bucket, topics, wiring queues)",
                   lambda: resources.provision(cfg, local=True))

        def functions() -> dict[str, RieProcess]:
            started = {}
            for name, port in self.ports.functions.items():
                proc = RieProcess(name, port, {**self.env, **function_env(name), "AWS_ENDPOINT_URL": self.endpoint,
                                               "PYTHON": sys.executable}, self.log_dir / f"{name}.log")
                started[name] = proc.start(wait=False)
                self._stoppers.append((name, proc.stop))
            for proc in started.values():
                wait_for_port(proc.port, proc=proc.proc)
            return started

        procs = self._step("six functions under the RIE", functions)
        endpoints = {name: Endpoint(name, proc.url) for name, proc in procs.items()}
        self.wiring = self._step("event wiring (SQS, S3, SNS, async invocations)",
                                 lambda: Wiring(cfg, endpoints, self.visibility_s, report=self.activity).start())
        self._stoppers.append(("wiring", self.wiring.stop))
        ingress = self._step(f"SMTP ingress on 127.0.0.1:{self.ports.smtp}",
                             lambda: SmtpIngress(cfg, "127.0.0.1", self.ports.smtp).start())
        self._stoppers.append(("smtp", ingress.stop))
        self.cfg = cfg
        return self

    def stop(self) -> None:
        while self._stoppers:
            name, stop = self._stoppers.pop()
            try:
                stop()
            except Exception as exc:  # keep stopping the rest
                self.report(f"[dev] stopping {name} failed: {exc}")

    def summary(self) -> str:
        cfg = self.cfg
        lines = [
            "",
            "[dev] ready. Ctrl-C stops everything.",
            f"  AWS emulator (moto)   {self.endpoint}",
            f"  SMTP ingress          smtp://127.0.0.1:{self.ports.smtp}   accepts {cfg.public_email} and *@{cfg.thread_domain}",
        ]
        for name, port in self.ports.functions.items():
            lines.append(f"  {name:<21} http://127.0.0.1:{port}{INVOKE_PATH}")
        lines += [
            f"  function logs         {self.log_dir}/",
            "",
            "  send a test mail:  email-handler inject tests/fixtures/mail/latin1-charsets.eml",
            f"     or over SMTP:  python3 -c \"import smtplib; smtplib.SMTP('127.0.0.1', {self.ports.smtp}).sendmail("
            f"'jane@corp.example', ['{cfg.public_email}'], 'From: Jane <jane@corp.example>\\r\\nTo: {cfg.public_email}"
            "\\r\\nSubject: Hello\\r\\n\\r\\nHi there')\"",
            "  see what went out: email-handler outbox",
        ]
        return "\n".join(lines)
