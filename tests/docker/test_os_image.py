"""scripts/os-image.sh pins Debian's suite and Python's minor version only: it builds with whatever
python3.13 revision the mirrors serve today, records the exact versions as labels, reuses its image
while the recipe and the revision stay, and rebuilds when the mirrors offer another revision.

The builds here start from the project's OS image as their Debian root (the script's DEBIAN_SLIM path,
as with debian:trixie-slim; a debootstrap would take minutes) and go to a repository of their own,
so the project's tags in this and other trees are not touched."""

from __future__ import annotations

import os
import re
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.docker
SCRIPT = REPO / "scripts" / "os-image.sh"
LABEL = "org.service-email-handler"


def _os_image(**env: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [str(SCRIPT)], env={**os.environ, **env}, capture_output=True, text=True, timeout=900, cwd=REPO
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def _in(image: str, *argv: str, network: str = "none") -> str:
    return subprocess.run(
        ["docker", "run", "--rm", "--network", network, image, *argv],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    ).stdout.strip()


@pytest.fixture
def repository(docker_client: Any) -> Iterator[str]:
    name = f"service-email-handler-test/os-{uuid.uuid4().hex[:8]}"
    yield name
    for image in docker_client.images.list(name=name):
        for tag in image.tags:
            docker_client.images.remove(tag, noprune=False)


@pytest.mark.timeout(1800)
def test_the_os_image_builds_with_the_revision_the_mirrors_serve_today(repository: str) -> None:
    script = SCRIPT.read_text()
    # No package is installed at an exact version (apt's PACKAGE=VERSION), and no version is pinned.
    assert not re.search(r"python3\.13[\w.-]*=", script) and "PYTHON_DEB_VERSION" not in script
    assert re.search(r"^PYTHON_MINOR=3\.13$", script, re.M) and re.search(r"^SUITE=trixie$", script, re.M)
    project = _os_image().stdout.strip()  # the project's own OS image (cached by `make images`)

    built = _os_image(OS_IMAGE_REPOSITORY=repository, DEBIAN_SLIM=project)
    tag = built.stdout.strip()
    assert tag.startswith(repository + ":") and "built " in built.stderr
    labels = _labels(tag)
    deb, python = labels[f"{LABEL}.python-deb"], labels[f"{LABEL}.python"]
    # What the labels say is what the image holds and what the mirrors serve today.
    assert _in(tag, "dpkg-query", "-W", "-f", "${Version}", "python3.13") == deb
    assert _in(tag, "python3", "-c", "import platform; print(platform.python_version())") == python
    assert deb.startswith(python + "-") and python.startswith("3.13.")
    assert _offered(tag) == deb
    assert tag.endswith("-" + deb.replace("+", "_").replace("~", "_").replace(":", "_"))

    # Cached while the recipe is the same: no network asked, the same image.
    again = _os_image(OS_IMAGE_REPOSITORY=repository, DEBIAN_SLIM=project)
    assert again.stdout.strip() == tag and "built earlier" in again.stderr
    # A refresh (what a deploy asks for) keeps it while the mirrors offer the same revision ...
    same = _os_image(OS_IMAGE_REPOSITORY=repository, DEBIAN_SLIM=project, OS_IMAGE_REFRESH="1")
    assert same.stdout.strip() == tag and "still what the mirrors offer" in same.stderr
    assert _labels(tag)["Id"] == labels["Id"]

    # ... and rebuilds when they offer another: an image of the same recipe labelled with an older
    # revision (what a security update leaves behind) is replaced by one with today's.
    older = deb.rsplit("u", 1)[0] + "u0" if "+deb" in deb else deb + "~old"
    stale = f"{repository}:stale"
    subprocess.run(
        ["docker", "build", "-q", "--network", "none", "-t", stale, "-"],
        input=f'FROM {tag}\nLABEL {LABEL}.python-deb="{older}"\n',
        text=True,
        check=True,
        capture_output=True,
    )
    rebuilt = _os_image(OS_IMAGE_REPOSITORY=repository, DEBIAN_SLIM=project, OS_IMAGE_REFRESH="1")
    assert f"the mirrors now offer python3.13 {deb} (the image has {older}): rebuilding" in rebuilt.stderr
    assert rebuilt.stdout.strip() == tag and _labels(tag)[f"{LABEL}.python-deb"] == deb
    assert _labels(tag)["Id"] != labels["Id"]


def _labels(image: str) -> dict[str, str]:
    import docker

    attrs = docker.from_env().images.get(image).attrs  # type: ignore[attr-defined]  # mypy: the repo's docker/
    return {**(attrs["Config"]["Labels"] or {}), "Id": attrs["Id"]}


def _offered(image: str) -> str:
    """The python3.13 the mirrors serve today, asked with the image's own apt sources."""
    policy = _in(
        image, "sh", "-c", "apt-get update -qq >/dev/null && apt-cache policy python3.13", network="host"
    )
    found = re.search(r"Candidate: (\S+)", policy)
    assert found, policy
    return found.group(1)
