"""The compose stack agrees with the function table (names, images, ports, timeouts)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from common.runtime.functions import FUNCTIONS

COMPOSE = Path(__file__).resolve().parents[2] / "compose"


def services() -> dict:
    return yaml.safe_load((COMPOSE / "docker-compose.yml").read_text())["services"]


def test_every_function_is_a_service_with_its_image_port_and_timeout() -> None:
    found = services()
    for f in FUNCTIONS:
        svc = found[f.name]
        assert svc["image"] == f"{f.repository}:${{IMAGE_TAG:-latest}}"
        [port] = svc["ports"]
        assert re.fullmatch(rf"127\.0\.0\.1:\$\{{{f.name.upper().replace('-', '_')}_PORT:-{f.port}\}}:8080", port)
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
