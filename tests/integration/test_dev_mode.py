"""`email-handler dev` end to end: moto in-process, the six functions under the host RIE, the
wiring and the SMTP ingress, driven over SMTP and read back with `email-handler outbox`."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from deploy.functions import FUNCTIONS
from tests.conftest import REPO
from tests.support.devproc import DevProcess
from tests.support.scenario import LocalSystem, run_scenario


def outside_the_role_is_denied(endpoint: str) -> None:
    """With the credentials file's admin, take inbound-handler's role as Lambda would: what its
    policy allows works, anything else is denied."""
    import boto3

    from local.env import CREDENTIALS_FILE, admin_credentials

    admin = admin_credentials(CREDENTIALS_FILE)
    sts = boto3.client(
        "sts",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=admin["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=admin["AWS_SECRET_ACCESS_KEY"],
    )
    role = "arn:aws:iam::123456789012:role/service-email-handler-local-inbound-handler"
    creds = sts.assume_role(RoleArn=role, RoleSessionName="check")["Credentials"]
    s3 = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=creds["AccessKeyId"],
        aws_secret_access_key=creds["SecretAccessKey"],
        aws_session_token=creds["SessionToken"],
    )
    bucket = "service-email-handler-local-mail"
    s3.put_object(
        Bucket=bucket, Key="withheld/iam-check/1/x.exe", Body=b"x"
    )  # its policy: withheld parts, write only
    with pytest.raises(Exception, match="AccessDenied"):
        s3.get_object(Bucket=bucket, Key="withheld/iam-check/1/x.exe")  # not in its policy


@pytest.mark.timeout(600)
def test_email_handler_dev_end_to_end(tmp_path: Path) -> None:
    dev = DevProcess(tmp_path / "logs")
    aws, smtp, first = dev.aws, dev.smtp, dev.first
    try:
        dev.start(120)
        text = dev.text
        for f in FUNCTIONS:  # every endpoint is printed
            assert (
                f"http://127.0.0.1:{first + FUNCTIONS.index(f)}/2015-03-31/functions/function/invocations"
                in text
            )
        assert f"smtp://127.0.0.1:{smtp}" in text
        assert (
            "enforced: each function runs as its own role" in text
            and "AWS_PROFILE=local-admin aws --endpoint-url" in text
        )
        run_scenario(LocalSystem(smtp_port=smtp, endpoint=f"http://127.0.0.1:{aws}"))
        outside_the_role_is_denied(f"http://127.0.0.1:{aws}")
        # `email-handler inject`: stored and handed over as SES would, then where the mail went.
        fixture = REPO / "tests" / "fixtures" / "mail" / "latin1-charsets.eml"
        for extra, outcome in (([], "forwarded"), (["--verdict", "spam=FAIL"], "quarantined")):
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "ops.main",
                    "inject",
                    str(fixture),
                    "--endpoint",
                    f"http://127.0.0.1:{aws}",
                    *extra,
                ],
                cwd=REPO,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert done.returncode == 0, done.stdout + done.stderr
            result = json.loads(done.stdout)  # stdout is only the JSON result
            assert result["function"] == "inbound-handler" and result["outcome"] == outcome, result
            assert result["key"].endswith(f"/{result['messageId']}.eml")
        assert "[wiring] attachment-extractor" in dev.text  # the activity lines show the wiring at work
        up = local_status(aws, smtp, first)
        assert all(check(up, name)["ok"] for name in ("functions", "receipt rules", "domain identity")), up
        assert set(up["versions"]) == {f.name for f in FUNCTIONS}
        assert up["ready"] is (not up["reasons"])  # ready and the blocking checks agree
    finally:
        code = dev.stop()
    time.sleep(0.5)
    assert code == 0 and "[dev] stopped" in dev.text, dev.text[-2000:]
    for port in (aws, smtp, first):  # nothing left listening
        with socket.socket() as s:
            assert s.connect_ex(("127.0.0.1", port)) != 0


def local_status(aws: int, smtp: int, first: int) -> dict[str, Any]:
    """`email-handler status --env local --json`: the local stack read as a deployment is."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ops.main",
            "status",
            "--env",
            "local",
            "--json",
            "--endpoint",
            f"http://127.0.0.1:{aws}",
            "--function-port",
            str(first),
            "--smtp-port",
            str(smtp),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode in (0, 1), done.stdout + done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    assert report["ready"] is (done.returncode == 0)
    return report


