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
import os
import subprocess
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.aws import control_client, or_none
from common.aws.sts import account_id
from deploy.config import Config
from deploy.errors import DeployError
from deploy.functions import FUNCTIONS
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


def engine_endpoint() -> tuple[str, Any]:
    """(base URL, TLS config or None) of the engine the docker CLI talks to, as the CLI picks it:
    DOCKER_HOST, else the current context (DOCKER_CONTEXT, else ``currentContext`` in the CLI's
    config.json under DOCKER_CONFIG or ~/.docker) and that context's docker endpoint. That is how
    Colima, OrbStack, Rancher Desktop and Docker Desktop without the default socket are reached
    (Docker docs, "Docker contexts"). ("", None): docker-py's own environment (DOCKER_HOST,
    DOCKER_TLS_VERIFY, DOCKER_CERT_PATH, else the default socket)."""
    from docker.context import ContextAPI
    from docker.context.config import get_current_context_name

    if os.environ.get("DOCKER_HOST"):
        return "", None
    name = os.environ.get("DOCKER_CONTEXT") or get_current_context_name()
    if name == "default":
        return "", None
    context = ContextAPI.get_context(name)
    if context is None:
        raise DeployError(
            f"the docker context {name!r} does not exist",
            "`docker context ls` lists the contexts; `docker context use NAME` picks one",
        )
    return str(context.Host), context.TLSConfig


def docker_client() -> Any:
    import docker

    try:
        base_url, tls = engine_endpoint()
        # (type: ignore: mypy resolves `docker` to the repository's docker/ folder)
        if base_url:
            engine = docker.DockerClient(base_url=base_url, tls=tls or False)  # type: ignore[attr-defined]
        else:
            engine = docker.from_env()  # type: ignore[attr-defined]
        engine.ping()
    except DeployError:
        raise
    except Exception as exc:
        raise DeployError(
            f"the Docker engine is not reachable ({type(exc).__name__}: {exc})",
            "start it (sudo systemctl start docker, or your Docker Desktop / Colima / OrbStack) and check "
            "`docker info`; the deploy builds and pushes the function images with the engine of the current "
            "`docker context` (or DOCKER_HOST)",
        ) from None
    return engine


def build(report: Callable[[str], None]) -> None:
    """scripts/images.sh --functions: the offline build every local mode uses (cached: seconds when nothing
    changed), less the emulator's tools image, which nothing deployed runs."""
    report("[deploy] building images (scripts/images.sh --functions)")
    # Without BuildKit's default provenance attestation the push is one image manifest where the engine
    # allows it; a containerd image store may still push an index, which publish() resolves.
    # OS_IMAGE_REFRESH: a deploy ships the python3.13 revision Debian's mirrors offer today (a security
    # update rebuilds the OS image; the same revision keeps it, and every content tag with it).
    env = {**os.environ, "BUILDX_NO_DEFAULT_ATTESTATIONS": "1", "OS_IMAGE_REFRESH": "1"}
    done = subprocess.run(
        [str(REPO / "scripts" / "images.sh"), "--functions"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=env,
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
        arch = architecture(image)
        if digest:
            digest = lambda_manifest(Registry(host, auth, secure=registry is None), name, digest, arch)
        # A dry run cannot know the digest of an image it did not push: "" means "a new image".
        out[f.name] = Published(f.name, repository_uri, tag, digest, arch)
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
    # Docker's containerd image store reports the digest only in a status line, not as `aux`: the
    # registry says what the tag names now.
    digest = digest or _registry_digest(engine, f"{target}:{tag}", auth)
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
INDEXES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)
# Lambda's architecture -> the OCI platform architecture of the image built for it.
OCI_ARCHITECTURE = {"x86_64": "amd64", "arm64": "arm64"}


@dataclass(frozen=True, slots=True)
class Registry:
    """A registry's HTTP API v2 (ECR's, or the local one standing in for it) with ECR's basic auth."""

    host: str
    auth: dict[str, str]
    secure: bool = True

    def request(self, repository: str, reference: str, method: str = "GET") -> urllib.request.Request:
        request = urllib.request.Request(
            f"{'https' if self.secure else 'http'}://{self.host}/v2/{repository}/manifests/{reference}",
            method=method,
            headers={"Accept": ", ".join(LAMBDA_MANIFESTS + INDEXES)},
        )
        if self.auth.get("password"):
            token = base64.b64encode(f"{self.auth['username']}:{self.auth['password']}".encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
        return request

    def media_type(self, repository: str, reference: str) -> str:
        with urllib.request.urlopen(self.request(repository, reference, "HEAD"), timeout=30) as resp:
            return str(resp.headers.get("Content-Type", "")).split(";")[0].strip()

    def manifest(self, repository: str, reference: str) -> tuple[str, dict[str, Any]]:
        with urllib.request.urlopen(self.request(repository, reference), timeout=30) as resp:
            return str(resp.headers.get("Content-Type", "")).split(";")[0].strip(), json.loads(resp.read())


def manifest_media_type(
    host: str, repository: str, digest: str, auth: dict[str, str], secure: bool = True
) -> str:
    """The media type the registry serves for ``repository@digest`` (Registry HTTP API v2)."""
    return Registry(host, auth, secure).media_type(repository, digest)


def lambda_manifest(registry: Registry, repository: str, digest: str, architecture: str) -> str:
    """The digest Lambda can take for what was pushed as ``repository@digest``: that digest when it is one
    single-platform image manifest (Docker v2 schema 2 or OCI: all Lambda accepts), else -- an image
    index, what Docker's containerd image store pushes with BuildKit's attestation manifest beside the
    image, or for several platforms -- the index's manifest for ``linux/<architecture>``. Attestation
    entries (annotation ``vnd.docker.reference.type``, platform unknown/unknown) are not images."""
    media_type, document = registry.manifest(repository, digest)
    if media_type in LAMBDA_MANIFESTS:
        return digest
    where = f"{registry.host}/{repository}@{digest}"
    if media_type not in INDEXES:
        raise DeployError(
            f"{where} is a {media_type or 'manifest of unknown type'}; Lambda accepts only a single-platform "
            "Docker v2 or OCI image manifest",
            "rebuild the images (docker build for one platform) and deploy again",
        )
    wanted = OCI_ARCHITECTURE[architecture]
    images = [
        m
        for m in document.get("manifests", [])
        if "vnd.docker.reference.type" not in (m.get("annotations") or {})
        and (m.get("platform") or {}).get("os") == "linux"
        and (m.get("platform") or {}).get("architecture") == wanted
    ]
    platforms = sorted(
        "{os}/{architecture}".format_map({"os": "?", "architecture": "?", **(m.get("platform") or {})})
        for m in document.get("manifests", [])
    )
    if len(images) != 1:
        raise DeployError(
            f"{where} is an image index with {len(images)} linux/{wanted} images (it holds: "
            f"{', '.join(platforms) or 'nothing'}); Lambda needs exactly one",
            f"rebuild the images for linux/{wanted} only (docker build --platform linux/{wanted}) and "
            "deploy again",
        )
    child = str(images[0]["digest"])
    child_type = registry.media_type(repository, child)
    if child_type not in LAMBDA_MANIFESTS:
        raise DeployError(
            f"{where} names {child} for linux/{wanted}, a {child_type or 'manifest of unknown type'}; Lambda "
            "accepts only a single-platform Docker v2 or OCI image manifest",
            "rebuild the images (docker build for one platform) and deploy again",
        )
    return child
