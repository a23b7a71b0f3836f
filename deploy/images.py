"""Images to ECR: build (or reuse) locally, tag by content, push what the registry lacks.

The tag is ``c-<12 hex of the local image id>``: the image id is a hash of the image's config and
layers, so the same build always gets the same tag (a re-deploy of an unchanged tree pushes nothing)
and repositories can be IMMUTABLE. Lambda gets the manifest digest the registry reports
(``<repository uri>@sha256:...``), never a tag.

``registry`` overrides the registry host the images are pushed to (default: the ECR repository's
own); the tests use it to push to a local registry standing in for ECR. Everything about the
push path is the same: ECR's authorization token, docker login, the registry query, the push.
"""

from __future__ import annotations

import base64
import json
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.aws import control_client, or_none
from common.runtime import FUNCTIONS, Config
from deploy.errors import DeployError
from deploy.plan import CREATE, UNCHANGED, Run

REPO = Path(__file__).resolve().parents[1]
KEEP_IMAGES = 10


@dataclass(frozen=True, slots=True)
class Published:
    function: str
    repository_uri: str  # <account>.dkr.ecr.<region>.amazonaws.com/<name>
    tag: str
    digest: str  # sha256:...
    architecture: str  # x86_64 | arm64, for the Lambda function

    @property
    def image_uri(self) -> str:
        return f"{self.repository_uri}@{self.digest}"


def repository_name(cfg: Config, function: str) -> str:
    return cfg.name(function)


def docker_client() -> Any:
    import docker

    try:
        engine = docker.from_env()  # type: ignore[attr-defined]  # mypy sees the repo's docker/ folder
        engine.ping()
    except Exception as exc:
        raise DeployError(
            f"the Docker engine is not reachable ({type(exc).__name__}: {exc})",
            "start it (sudo systemctl start docker) and check `docker info`; the deploy builds and "
            "pushes the function images with it",
        ) from None
    return engine


def build(report: Callable[[str], None]) -> None:
    """scripts/images.sh: the offline build every local mode uses (cached: seconds when nothing changed)."""
    import os

    report("[deploy] building images (scripts/images.sh)")
    # Lambda takes one single-platform manifest: BuildKit's default provenance attestation would turn
    # the push into an image index, which Lambda rejects (checked after the push: manifest_media_type).
    env = {**os.environ, "BUILDX_NO_DEFAULT_ATTESTATIONS": "1"}
    done = subprocess.run(
        [str(REPO / "scripts" / "images.sh")], cwd=REPO, capture_output=True, text=True, env=env
    )
    if done.returncode != 0:
        raise DeployError(
            "the image build failed:\n" + (done.stdout + done.stderr)[-3000:],
            "fix the build (full logs under .build/logs/), then deploy again",
        )


def content_tag(image: Any) -> str:
    return "c-" + str(image.id).removeprefix("sha256:")[:12]


def architecture(image: Any) -> str:
    return "arm64" if image.attrs.get("Architecture") in ("arm64", "aarch64") else "x86_64"


def _repository(run: Run, name: str) -> str:
    """The ECR repository (scan on push, immutable tags); its lifecycle policy is reconciled every run."""
    ecr = control_client("ecr")
    found = or_none(lambda: ecr.describe_repositories(repositoryNames=[name]), "RepositoryNotFoundException")
    policy = (
        or_none(lambda: ecr.get_lifecycle_policy(repositoryName=name), "LifecyclePolicyNotFoundException")
        if found
        else None
    )
    differ = (
        []
        if found is None or (policy and json.loads(policy["lifecyclePolicyText"]) == json.loads(_lifecycle()))
        else ["lifecycle policy"]
    )

    def create() -> None:
        ecr.create_repository(
            repositoryName=name,
            imageTagMutability="IMMUTABLE",
            imageScanningConfiguration={"scanOnPush": True},
        )
        ecr.put_lifecycle_policy(repositoryName=name, lifecyclePolicyText=_lifecycle())

    run.converge(
        "ecr-repository",
        name,
        found,
        differ,
        create=create,
        update=lambda _: ecr.put_lifecycle_policy(repositoryName=name, lifecyclePolicyText=_lifecycle()),
        create_detail=f"scan on push, immutable tags, keep {KEEP_IMAGES} images",
    )
    from common.aws import account_id

    return (
        str(found["repositories"][0]["repositoryUri"])
        if found
        else f"{account_id()}.dkr.ecr.{run.cfg.region}.amazonaws.com/{name}"
    )


def _lifecycle() -> str:
    return json.dumps(
        {
            "rules": [
                {
                    "rulePriority": 1,
                    "description": f"keep the last {KEEP_IMAGES} images",
                    "selection": {
                        "tagStatus": "any",
                        "countType": "imageCountMoreThan",
                        "countNumber": KEEP_IMAGES,
                    },
                    "action": {"type": "expire"},
                }
            ]
        }
    )


