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

from local.emulator import EmbeddedMoto
from local.env import aws_endpoint, local_env
from local.rie import RieProcess, free_port

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


def require_chromium() -> None:
    """Skip browser tests only where Chromium is not installed; under CI=true a missing one fails
    (scripts/host-deps.sh installs Debian's chromium)."""
    if shutil.which("chromium") or shutil.which("chromium-browser"):
        return
    if IN_CI:
        pytest.fail("CI=true and no chromium: the browser tests must run, not skip")
    pytest.skip("no chromium on this machine (scripts/host-deps.sh installs it)")


@pytest.fixture(autouse=True)
def saved_deployments(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test's own folder for the deploy's saved settings (deploy.saved): a test's deploy never
    writes the project's .email-handler/, and never reads a developer's real one."""
    import deploy.saved

    folder = tmp_path_factory.mktemp("saved")
    monkeypatch.setattr(deploy.saved, "DIR", folder)
    return folder


@pytest.fixture(scope="session")
def local_defaults() -> dict[str, str]:
    return local_env()


IAM_ENFORCED = os.environ.get("IAM", "on").lower() != "off"


@pytest.fixture(scope="session")
def moto_server(local_defaults: dict[str, str]) -> Iterator[str]:
    """A real moto server on a free port that enforces IAM (``IAM=off`` turns that off); this
    process holds the local admin's credentials and AWS_ENDPOINT_URL points at it for the session."""
    server = EmbeddedMoto(port=free_port(), iam=IAM_ENFORCED).start()
    with aws_endpoint(server.url, local_defaults):
        yield server.url
    server.stop()


def role_exists(function: str) -> bool:
    """Its role is there: starting a function never restores a policy a test changed (only creates a missing
    role)."""
    from common.aws import client, or_none
    from deploy import config

    name = config.load(local_env()).name(function)
    return or_none(lambda: client("iam").get_role(RoleName=name), "NoSuchEntity") is not None


def _rie_starter(
    log_dir: Path, local_defaults: dict[str, str], started: list[RieProcess]
) -> Callable[..., RieProcess]:
    def start(function: str, env: dict[str, str] | None = None, drop: tuple[str, ...] = ()) -> RieProcess:
        merged = {**local_defaults, **(env or {})}
        if "AWS_ENDPOINT_URL" in os.environ:
            merged.setdefault("AWS_ENDPOINT_URL", os.environ["AWS_ENDPOINT_URL"])
            if "AWS_ACCESS_KEY_ID" not in (env or {}):  # as on Lambda: the credentials of its own role
                from deploy import config
                from local.env import function_credentials, without_secrets

                merged.update(
                    function_credentials(
                        config.load(local_defaults), function, ensure_role=not role_exists(function)
                    )
                )
                # and its secrets from SSM at cold start, unless the test hands it one
                merged = {**without_secrets(merged), **(env or {})}
        merged.update(
            dict.fromkeys(drop, "")
        )  # "" also masks the inherited environment; config treats it as unset
        proc = RieProcess(function, free_port(), merged, log_dir / f"{function}-{len(started)}.log")
        started.append(proc.start())
        return proc

    return start


@pytest.fixture
def rie_function(tmp_path: Path, local_defaults: dict[str, str]) -> Iterator[Callable[..., RieProcess]]:
    """Start a function under the real RIE on the host: rie_function("ack-sender", env={...})."""
    started: list[RieProcess] = []
    yield _rie_starter(tmp_path, local_defaults, started)
    for proc in started:
        proc.stop()


@pytest.fixture(scope="module")
def rie_module(
    tmp_path_factory: pytest.TempPathFactory, local_defaults: dict[str, str], moto_server: str
) -> Iterator[Callable[..., RieProcess]]:
    """Like rie_function, but the processes live for the whole test module (cold start paid once)."""
    started: list[RieProcess] = []
    yield _rie_starter(tmp_path_factory.mktemp("rie"), local_defaults, started)
    for proc in started:
        proc.stop()


@pytest.fixture
def stack(moto_server: str, local_defaults: dict[str, str]) -> Any:
    """A freshly reset and provisioned local stack (tests.support.harness.Stack) on the session's moto
    server."""
    from tests.support.harness import Stack

    return Stack(moto_server, local_defaults).reset()
