"""The base image keeps exactly the botocore models of the services the shipped code calls."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
SERVICES_FILE = REPO / "docker" / "aws-services.txt"
# The factory functions of common/aws/__init__.py and boto3's own entry points.
CLIENT_CALLS = {"client", "control_client", "resource"}
FACTORY = REPO / "common" / "aws" / "__init__.py"  # passes its `service` argument through


def _trim_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("trim_botocore", REPO / "docker" / "trim-botocore.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _services_called() -> tuple[set[str], list[str]]:
    """Service names passed to client()/control_client()/resource() under common/ (not local
    or ops, which never ship), and the calls whose service name is not a literal."""
    names: set[str] = set()
    dynamic: list[str] = []
    for path in sorted((REPO / "common").rglob("*.py")):
        if path.relative_to(REPO / "common").parts[0] in ("local", "ops"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            called = (
                func.id
                if isinstance(func, ast.Name)
                else func.attr
                if isinstance(func, ast.Attribute)
                else ""
            )
            if called not in CLIENT_CALLS:
                continue
            arg = (
                node.args[0]
                if node.args
                else next((k.value for k in node.keywords if k.arg in ("service", "service_name")), None)
            )
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                names.add(arg.value)
            elif path != FACTORY:
                dynamic.append(f"{path.relative_to(REPO)}:{node.lineno}")
    return names, dynamic


def test_the_kept_services_are_exactly_the_clients_the_shipped_code_creates() -> None:
    called, dynamic = _services_called()
    assert not dynamic, f"client calls with a computed service name escape the model list: {dynamic}"
    assert {"s3", "sesv2", "dynamodb", "sqs"} <= called  # the scan finds the known callers
    kept = set(_trim_module().read_services(SERVICES_FILE))
    assert called - kept == set(), (
        "add these to docker/aws-services.txt or the image cannot create their clients"
    )
    assert kept - called == set(), "no code creates these clients: drop them from docker/aws-services.txt"


def test_every_kept_service_is_a_botocore_service_of_the_pinned_version() -> None:
    import botocore.session

    available = set(botocore.session.get_session().get_available_services())
    assert set(_trim_module().read_services(SERVICES_FILE)) <= available


def test_the_base_image_build_runs_the_trim_with_the_list() -> None:
    dockerfile = (REPO / "Dockerfile.base").read_text()
    assert (
        "docker/aws-services.txt" in dockerfile
        and "trim-botocore.py /tmp/trim/aws-services.txt" in dockerfile
    )


def _fake_site_packages(root: Path) -> Path:
    for rel in (
        "botocore/data/s3/2006-03-01/service-2.json.gz",
        "botocore/data/ec2/2016-11-15/service-2.json.gz",
        "botocore/data/sqs/2012-11-05/service-2.json.gz",
        "botocore/data/endpoints.json",
        "botocore/data/partitions.json",
        "botocore/data/_retry.json",
        "botocore/data/sdk-default-configuration.json",
        "boto3/data/s3/2006-03-01/resources-1.json",
        "boto3/data/ec2/2016-11-15/resources-1.json",
    ):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("{}")
    return root


def test_trim_deletes_other_services_and_keeps_the_shared_files(tmp_path: Path) -> None:
    site = _fake_site_packages(tmp_path)
    freed = _trim_module().trim(["s3", "sqs"], site)
    assert freed == 4  # two 2-byte files: ec2's service model and its boto3 resource model
    assert sorted(p.name for p in (site / "botocore/data").iterdir()) == [
        "_retry.json",
        "endpoints.json",
        "partitions.json",
        "s3",
        "sdk-default-configuration.json",
        "sqs",
    ]
    assert sorted(p.name for p in (site / "boto3/data").iterdir()) == ["s3"]


def test_trim_refuses_a_listed_service_botocore_does_not_have(tmp_path: Path) -> None:
    site = _fake_site_packages(tmp_path)
    with pytest.raises(SystemExit, match="no botocore model for sesv3"):
        _trim_module().trim(["s3", "sesv3"], site)
    assert (site / "botocore/data/ec2").is_dir()  # nothing deleted


def test_the_list_file_reads_names_and_skips_comments(tmp_path: Path) -> None:
    listing = tmp_path / "services.txt"
    listing.write_text("# header\ns3\n\n  sqs  # queue\n")
    assert _trim_module().read_services(listing) == ["s3", "sqs"]
