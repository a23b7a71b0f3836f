"""`email-handler deploy` end to end with real images: ECR's token, docker login, registry query and
push against a local registry (Debian's docker-registry on 127.0.0.1) standing in for ECR, and
the AWS side on a moto server. Run as the user runs it: the console script in a subprocess."""

from __future__ import annotations

import hashlib
import json
import time
import urllib.request
from typing import Any

import pytest

from deploy.functions import FUNCTIONS
from deploy.images import architecture
from local.guard import admin_request
from tests.docker.pushing import OCI_INDEX, PREFIX, SINGLE_PLATFORM, deploy_cli, manifest, put_manifest

pytestmark = pytest.mark.docker


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


def _blob(registry: str, repository: str, data: bytes) -> str:
    """Upload one blob (Registry HTTP API v2: POST an upload, PUT it whole with its digest)."""
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    start = urllib.request.Request(f"http://{registry}/v2/{repository}/blobs/uploads/", method="POST")
    with urllib.request.urlopen(start, timeout=10) as resp:
        location = resp.headers["Location"]
    joiner = "&" if "?" in location else "?"
    url = location if location.startswith("http") else f"http://{registry}{location}"
    put = urllib.request.Request(
        f"{url}{joiner}digest={digest}",
        method="PUT",
        data=data,
        headers={"Content-Type": "application/octet-stream"},
    )
    urllib.request.urlopen(put, timeout=10).read()
    return digest


def _attestation(registry: str, repository: str, subject: str) -> dict[str, Any]:
    """An attestation manifest as BuildKit writes one beside an image (an in-toto statement layer; its
    index entry says which image it is about and has the platform unknown/unknown)."""
    statement = json.dumps(
        {"_type": "https://in-toto.io/Statement/v0.1", "predicateType": "https://slsa.dev/provenance/v0.2"}
    ).encode()
    layer = _blob(registry, repository, statement)
    config = json.dumps(
        {
            "architecture": "unknown",
            "os": "unknown",
            "config": {},
            "rootfs": {"type": "layers", "diff_ids": [layer]},
        }
    ).encode()
    document = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": _blob(registry, repository, config),
            "size": len(config),
        },
        "layers": [
            {
                "mediaType": "application/vnd.in-toto+json",
                "digest": layer,
                "size": len(statement),
                "annotations": {"in-toto.io/predicate-type": "https://slsa.dev/provenance/v0.2"},
            }
        ],
    }
    digest = put_manifest(registry, repository, "attestation", document)
    return {
        "mediaType": document["mediaType"],
        "digest": digest,
        "size": len(json.dumps(document).encode()),
        "annotations": {
            "vnd.docker.reference.digest": subject,
            "vnd.docker.reference.type": "attestation-manifest",
        },
        "platform": {"architecture": "unknown", "os": "unknown"},
    }


def test_the_deploy_gives_lambda_the_image_inside_an_index_and_lambda_refuses_the_index(
    registry: str, docker_client: Any
) -> None:
    """The shape Docker's containerd image store pushes (an OCI index: the image for one platform and
    BuildKit's attestation manifest beside it), made here with the registry's HTTP API from a built
    image: the deploy resolves it to the image's own manifest, and the emulator refuses the index itself
    as Lambda does. tests/docker/test_push_containerd.py pushes the same shape from a real
    containerd-store daemon."""
    from deploy.errors import DeployError
    from deploy.images import Registry, lambda_manifest
    from local.fresh import image_refused

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
    arch = {"x86_64": "amd64", "arm64": "arm64"}[architecture(docker_client.images.get(f.image))]
    index = {
        "schemaVersion": 2,
        "mediaType": OCI_INDEX,
        "manifests": [
            # the attestation first: the pick must not depend on the order
            _attestation(registry, repository, digest),
            {
                "mediaType": media_type,
                "digest": digest,
                "size": size,
                "platform": {"architecture": arch, "os": "linux"},
            },
        ],
    }
    index_digest = put_manifest(registry, repository, "with-index", index)
    assert manifest(registry, repository, "with-index")[0] == OCI_INDEX

    at = Registry(registry, {}, secure=False)
    lambda_arch = "x86_64" if arch == "amd64" else "arm64"
    assert lambda_manifest(at, repository, index_digest, lambda_arch) == digest
    assert lambda_manifest(at, repository, digest, lambda_arch) == digest  # a single manifest: itself
    other = "arm64" if lambda_arch == "x86_64" else "x86_64"
    with pytest.raises(DeployError, match="image index with 0 linux/") as err:
        lambda_manifest(at, repository, index_digest, other)
    assert "unknown/unknown" in str(err.value) and f"linux/{arch}" in str(err.value)

    assert "is not supported" in image_refused(f"{target}@{index_digest}")
    assert image_refused(f"{target}@{digest}") == ""
