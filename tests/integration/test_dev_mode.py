"""`email-handler dev` end to end: moto in-process, the six functions under the host RIE, the
wiring and the SMTP ingress, driven over SMTP and read back with `email-handler outbox`."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import pytest

from common.runtime.functions import FUNCTIONS
from tests.conftest import REPO
from tests.support.devproc import DevProcess
from tests.support.scenario import LocalSystem, run_scenario


@pytest.mark.timeout(600)
def test_email_handler_dev_end_to_end(tmp_path) -> None:
    dev = DevProcess(tmp_path / "logs")
    aws, smtp, first = dev.aws, dev.smtp, dev.first
    try:
        dev.start(120)
        text = dev.text
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
        assert "[wiring] attachment-extractor" in dev.text  # the activity lines show the wiring at work
    finally:
        code = dev.stop()
    time.sleep(0.5)
    assert code == 0 and "[dev] stopped" in dev.text, dev.text[-2000:]
    for port in (aws, smtp, first):  # nothing left listening
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", port)) != 0