def login(engine: Any, registry: str | None) -> tuple[str, dict[str, str]]:
    """ECR's authorization token -> docker login; returns the registry host and its auth config."""
    data = control_client("ecr").get_authorization_token()["authorizationData"][0]
    username, _, password = base64.b64decode(data["authorizationToken"]).decode().partition(":")
    host = registry or str(data["proxyEndpoint"]).removeprefix("https://").removeprefix("http://")
    auth = {"username": username, "password": password}
    try:
        engine.login(username=username, password=password, registry=host, reauth=True)
    except Exception as exc:
        raise DeployError(
            f"docker login to {host} failed: {exc}",
            "check that your credentials allow ecr:GetAuthorizationToken in this region",
        ) from None
    return host, auth


def publish(
    run: Run, engine: Any, registry: str | None, report: Callable[[str], None]
) -> dict[str, Published]:
    """Tag every function image by content and push those the registry does not have yet."""
    host, auth = login(engine, registry)
    out: dict[str, Published] = {}
    for f in FUNCTIONS:
        try:
            image = engine.images.get(f.image)
        except Exception:
            raise DeployError(
                f"image {f.image} is missing", "run `make images` (or deploy without --skip-build)"
            ) from None
        name = repository_name(run.cfg, f.name)
        repository_uri = _repository(run, name)
        tag, target = content_tag(image), f"{host}/{name}"
        if registry:  # Lambda must pull what was pushed: the registry's own reference
            repository_uri = target
        digest = _registry_digest(engine, f"{target}:{tag}", auth)
        if digest:
            run.note("image", f"{name}:{tag}", UNCHANGED, "already in the registry")
        else:
            run.note("image", f"{name}:{tag}", CREATE, "push")
            if run.apply:
                digest = _push(engine, image, target, tag, auth, report)
        if digest:
            check_manifest(host, name, digest, auth, secure=registry is None)
        # A dry run cannot know the digest of an image it did not push: "" means "a new image".
        out[f.name] = Published(f.name, repository_uri, tag, digest, architecture(image))
    return out


def _registry_digest(engine: Any, reference: str, auth: dict[str, str]) -> str:
    try:
        return str(engine.images.get_registry_data(reference, auth_config=auth).id)
    except Exception:  # not found (or not readable): push it
        return ""


def _push(
    engine: Any, image: Any, target: str, tag: str, auth: dict[str, str], report: Callable[[str], None]
) -> str:
    image.tag(target, tag)
    digest, last = "", ""
    for line in engine.images.push(target, tag=tag, auth_config=auth, stream=True, decode=True):
        if "error" in line:
            raise DeployError(
                f"push of {target}:{tag} failed: {line['error']}",
                "check the registry and your credentials, then deploy again",
            )
        if "aux" in line and line["aux"].get("Digest"):
            digest = str(line["aux"]["Digest"])
        status = line.get("status", "")
        if status in ("Pushed", "Layer already exists", "Mounted from") or status.startswith("Mounted"):
            last = f"[deploy]   {target}:{tag} layer {line.get('id', '')}: {status}"
            report(last)
    if not digest:
        raise DeployError(
            f"push of {target}:{tag} reported no digest", "deploy again; the registry may be unhealthy"
        )
    report(f"[deploy]   pushed {target}:{tag} ({digest[:19]}...)")
    return digest


LAMBDA_MANIFESTS = (
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
)


def manifest_media_type(
    host: str, repository: str, digest: str, auth: dict[str, str], secure: bool = True
) -> str:
    """The media type the registry serves for ``repository@digest`` (Registry HTTP API v2)."""
    import urllib.request

    accept = ", ".join(
        LAMBDA_MANIFESTS
        + (
            "application/vnd.oci.image.index.v1+json",
            "application/vnd.docker.distribution.manifest.list.v2+json",
        )
    )
    request = urllib.request.Request(
        f"{'https' if secure else 'http'}://{host}/v2/{repository}/manifests/{digest}",
        method="HEAD",
        headers={"Accept": accept},
    )
    if auth.get("password"):
        token = base64.b64encode(f"{auth['username']}:{auth['password']}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    with urllib.request.urlopen(request, timeout=30) as resp:
        return str(resp.headers.get("Content-Type", "")).split(";")[0].strip()


def check_manifest(
    host: str, repository: str, digest: str, auth: dict[str, str], secure: bool = True
) -> None:
    """Lambda accepts one single-platform manifest (Docker v2 schema 2 or OCI); an image index -- what
    BuildKit pushes with provenance attestations or for several platforms -- is refused at create time."""
    media_type = manifest_media_type(host, repository, digest, auth, secure)
    if media_type not in LAMBDA_MANIFESTS:
        raise DeployError(
            f"{host}/{repository}@{digest} is a {media_type or 'manifest of unknown type'}; Lambda accepts "
            "only a single-platform Docker v2 or OCI image manifest",
            "build without attestations and for one platform (BUILDX_NO_DEFAULT_ATTESTATIONS=1, or "
            "docker buildx build --provenance=false --sbom=false --platform linux/amd64), then deploy again",
        )
