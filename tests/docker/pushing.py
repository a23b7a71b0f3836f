"""What the push tests share: the deploy run as a user runs it, and the registry's HTTP API v2 read back."""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import urllib.request
from typing import Any

from tests.conftest import REPO

PREFIX = "service-email-handler-prd"
SINGLE_PLATFORM = (
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
)
OCI_INDEX = "application/vnd.oci.image.index.v1+json"
# Accept everything a registry may hold, so an image index (what BuildKit pushes with attestations or
# for several platforms, and Lambda refuses) comes back as what it is instead of a 404.
ANY_MANIFEST = ", ".join(
    SINGLE_PLATFORM + (OCI_INDEX, "application/vnd.docker.distribution.manifest.list.v2+json")
)


PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """``preexec_fn`` of a server a test starts: the kernel sends it SIGKILL when the test process dies,
    however it dies (prctl(2), PR_SET_PDEATHSIG; kept across exec)."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def deploy_cli(
    registry: str,
    moto_url: str,
    local_defaults: dict[str, str],
    *extra: str,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """`email-handler deploy --registry REGISTRY` in a subprocess (``env``: the environment to start from)."""
    environment = {
        **(os.environ if env is None else env),
        **{k: v for k, v in local_defaults.items() if k != "ENVIRONMENT"},
        "AWS_ENDPOINT_URL": moto_url,
        "THREAD_SECRET": "0123456789abcdef" * 4,
    }
    return subprocess.run(
        [sys.executable, "-m", "ops.main", "deploy", "--registry", registry, *extra],
        cwd=REPO,
        env=environment,
        capture_output=True,
        text=True,
        timeout=900,
    )


def manifest(registry: str, repository: str, reference: str) -> tuple[str, str, dict[str, Any]]:
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


def put_manifest(registry: str, repository: str, reference: str, document: dict[str, Any]) -> str:
    """PUT a manifest (an image index here) as a client pushes one; returns its digest."""
    request = urllib.request.Request(
        f"http://{registry}/v2/{repository}/manifests/{reference}",
        method="PUT",
        data=json.dumps(document).encode(),
        headers={"Content-Type": document["mediaType"]},
    )
    with urllib.request.urlopen(request, timeout=10) as resp:
        return str(resp.headers["Docker-Content-Digest"])
