#!/usr/bin/env python3
"""Hash of everything that goes into the base image; images.sh labels the base with it and the
docker tests refuse to run against images built from other sources (stale `make images`)."""

import hashlib
import pathlib
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent
# The base and the local tools image (compose/local.Dockerfile) are built from these.
INPUTS = [
    "Dockerfile.base",
    "requirements/image.txt",
    "docker",
    "common",
    "deploy",
    "cli",
    "local",
    "ops",
    "compose/local.Dockerfile",
]


def source_hash(repo: pathlib.Path = REPO) -> str:
    digest = hashlib.sha256()
    for entry in INPUTS:
        path = repo / entry
        files = (
            [path]
            if path.is_file()
            else sorted(p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
        )
        for f in files:
            digest.update(str(f.relative_to(repo)).encode() + b"\0" + f.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


if __name__ == "__main__":
    sys.stdout.write(source_hash() + "\n")
