"""deploy.images: the deploy builds only what it ships, and pushes with the engine the docker CLI uses --
DOCKER_HOST, else the current `docker context` (Colima, OrbStack, Rancher Desktop, Docker Desktop
without the default socket) -- read from the CLI's own files, written here by the CLI's layout."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from deploy import images
from deploy.errors import DeployError
from deploy.images import engine_endpoint


def _context(config: Path, name: str, host: str) -> None:
    """What `docker context create NAME --docker host=HOST` writes under DOCKER_CONFIG."""
    meta = config / "contexts" / "meta" / hashlib.sha256(name.encode()).hexdigest()
    meta.mkdir(parents=True)
    (meta / "meta.json").write_text(
        json.dumps(
            {"Name": name, "Metadata": {}, "Endpoints": {"docker": {"Host": host, "SkipTLSVerify": False}}}
        )
    )


@pytest.fixture
def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in ("DOCKER_HOST", "DOCKER_CONTEXT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    _context(tmp_path, "colima", "unix:///home/me/.colima/default/docker.sock")
    _context(tmp_path, "orbstack", "unix:///home/me/.orbstack/run/docker.sock")
    return tmp_path


def test_the_current_context_of_the_cli_config_is_used(config: Path) -> None:
    (config / "config.json").write_text(json.dumps({"auths": {}, "currentContext": "colima"}))
    assert engine_endpoint() == ("unix:///home/me/.colima/default/docker.sock", None)


def test_docker_context_overrides_the_config_and_docker_host_overrides_both(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (config / "config.json").write_text(json.dumps({"currentContext": "colima"}))
    monkeypatch.setenv("DOCKER_CONTEXT", "orbstack")
    assert engine_endpoint() == ("unix:///home/me/.orbstack/run/docker.sock", None)
    # DOCKER_HOST wins, as for the CLI: docker-py's own environment handling (TLS variables included).
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:2376")
    assert engine_endpoint() == ("", None)


def test_the_default_context_or_none_means_docker_pys_default(
    config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (config / "config.json").write_text(json.dumps({"currentContext": "default"}))
    assert engine_endpoint() == ("", None)
    (config / "config.json").write_text(json.dumps({"auths": {}}))
    assert engine_endpoint() == ("", None)
    monkeypatch.setenv("DOCKER_CONTEXT", "default")
    assert engine_endpoint() == ("", None)


def test_a_context_that_does_not_exist_is_named(config: Path) -> None:
    (config / "config.json").write_text(json.dumps({"currentContext": "rancher-desktop"}))
    with pytest.raises(DeployError, match="'rancher-desktop' does not exist") as err:
        engine_endpoint()
    assert "docker context ls" in str(err.value)


def test_the_deploy_builds_the_function_images_only_and_refreshes_the_os_image(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[tuple[list[str], dict[str, str]]] = []

    def run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        calls.append((argv, kwargs["env"]))
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(images.subprocess, "run", run)
    images.build(lambda line: None)
    [(argv, env)] = calls
    # --functions: no emulator tools image; a Debian update of python3.13 reaches the deploy's images.
    assert argv[0].endswith("scripts/images.sh") and argv[1:] == ["--functions"]
    assert env["OS_IMAGE_REFRESH"] == "1" and env["BUILDX_NO_DEFAULT_ATTESTATIONS"] == "1"
