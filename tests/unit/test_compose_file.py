"""The compose stack agrees with the function table (names, images, ports, timeouts)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from deploy.functions import FUNCTIONS
from local.ports import PORTS

COMPOSE = Path(__file__).resolve().parents[2] / "compose"


def services() -> dict:
    return yaml.safe_load((COMPOSE / "docker-compose.yml").read_text())["services"]


def test_every_function_is_a_service_with_its_image_port_and_timeout() -> None:
    found = services()
    for f in FUNCTIONS:
        svc = found[f.name]
        assert svc["image"] == f"{f.repository}:${{IMAGE_TAG:-latest}}"
        [port] = svc["ports"]
        assert re.fullmatch(
            rf"127\.0\.0\.1:\$\{{{f.name.upper().replace('-', '_')}_PORT:-{PORTS[f.name]}\}}:8080", port
        )
        env = svc["environment"]
        assert env["AWS_LAMBDA_FUNCTION_TIMEOUT"] == str(f.timeout_s), f.name  # what the RIE enforces locally
        assert env["AWS_LAMBDA_FUNCTION_MEMORY_SIZE"] == str(f.memory_mb)
        assert env["AWS_ENDPOINT_URL"] == "http://aws:4566" and svc["read_only"] is True


def test_local_tools_run_after_provisioning_and_only_on_loopback() -> None:
    found = services()
    assert found["init"]["command"][:2] == ["email-handler", "provision"] and found["init"]["restart"] == "no"
    for name in ("wiring", "smtp"):
        assert found[name]["depends_on"]["init"] == {"condition": "service_completed_successfully"}
    wiring_deps = found["wiring"]["depends_on"]
    assert all(wiring_deps[f.name] == {"condition": "service_healthy"} for f in FUNCTIONS)
    for svc in found.values():  # nothing listens beyond this machine
        assert all(p.startswith("127.0.0.1:") for p in svc.get("ports", []))


def aws_clients() -> set[str]:
    """Every service of the stack that talks to AWS (it points AWS_ENDPOINT_URL at the emulator)."""
    return {
        name for name, svc in services().items() if (svc.get("environment") or {}).get("AWS_ENDPOINT_URL")
    }


def test_dynamodb_routing_reaches_every_aws_client() -> None:
    # Missing one would split DynamoDB state between LocalStack and moto without an error.
    routed = yaml.safe_load((COMPOSE / "dynamodb-moto.yml").read_text())["services"]
    clients = aws_clients()
    assert clients >= {"init", "wiring", "smtp", *(f.name for f in FUNCTIONS)}
    assert set(routed) - {"dynamodb"} == clients
    assert all(
        routed[name]["environment"] == {"AWS_ENDPOINT_URL_DYNAMODB": "http://dynamodb:4566"}
        for name in clients
    )
    assert routed["dynamodb"]["image"] == services()["init"]["image"]  # moto from the local tools image
    assert all(p.startswith("127.0.0.1:") for p in routed["dynamodb"]["ports"])


def test_localstack_keeps_the_token_and_mounts_its_init_hooks() -> None:
    aws = yaml.safe_load((COMPOSE / "emulator-localstack.yml").read_text())["services"]["aws"]
    assert aws["environment"]["LOCALSTACK_AUTH_TOKEN"] == "${LOCALSTACK_AUTH_TOKEN:-}"
    assert {"s3", "sqs", "sns", "ses", "dynamodb", "ssm", "logs", "sts"} <= set(
        aws["environment"]["SERVICES"].split(",")
    )
    [hooks] = aws["volumes"]
    source, target, _ = hooks.split(":")
    assert (COMPOSE / source).is_dir() and target == "/etc/localstack/init/start.d"
    assert list((COMPOSE / source).glob("*.py"))


def test_functions_run_with_their_role_credentials_and_moto_enforces_iam_by_default() -> None:
    found = services()
    for f in FUNCTIONS:  # its own variables and its role session's keys only (local.env.function_env_files)
        assert found[f.name]["env_file"] == [f"../.build/local/functions/{f.name}.env"], f.name
    for tool in ("init", "wiring", "smtp"):  # the local admin (local.env.admin_credentials)
        assert found[tool]["env_file"] == ["local.env", "../.build/local/emulator.env"]
    moto = yaml.safe_load((COMPOSE / "emulator-moto.yml").read_text())["services"]["aws"]
    assert moto["environment"]["IAM"] == "${IAM:-on}"


def test_the_stack_secret_reaches_the_emulator_and_the_tools_never_a_function_or_an_image() -> None:
    """local/secret.py: the moto emulators and the tools read the stack's secret from the file
    scripts/compose.sh makes; a function container gets only its role session's keys."""
    found = services()
    secret_file = "../.build/local/emulator.env"
    assert not any(secret_file in found[f.name]["env_file"] for f in FUNCTIONS)
    for extra in ("emulator-moto.yml", "dynamodb-moto.yml"):
        for name, service in yaml.safe_load((COMPOSE / extra).read_text())["services"].items():
            if "image" in service:  # a moto server of the local tools image
                assert service["env_file"] == secret_file, (extra, name)
    dockerfile = (COMPOSE / "local.Dockerfile").read_text()
    assert "emulator.env" not in dockerfile and "LOCAL_EMULATOR_SECRET" not in dockerfile
    script = (COMPOSE.parent / "scripts" / "compose.sh").read_text()
    assert "python -m local.env /out" in script  # the stack makes it, before compose reads the env_files
