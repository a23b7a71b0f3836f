"""`make up` end to end: the compose stack (moto emulator, six functions, init, wiring, SMTP ingress)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from common.local.rie import free_port, invoke
from common.runtime.functions import FUNCTIONS
from tests.support.cases import CASES, event_for
from tests.support.scenario import LocalSystem, run_scenario

pytestmark = pytest.mark.docker
REPO = Path(__file__).resolve().parents[2]
# Its own compose project per image tag, so trees building side by side (IMAGE_TAG) do not collide.
PROJECT = "seh-test-" + (os.environ.get("IMAGE_TAG") or "latest")


@pytest.fixture(scope="module")
def stack(docker_client) -> Iterator[dict[str, int]]:
    """`scripts/compose.sh up` (what `make up` runs) under its own project name and free ports."""
    ports = {f.name: free_port() for f in FUNCTIONS} | {"aws": free_port(), "smtp": free_port()}
    env = {
        **os.environ, "EMULATOR": "moto", "COMPOSE_PROJECT_NAME": PROJECT, "EMULATOR_PORT": str(ports["aws"]),
        "SMTP_PORT": str(ports["smtp"]), **{f"{f.name.upper().replace('-', '_')}_PORT": str(ports[f.name]) for f in FUNCTIONS},
        # A failed send is retried after 1 s instead of the queue's 18 minutes, so the DLQ step takes seconds.
        "WIRING_VISIBILITY_TIMEOUT": "1",
    }
    up = subprocess.run([str(REPO / "scripts/compose.sh"), "up"], env=env, capture_output=True, text=True, timeout=600)
    try:
        assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-3000:]
        # emulator + 6 functions + wiring + smtp healthy; init provisioned the emulator and exited 0
        assert "all 9 services healthy, 1 one-shot done" in up.stdout
        assert f"http://127.0.0.1:{ports['ack-sender']}" in up.stdout  # prints how to reach each function
        assert f"smtp://127.0.0.1:{ports['smtp']}" in up.stdout and "email-handler outbox" in up.stdout
        yield ports
    finally:
        down = subprocess.run([str(REPO / "scripts/compose.sh"), "down"], env=env, capture_output=True, text=True, timeout=120)
    # `make down` stops it all: no container of the project is left behind.
    assert down.returncode == 0, down.stderr[-2000:]
    assert docker_client.containers.list(all=True, filters={"label": f"com.docker.compose.project={PROJECT}"}) == []


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.function)
def test_compose_function_answers(stack, case) -> None:
    case.check(invoke(f"http://127.0.0.1:{stack[case.function]}", event_for(case)))


def test_compose_emulator_reachable_from_host(stack) -> None:
    import boto3

    s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{stack['aws']}", region_name="us-east-1",
                      aws_access_key_id="testing", aws_secret_access_key="testing")
    s3.create_bucket(Bucket="compose-probe")
    assert "compose-probe" in [b["Name"] for b in s3.list_buckets()["Buckets"]]


def test_compose_end_to_end_over_smtp(stack) -> None:
    run_scenario(LocalSystem(smtp_port=stack["smtp"], endpoint=f"http://127.0.0.1:{stack['aws']}"))
