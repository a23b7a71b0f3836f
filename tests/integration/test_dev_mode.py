"""`email-handler dev` end to end: moto in-process, the six functions under the host RIE, the
wiring and the SMTP ingress, driven over SMTP and read back with `email-handler outbox`."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from common.local.rie import free_port
from common.runtime.functions import FUNCTIONS
from tests.conftest import REPO
from tests.support.scenario import LocalSystem, run_scenario


def consecutive_free_ports(count: int) -> int:
    for _ in range(50):
        base = free_port()
        if base + count > 65000:
            continue
        try:
            socks = []
            for port in range(base, base + count):
                s = socket.socket()
                s.bind(("127.0.0.1", port))
                socks.append(s)
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
        return base
    raise RuntimeError("no run of free ports")


@pytest.mark.timeout(600)
def test_email_handler_dev_end_to_end(tmp_path) -> None:
    aws, smtp, first = free_port(), free_port(), consecutive_free_ports(len(FUNCTIONS))
    proc = subprocess.Popen(
        [sys.executable, "-m", "common.local.cli", "dev", "--emulator-port", str(aws), "--smtp-port", str(smtp),
         "--function-port", str(first), "--log-dir", str(tmp_path / "logs"), "--visibility-timeout", "1"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output: list[str] = []
    ready = threading.Event()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            output.append(line)
            if line.startswith("[dev] ready"):
                ready.set()
        ready.set()  # the process ended: stop waiting (the assertion below says why)

    threading.Thread(target=read, daemon=True).start()
    try:
        assert ready.wait(120) and proc.poll() is None, "".join(output)[-3000:]
        text = "".join(output)
        for f in FUNCTIONS:  # every endpoint is printed
            assert f"http://127.0.0.1:{first + FUNCTIONS.index(f)}/2015-03-31/functions/function/invocations" in text
        assert f"smtp://127.0.0.1:{smtp}" in text
        run_scenario(LocalSystem(smtp_port=smtp, endpoint=f"http://127.0.0.1:{aws}"))
        # `email-handler inject`: stored and handed over as SES would, then where the mail went.
        fixture = REPO / "tests" / "fixtures" / "mail" / "latin1-charsets.eml"
        for extra, outcome in (([], "forwarded"), (["--verdict", "spam=FAIL"], "quarantined")):
            done = subprocess.run([sys.executable, "-m", "common.local.cli", "inject", str(fixture), "--endpoint",
                                   f"http://127.0.0.1:{aws}", *extra], cwd=REPO, capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, done.stdout + done.stderr
            result = json.loads(done.stdout)  # stdout is only the JSON result
            assert result["function"] == "inbound-handler" and result["outcome"] == outcome, result
            assert result["key"].endswith(f"/{result['messageId']}.eml")
        assert "[wiring] attachment-extractor" in "".join(output)  # the activity lines show the wiring at work
    finally:
        proc.send_signal(signal.SIGINT)  # what Ctrl-C sends
        try:
            code = proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    time.sleep(0.5)
    assert code == 0 and "[dev] stopped" in "".join(output), "".join(output)[-2000:]
    for port in (aws, smtp, first):  # nothing left listening
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", port)) != 0
