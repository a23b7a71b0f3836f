"""Fixtures for the built images: run one as a container and invoke it through its RIE port."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from deploy.functions import FUNCTIONS, image_ref
from local.rie import free_port, invoke, wait_for_http, wait_for_port
from tests.conftest import IN_CI, require_docker
from tests.docker.pushing import die_with_parent

BASE_IMAGE = image_ref("base")
LOCAL_IMAGE = image_ref("local")  # emulator, wiring, SMTP ingress of the compose stack
REPO = Path(__file__).resolve().parents[2]


@pytest.hookimpl(tryfirst=True, optionalhook=True)  # before pytest-xdist's own choice
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Under ``-n N --dist loadscope`` (scripts/test.sh): one test file per worker, except that each of
    test_compose.py's two stacks is a unit of its own. A worker brings up one stack once, and the two
    stacks, which mostly wait on their containers, come up side by side instead of one after the other.
    (pytest-xdist's ``xdist_group`` marks cannot do this: pytest 9 ignores the node id it rewrites.)"""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ByFileAndStack(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path, _, test = nodeid.partition("::")
            stack = (
                re.match(r"[^\[]*\[(localstack|moto)\b", test) if path.endswith("test_compose.py") else None
            )
            return f"{path}::{stack.group(1)}" if stack else path

    return ByFileAndStack(config, log)


@pytest.fixture(scope="session")
def docker_client() -> Any:
    require_docker()
    import docker

    client = docker.from_env()  # type: ignore[attr-defined]  # mypy resolves the repository's docker/
    wanted = [f.image for f in FUNCTIONS] + [LOCAL_IMAGE]
    missing = [image for image in wanted if not client.images.list(name=image)]
    if missing or not client.images.list(name=BASE_IMAGE):
        pytest.fail(
            f"images missing ({', '.join(missing) or BASE_IMAGE}): run `make images` (make test does)"
        )
    import importlib.util

    spec = importlib.util.spec_from_file_location("source_hash", REPO / "scripts" / "source-hash.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    built = client.images.get(BASE_IMAGE).labels.get("org.service-email-handler.source")
    if built != module.source_hash():
        pytest.fail(
            "the images were built from other sources than this tree: run `make images` (make test does)"
        )
    return client


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[str]:
    """Debian's docker-registry on a free loopback port, standing in for ECR (``--registry``)."""
    binary = shutil.which("docker-registry")
    if binary is None:
        message = "docker-registry is not installed (scripts/host-deps.sh installs it)"
        pytest.fail(message) if IN_CI else pytest.skip(message)
    port = free_port()
    config = tmp_path / "registry.yml"
    config.write_text(
        f"version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {tmp_path}/data\n"
        f"http:\n  addr: 127.0.0.1:{port}\n"
    )
    proc = subprocess.Popen(
        [binary, "serve", str(config)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
        preexec_fn=die_with_parent,
    )
    host = f"127.0.0.1:{port}"
    try:
        wait_for_port(port, proc=proc)
        yield host
    finally:
        proc.terminate()
        proc.wait(10)
        import docker  # the push tagged the local images for this registry: drop those tags again

        engine = docker.from_env()  # type: ignore[attr-defined]  # mypy resolves the repository's docker/
        # One listing call with the tags in it: images.list() inspects each image after listing, and an
        # image another test removes in between (the suite runs in parallel) raised ImageNotFound here.
        for image in engine.api.images():
            for tag in image.get("RepoTags") or []:
                if tag.startswith(host + "/"):
                    try:
                        engine.images.remove(tag, noprune=True)
                    except docker.errors.ImageNotFound:  # type: ignore[attr-defined]  # as above
                        pass  # already gone with its image


@dataclass
class RunningImage:
    container: Any
    url: str

    def invoke(self, event: Any, timeout: float = 120.0) -> Any:
        return invoke(self.url, event, timeout)

    def logs(self) -> str:
        return self.container.logs().decode(errors="replace")


@pytest.fixture
def run_image(docker_client: Any, local_defaults: dict[str, str]) -> Iterator[Callable[..., RunningImage]]:
    """run_image(image, env=..., host_network=False): like `docker run -p PORT:8080 --read-only IMAGE`."""
    containers: list[Any] = []

    def start(
        image: str,
        env: dict[str, str] | None = None,
        host_network: bool = False,
        wait: bool = True,
        **kwargs: Any,
    ) -> RunningImage:
        environment = {**local_defaults, **(env or {})}
        port = free_port()
        options: dict[str, Any] = dict(
            detach=True,
            read_only=True,
            tmpfs={"/tmp": "rw,size=64m"},
            environment=environment,
            labels={"service-email-handler.test": os.environ.get("PYTEST_XDIST_WORKER", "main")},
        )
        if host_network:
            # Reaches a moto server on the host's loopback; the RIE binds a free port instead of 8080.
            environment.update(
                RIE_ADDRESS=f"127.0.0.1:{port}", RIE_RUNTIME_API_ADDRESS=f"127.0.0.1:{free_port()}"
            )
            options["network_mode"] = "host"
        else:
            options["ports"] = {"8080/tcp": ("127.0.0.1", port)}
        options.update(kwargs)
        # Created, then started: `containers.run` leaves a container whose start fails behind, unnamed.
        container = docker_client.containers.create(image, **options)
        containers.append(container)
        container.start()
        if wait:
            wait_for_http(f"http://127.0.0.1:{port}/", timeout=30)
        return RunningImage(container, f"http://127.0.0.1:{port}")

    yield start
    for c in containers:
        c.remove(force=True)
