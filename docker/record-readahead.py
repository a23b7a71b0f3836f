"""Record the files a cold start reads, in the order it reads them: the manifest that the image's
``sitecustomize`` (docker/sitecustomize.py) reads ahead on a second thread.

Run at image build (Dockerfile.base), with the shipped code on PYTHONPATH:
``python record-readahead.py SERVICES_LIST OUT``.
It imports what a first invocation of each function imports (the handler modules, boto3 and
powertools' idempotency layer, which the handlers import lazily) and creates a client for each
service of docker/aws-services.txt, which loads the same botocore model files as the functions'
clients. No call is made and no configuration is needed. The parsers the extractor loads for one
file type only (pypdf, the DOCX reader) are left out: most cold starts do not need them.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

# What the functions import when their first event arrives, in the order a cold start meets it.
FIRST_EVENT_MODULES = (
    "awslambdaric.bootstrap",
    "common.runtime.handler",
    "common.inbound.handler",
    "common.reply.handler",
    "common.senders.handler",
    "common.extractor.handler",
    "boto3",
    "botocore.config",
    "aws_lambda_powertools.utilities.idempotency",
)


def record(services: list[str]) -> list[str]:
    """The files read while importing :data:`FIRST_EVENT_MODULES` and creating a client per service."""
    import botocore.loaders

    data_files: list[str] = []
    load_file = botocore.loaders.JSONFileLoader.load_file

    def recording(self: botocore.loaders.JSONFileLoader, file_path: str) -> object:
        data_files.append(file_path)  # the loader tries .json, then .json.gz: keep the one that exists
        return load_file(self, file_path)

    botocore.loaders.JSONFileLoader.load_file = recording
    try:
        for name in FIRST_EVENT_MODULES:
            importlib.import_module(name)
        import boto3

        session = boto3.session.Session(region_name="us-east-1")
        for service in services:
            session.client(service, aws_access_key_id="x", aws_secret_access_key="x")
    finally:
        botocore.loaders.JSONFileLoader.load_file = load_file
    files: list[str] = []
    for module in list(sys.modules.values()):
        spec = getattr(module, "__spec__", None)
        path = (spec.cached if spec.cached and os.path.isfile(spec.cached) else spec.origin) if spec else None
        if path and os.path.isfile(path):
            files.append(path)
    for path in data_files:
        for candidate in (path, path + ".json", path + ".json.gz"):
            if os.path.isfile(candidate):
                files.append(candidate)
    return list(dict.fromkeys(files))


def services(listing: Path) -> list[str]:
    lines = (line.split("#")[0].strip() for line in listing.read_text().splitlines())
    return [line for line in lines if line]


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: record-readahead.py SERVICES_LIST OUT", file=sys.stderr)
        return 2
    files = record(services(Path(args[0])))
    Path(args[1]).write_text("\n".join(files) + "\n", encoding="utf-8")
    print(f"readahead: {len(files)} files, {sum(os.path.getsize(f) for f in files) // 1024} KiB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
