"""The image's read-ahead: the manifest the build records (docker/record-readahead.py) and the thread that
reads it in the runtime process (docker/sitecustomize.py)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


def _sitecustomize() -> ModuleType:
    path = REPO / "docker" / "sitecustomize.py"
    spec = importlib.util.spec_from_file_location("sitecustomize_under_test", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # under pytest, not a runtime process: starts nothing
    return module


def test_the_recorded_manifest_lists_what_a_cold_start_reads_in_import_order(tmp_path: Path) -> None:
    out = tmp_path / "readahead.txt"
    services = tmp_path / "services.txt"
    services.write_text("# as docker/aws-services.txt\ndynamodb\nsesv2\n")
    subprocess.run(
        [sys.executable, str(REPO / "docker" / "record-readahead.py"), str(services), str(out)],
        cwd=REPO,
        check=True,
        capture_output=True,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "AWS_DEFAULT_REGION": "us-east-1"},
    )
    files = out.read_text().split()
    assert len(files) == len(set(files)) > 300
    assert all(Path(f).is_file() for f in files)

    def first(fragment: str) -> int:
        return next(i for i, f in enumerate(files) if fragment in f)

    # The handlers' own modules, the runtime client, boto3, powertools' idempotency layer and the
    # service models the clients load; the compiled file where there is one.
    for fragment in (
        "common/senders/__pycache__/handler.",
        "common/inbound/__pycache__/handler.",
        "awslambdaric/",
        "boto3/__pycache__/session.",
        "idempotency/persistence/__pycache__/dynamodb.",
        "botocore/data/dynamodb/",
        "botocore/data/sesv2/",
        "botocore/data/endpoints.json",
    ):
        first(fragment)
    assert files[first("common/senders/__pycache__/handler.")].endswith(".pyc")  # what the import reads
    assert first("common/runtime/__pycache__/handler.") < first("botocore/data/dynamodb/")
    assert not any("pypdf" in f for f in files), "the PDF parser is loaded only for a PDF"


def test_the_thread_reads_every_file_it_can_in_the_runtime_process_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = _sitecustomize()
    present = [tmp_path / "a.pyc", tmp_path / "b.json"]
    for p in present:
        p.write_bytes(b"x" * 3_000_000)  # more than one read
    manifest = tmp_path / "readahead.txt"
    manifest.write_text("\n".join([str(present[0]), str(tmp_path / "gone.pyc"), str(present[1])]) + "\n")
    runtime = ["/opt/venv/bin/python", "-m", "awslambdaric", "app.handler"]

    thread = site._start(runtime, str(manifest))
    assert thread is not None and thread.daemon
    thread.join(10)
    assert site.read == [2]  # the missing file is skipped, not fatal

    assert site._start(["python", "/tmp/trim/record-readahead.py"], str(manifest)) is None
    assert site._start(["python", "-c", "import app"], str(manifest)) is None
    assert site._start(runtime, str(tmp_path / "no-manifest.txt")) is None
    monkeypatch.setenv("READAHEAD", "off")
    assert site._start(runtime, str(manifest)) is None
