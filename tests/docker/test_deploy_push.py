"""`email-handler deploy` end to end with real images: ECR's token, docker login, registry query and
push against a local registry (Debian's docker-registry on 127.0.0.1) standing in for ECR, and
the AWS side on a moto server. Run as the user runs it: the console script in a subprocess."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from common.runtime.functions import FUNCTIONS
from local.guard import admin_request
from local.rie import free_port, wait_for_port
from tests.conftest import IN_CI, REPO

pytestmark = pytest.mark.docker
PREFIX = "service-email-handler-prd"


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[str]:
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
        [binary, "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
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
        for image in engine.images.list():
            for tag in image.tags:
                if tag.startswith(host + "/"):
                    engine.images.remove(tag, noprune=True)


def deploy_cli(
    registry: str, moto_url: str, local_defaults: dict[str, str], *extra: str
) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        **{k: v for k, v in local_defaults.items() if k != "ENVIRONMENT"},
        "AWS_ENDPOINT_URL": moto_url,
        "THREAD_SECRET": "0123456789abcdef" * 4,
    }
    return subprocess.run(
        [sys.executable, "-m", "ops.main", "deploy", "--registry", registry, *extra],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


SINGLE_PLATFORM = (
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
)
# Accept everything a registry may hold, so an image index (what BuildKit pushes with attestations or
# for several platforms, and Lambda refuses) would come back as what it is instead of a 404.
ANY_MANIFEST = ", ".join(
    SINGLE_PLATFORM
    + ("application/vnd.oci.image.index.v1+json", "application/vnd.docker.distribution.manifest.list.v2+json")
)


def manifest(registry: str, repository: str, reference: str) -> tuple[str, str, dict]:
    """(media type, digest, document) of a pushed manifest, from the registry's HTTP API v2."""
    request = urllib.request.Request(
        f"http://{registry}/v2/{repository}/manifests/{reference}", headers={"Accept": ANY_MANIFEST}
    )
    with urllib.request.urlopen(request, timeout=10) as resp:
        return (
            str(resp.headers["Content-Type"]).split(";")[0],
            str(resp.headers["Docker-Content-Digest"]),
            json.loads(resp.read()),
        )


@pytest.mark.timeout(1200)
def test_deploy_pushes_by_content_and_pins_lambda_to_the_registry_digest(
    registry: str, docker_client: Any, moto_server: str, local_defaults: dict[str, str]
) -> None:
    urllib.request.urlopen(admin_request(moto_server + "/moto-api/reset", method="POST")).read()
    plan = deploy_cli(registry, moto_server, local_defaults, "--dry-run")
    assert plan.returncode == 0, plan.stdout[-3000:] + plan.stderr[-3000:]
    planned = [line for line in plan.stdout.splitlines() if line.startswith("[deploy] create")]

    started = time.monotonic()
    first = deploy_cli(registry, moto_server, local_defaults)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    created = [line for line in first.stdout.splitlines() if line.startswith("[deploy] create")]
    assert created == planned  # the dry run printed exactly what the real run did
    assert "pushed" in first.stdout and "layer" in first.stdout  # push progress is shown
    catalog = json.loads(urllib.request.urlopen(f"http://{registry}/v2/_catalog").read())["repositories"]
    assert sorted(catalog) == sorted(f"{PREFIX}-{f.name}" for f in FUNCTIONS)

    import boto3

    admin = {
        "aws_access_key_id": local_defaults["AWS_ACCESS_KEY_ID"],  # the local admin (IAM is enforced)
        "aws_secret_access_key": local_defaults["AWS_SECRET_ACCESS_KEY"],
    }
    lam = boto3.client("lambda", endpoint_url=moto_server, region_name="us-east-1", **admin)
    for f in FUNCTIONS:
        image = docker_client.images.get(f.image)
        tag = "c-" + image.id.removeprefix("sha256:")[:12]  # the content tag: same build, same tag
        media_type, digest, document = manifest(registry, f"{PREFIX}-{f.name}", tag)
        # Lambda takes one single-platform image manifest, never an index (Lambda's CreateFunction refuses an
        # image index).
        assert media_type in SINGLE_PLATFORM and document["mediaType"] == media_type, (f.name, media_type)
        assert "manifests" not in document and document["config"]["mediaType"].endswith(
            ("container.image.v1+json", "image.config.v1+json")
        )
        assert (
            manifest(registry, f"{PREFIX}-{f.name}", digest)[0] == media_type
        )  # by digest, as Lambda pulls it
        # --registry: Lambda is pointed at the image that was pushed, on the registry that holds it.
        uri = lam.get_function(FunctionName=f"{PREFIX}-{f.name}")["Code"]["ImageUri"]
        assert uri == f"{registry}/{PREFIX}-{f.name}@{digest}"
    ecr = boto3.client("ecr", endpoint_url=moto_server, region_name="us-east-1", **admin)
    repo = ecr.describe_repositories(repositoryNames=[f"{PREFIX}-ack-sender"])["repositories"][0]
    assert (
        repo["imageScanningConfiguration"] == {"scanOnPush": True}
        and repo["imageTagMutability"] == "IMMUTABLE"
    )
    assert (
        "imageCountMoreThan"
        in ecr.get_lifecycle_policy(repositoryName=f"{PREFIX}-ack-sender")["lifecyclePolicyText"]
    )

    again = deploy_cli(registry, moto_server, local_defaults)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "pushed" not in again.stdout and "nothing to change" in again.stdout
    print(f"\n[deploy] first deploy with pushes {time.monotonic() - started:.0f}s")


def test_the_deploy_refuses_an_image_index_as_lambda_does(registry: str, docker_client: Any) -> None:
    """What BuildKit pushes with provenance attestations (an image index) is caught right after the push,
    before Lambda is pointed at it; the single-platform manifest inside it passes the same check."""
    from deploy.errors import DeployError
    from deploy.images import check_manifest

    f = FUNCTIONS[0]
    repository = f"{PREFIX}-{f.name}"
    target = f"{registry}/{repository}"
    docker_client.images.get(f.image).tag(target, "single")
    for line in docker_client.images.push(target, tag="single", stream=True, decode=True):
        assert "error" not in line, line
    media_type, digest, _ = manifest(registry, repository, "single")
    with urllib.request.urlopen(
        urllib.request.Request(
            f"http://{registry}/v2/{repository}/manifests/{digest}", headers={"Accept": media_type}
        ),
        timeout=10,
    ) as resp:
        size = len(resp.read())
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [
            {
                "mediaType": media_type,
                "digest": digest,
                "size": size,
                "platform": {"architecture": "amd64", "os": "linux"},
            }
        ],
    }
    put = urllib.request.Request(
        f"http://{registry}/v2/{repository}/manifests/with-index",
        method="PUT",
        data=json.dumps(index).encode(),
        headers={"Content-Type": "application/vnd.oci.image.index.v1+json"},
    )
    with urllib.request.urlopen(put, timeout=10) as resp:
        index_digest = resp.headers["Docker-Content-Digest"]
    check_manifest(registry, repository, digest, {}, secure=False)  # the single-platform manifest: accepted
    with pytest.raises(DeployError, match="only a single-platform Docker v2 or OCI image manifest") as err:
        check_manifest(registry, repository, index_digest, {}, secure=False)
    assert "application/vnd.oci.image.index.v1+json" in str(err.value) and "--provenance=false" in str(
        err.value
    )