def check(report: dict[str, Any], name: str) -> dict[str, Any]:
    [found] = [c for c in report["checks"] if c["check"] == name]
    return found


def dev_command(aws: int, smtp: int, first: int, log_dir: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "ops.main",
        "dev",
        "--emulator-port",
        str(aws),
        "--smtp-port",
        str(smtp),
        "--function-port",
        str(first),
        "--log-dir",
        str(log_dir),
    ]


def listening(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def rie_processes(ports: list[int]) -> list[str]:
    """Processes (the RIEs and their runtimes) started for these function ports, from /proc."""
    marks = [f"RIE_ADDRESS=127.0.0.1:{port}\0".encode() for port in ports]
    found = []
    for entry in Path("/proc").iterdir():
        try:
            environ = (entry / "environ").read_bytes() if entry.name.isdigit() else b""
        except OSError:
            continue
        if any(mark in environ for mark in marks):
            found.append(entry.name)
    return found


@pytest.mark.parametrize("taken", ["emulator", "smtp", "function"])
def test_dev_refuses_a_taken_port_at_once_and_says_which(tmp_path: Path, taken: str) -> None:
    # Before anything starts: moto's threaded server used to wait for ever on a taken port (SIGINT
    # and SIGTERM ignored), and an RIE port held by another listener looked like a started function.
    ports = DevProcess(tmp_path / "logs")  # free ports, kept apart
    aws, smtp, first = ports.aws, ports.smtp, ports.first
    port, flag = {
        "emulator": (aws, "--emulator-port"),
        "smtp": (smtp, "--smtp-port"),
        "function": (first + 2, "--function-port"),
    }[taken]
    with socket.socket() as other_stack:
        other_stack.bind(("127.0.0.1", port))
        other_stack.listen()
        began = time.monotonic()
        done = subprocess.run(
            dev_command(aws, smtp, first, tmp_path / "logs"),
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
        )
        took = time.monotonic() - began
    assert done.returncode == 2, done.stdout + done.stderr
    assert took < 30  # interpreter start-up and imports; nothing waits
    assert f"port {port} (" in done.stderr and "already in use" in done.stderr and flag in done.stderr, (
        done.stderr
    )
    assert "Traceback" not in done.stdout + done.stderr
    assert not any(listening(p) for p in (aws, smtp, first, first + 5))  # nothing was started
    assert rie_processes([first + i for i in range(len(FUNCTIONS))]) == []


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    "step,signum",
    [
        ("[dev] provisioning", signal.SIGINT),
        ("[dev] six functions under the RIE ...", signal.SIGINT),  # while the RIE processes start
        ("[dev] six functions under the RIE ...", signal.SIGTERM),
        ("[dev] event wiring", signal.SIGINT),
    ],
)
def test_a_signal_during_start_up_stops_everything_started(
    tmp_path: Path, step: str, signum: signal.Signals
) -> None:
    ports = DevProcess(tmp_path / "logs")
    aws, smtp, first = ports.aws, ports.smtp, ports.first
    proc = subprocess.Popen(
        dev_command(aws, smtp, first, tmp_path / "logs"),
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        output.append(line)
        if line.startswith(step):
            proc.send_signal(signum)
            break
    else:
        pytest.fail("".join(output))
    try:
        rest, _ = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    text = "".join(output) + rest
    assert proc.returncode == 128 + signum, text
    assert f"{signum.name} during start-up" in text and text.rstrip().endswith("[dev] stopped"), text
    assert "Traceback" not in text and "[dev] ready" not in text, text
    functions = [first + i for i in range(len(FUNCTIONS))]
    assert not any(listening(p) for p in (aws, smtp, *functions)), text
    assert rie_processes(functions) == [], text
