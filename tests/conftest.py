"""Fixtures every suite shares: a real moto server, functions under the host RIE, built images."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from common.aws import reset_clients
from common.local.motoserver import EmbeddedMoto
from common.local.rie import RieProcess, free_port
from common.localenv import local_env

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
IN_CI = os.environ.get("CI", "").lower() == "true"


def load_event(name: str) -> Any:
    return json.loads((FIXTURES / "events" / name).read_text())


def docker_available() -> bool:
    if shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "info"], capture_output=True).returncode == 0


def require_docker() -> None:
    """Skip docker tests only where no engine exists; under CI=true a missing engine fails."""
    if docker_available():
        return
    if IN_CI:
        pytest.fail("CI=true and no Docker engine: the docker suite must run, not skip")
    pytest.skip("no Docker engine on this machine")


@pytest.fixture(scope="session")
def local_defaults() -> dict[str, str]:
    return local_env()


@pytest.fixture(scope="session")
def moto_server(local_defaults: dict[str, str]) -> Iterator[str]:
    """A real moto server on a free port; AWS_ENDPOINT_URL points at it for the whole session."""
    server = EmbeddedMoto(port=free_port()).start()
    saved = {k: os.environ.get(k) for k in ("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_DEFAULT_REGION")}
    os.environ.update(
        AWS_ENDPOINT_URL=server.url, AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing",
        AWS_REGION=local_defaults["AWS_REGION"], AWS_DEFAULT_REGION=local_defaults["AWS_REGION"],
    )
    reset_clients()
    yield server.url
    server.stop()
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    reset_clients()


@pytest.fixture
def rie_function(tmp_path: Path, local_defaults: dict[str, str]) -> Iterator[Callable[..., RieProcess]]:
    """Start a function under the real RIE on the host: rie_function("ack-sender", **env_overrides)."""
    started: list[RieProcess] = []

    def start(function: str, env: dict[str, str] | None = None, drop: tuple[str, ...] = ()) -> RieProcess:
        merged = {**local_defaults, **(env or {})}
        if "AWS_ENDPOINT_URL" in os.environ:
            merged.setdefault("AWS_ENDPOINT_URL", os.environ["AWS_ENDPOINT_URL"])
        merged.update(dict.fromkeys(drop, ""))  # "" also masks the inherited environment; config treats it as unset
        proc = RieProcess(function, free_port(), merged, tmp_path / f"{function}-{len(started)}.log")
        started.append(proc.start())
        return proc

    yield start
    for proc in started:
        proc.stop()
