"""`make up` end to end: the compose stack (moto emulator) with every function reachable."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from common.functions import FUNCTIONS
from common.local.rie import free_port, invoke
from tests.cases import CASES, event_for

pytestmark = pytest.mark.docker
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def stack(docker_client) -> Iterator[dict[str, int]]:
    """`scripts/compose.sh up` (what `make up` runs) under its own project name and free ports."""
    ports = {f.name: free_port() for f in FUNCTIONS} | {"aws": free_port()}
    env = {
        **os.environ, "EMULATOR": "moto", "COMPOSE_PROJECT_NAME": "seh-test", "EMULATOR_PORT": str(ports["aws"]),
        **{f"{f.name.upper().replace('-', '_')}_PORT": str(ports[f.name]) for f in FUNCTIONS},
    }
    up = subprocess.run([str(REPO / "scripts/compose.sh"), "up"], env=env, capture_output=True, text=True, timeout=600)
    try:
        assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-3000:]
        assert "all 7 services healthy" in up.stdout
        assert f"http://127.0.0.1:{ports['ack-sender']}" in up.stdout  # prints how to reach each function
        yield ports
    finally:
        down = subprocess.run([str(REPO / "scripts/compose.sh"), "down"], env=env, capture_output=True, text=True, timeout=120)
    # `make down` stops it all: no container of the project is left behind.
    assert down.returncode == 0, down.stderr[-2000:]
    assert docker_client.containers.list(all=True, filters={"label": "com.docker.compose.project=seh-test"}) == []


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.function)
def test_compose_function_answers(stack, case) -> None:
    case.check(invoke(f"http://127.0.0.1:{stack[case.function]}", event_for(case)))


def test_compose_emulator_reachable_from_host(stack) -> None:
    import boto3

    s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{stack['aws']}", region_name="us-east-1",
                      aws_access_key_id="testing", aws_secret_access_key="testing")
    s3.create_bucket(Bucket="compose-probe")
    assert "compose-probe" in [b["Name"] for b in s3.list_buckets()["Buckets"]]

