"""The built images: RIE curl in containers, awslambdaric alone on AWS, image shape."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from deploy.functions import FUNCTIONS, image_ref
from local.rie import free_port
from tests.docker.conftest import BASE_IMAGE, RunningImage
from tests.support.cases import CASES, Case, event_for
from tests.support.scenario import wait_for

pytestmark = pytest.mark.docker


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.function)
def test_rie_curl_in_container(
    case: Case, run_image: Callable[..., RunningImage], request: pytest.FixtureRequest
) -> None:
    if case.aws:  # on the host network, to reach the session's moto server on loopback
        stack = request.getfixturevalue("stack")
        running = run_image(image_ref(case.function), host_network=True, env={"AWS_ENDPOINT_URL": stack.url})
    else:
        running = run_image(image_ref(case.function))
    # The documented user path: curl -XPOST localhost:PORT/2015-03-31/functions/function/invocations -d
    # @event.json
    out = subprocess.run(
        [
            "curl",
            "-sS",
            "-XPOST",
            f"{running.url}/2015-03-31/functions/function/invocations",
            "-d",
            json.dumps(event_for(case)),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    case.check(json.loads(out.stdout))
    # mypylogger writes from its own thread, so the line may reach the container's log just after
    # the response does.
    wait_for("the invocation's log line", lambda: '"message": "invocation finished"' in running.logs(), 10)


class _FakeRuntimeApi(BaseHTTPRequestHandler):
    """The two Lambda Runtime API calls awslambdaric makes for one invocation."""

    event: bytes = b""
    posted: list[Any] = []  # not `responses`: BaseHTTPRequestHandler reads that for status lines
    served = threading.Event()

    def do_GET(self) -> None:
        if self.served.is_set():  # one invocation only; park the runtime until the test ends
            time.sleep(30)
            return
        self.served.set()
        self.send_response(200)
        self.send_header("Lambda-Runtime-Aws-Request-Id", "req-direct-1")
        self.send_header("Lambda-Runtime-Deadline-Ms", str(int(time.time() * 1000) + 60_000))
        self.send_header(
            "Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:us-east-1:123456789012:function:f"
        )
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(self.event)

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.posted.append((self.path, json.loads(body or b"null")))
        self.send_response(202)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def test_entrypoint_uses_awslambdaric_alone_when_runtime_api_is_set(
    run_image: Callable[..., RunningImage],
) -> None:
    """On AWS, Lambda sets AWS_LAMBDA_RUNTIME_API: no RIE, the runtime client is PID 1 (exec)."""
    case = CASES[2]  # needs no AWS
    _FakeRuntimeApi.event = json.dumps(event_for(case)).encode()
    _FakeRuntimeApi.posted = []
    _FakeRuntimeApi.served = threading.Event()
    port = free_port()
    server = ThreadingHTTPServer(("127.0.0.1", port), _FakeRuntimeApi)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    running = run_image(  # no RIE port to wait for: that is the point
        image_ref("attachment-extractor"),
        host_network=True,
        wait=False,
        env={"AWS_LAMBDA_RUNTIME_API": f"127.0.0.1:{port}"},
    )
    deadline = time.monotonic() + 30
    while not _FakeRuntimeApi.posted and time.monotonic() < deadline:
        time.sleep(0.1)
    server.shutdown()
    assert _FakeRuntimeApi.posted, "the runtime never posted a response"
    path, payload = _FakeRuntimeApi.posted[0]
    assert path == "/2018-06-01/runtime/invocation/req-direct-1/response"
    case.check(payload)
    processes = running.container.top(ps_args="-o pid,args")["Processes"]
    running.container.reload()
    init_pid = str(running.container.attrs["State"]["Pid"])  # host PID of the container's PID 1
    assert [pid for pid, args in processes if "awslambdaric" in args] == [init_pid], processes  # exec'd
    assert any("-m awslambdaric app.handler" in args for _, args in processes), processes
    assert not any("aws-lambda-rie" in args for _, args in processes), processes


def test_function_images_differ_from_base_only_by_the_handler_layer(docker_client: Any) -> None:
    base = docker_client.images.get(BASE_IMAGE)
    base_layers = base.attrs["RootFS"]["Layers"]
    for fn in FUNCTIONS:
        image = docker_client.images.get(fn.image)
        layers = image.attrs["RootFS"]["Layers"]
        assert layers[: len(base_layers)] == base_layers, f"{fn.name} is not built on the current base"
        assert len(layers) == len(base_layers) + 1, f"{fn.name} adds {len(layers) - len(base_layers)} layers"
        extra = image.attrs["Size"] - base.attrs["Size"]
        assert 0 < extra <= 50_000, f"{fn.name} adds {extra} bytes"
        assert image.attrs["Config"]["Cmd"] == ["app.handler"]
        assert image.attrs["Config"]["Entrypoint"] == ["/usr/local/bin/lambda-entrypoint"]


def test_the_images_record_the_python_they_run(docker_client: Any) -> None:
    """The Debian revision of python3.13 floats (scripts/os-image.sh): the base and every function image
    name the exact interpreter in their labels."""
    labels = docker_client.images.get(BASE_IMAGE).labels
    python, deb = labels["org.service-email-handler.python"], labels["org.service-email-handler.python-deb"]
    running = docker_client.containers.run(
        BASE_IMAGE,
        ["-c", "import platform; print(platform.python_version())"],
        entrypoint="python3",
        network_mode="none",
        remove=True,
    )
    assert running.decode().strip() == python and deb.startswith(python + "-")
    for fn in FUNCTIONS:
        assert docker_client.images.get(fn.image).labels["org.service-email-handler.python"] == python


def test_base_runs_as_non_root_and_compiles_nothing_at_a_cold_start(docker_client: Any) -> None:
    """Every module the functions import loads from a .pyc that the build wrote as unchecked-hash
    (``compileall --invalidation-mode unchecked-hash`` over the stdlib, site-packages and /opt/lib):
    never from source, since the root file system is read-only on Lambda and that would recompile
    at every cold start, and never from a timestamp .pyc, which costs a stat of its source (PEP 552)."""
    base = docker_client.images.get(BASE_IMAGE)
    assert base.attrs["Config"]["User"] == "10001"
    code = (
        "import os, sys\n"
        "import common.runtime.handler, common.senders.handler, common.senders.idempotency\n"
        "import common.inbound.handler, common.reply.handler, common.extractor.handler\n"
        "import boto3, awslambdaric, mypylogger, pypdf, common.extractor.ooxml\n"
        "boto3.session.Session(region_name='us-east-1').client('s3')\n"
        "unchecked, other, source = [], [], []\n"
        "for name, m in list(sys.modules.items()):\n"
        "    spec = getattr(m, '__spec__', None)\n"
        "    if type(getattr(spec, 'loader', None)).__name__ != 'SourceFileLoader':\n"
        "        continue\n"
        "    if not os.path.exists(spec.cached):\n"
        "        source.append(name); continue\n"
        "    with open(spec.cached, 'rb') as f:\n"
        "        flags = int.from_bytes(f.read(8)[4:], 'little')\n"
        "    (unchecked if flags == 0b01 else other).append(name)\n"
        "listed = [','.join(sorted(names)) or '-' for names in (source, other)]\n"
        "print(os.getuid(), len(unchecked), *listed)\n"
    )
    out = (
        docker_client.containers.run(
            BASE_IMAGE,
            entrypoint=["python", "-c", code],
            read_only=True,
            remove=True,
            network_mode="none",
        )
        .decode()
        .split()
    )
    uid, unchecked, source, other = out
    assert uid == "10001"
    assert int(unchecked) > 500, unchecked  # the stdlib's, site-packages' and common/'s modules
    assert source == "-", f"compiled from source at every cold start: {source}"
    assert other == "-", f"not unchecked-hash .pyc (a stat of the source each, or stale-checked): {other}"


def test_base_image_holds_only_what_runs_on_lambda(docker_client: Any) -> None:
    """Host tooling (the CLI, the emulator, the wiring, the SMTP ingress) and the deploy never ship."""
    out = (
        docker_client.containers.run(
            BASE_IMAGE,
            entrypoint=[
                "python",
                "-c",
                "import importlib.util as u; "
                "print([m for m in ('local', 'deploy', 'moto', 'aiosmtpd', 'docker') if "
                "u.find_spec(m)])",
            ],
            read_only=True,
            remove=True,
            network_mode="none",
        )
        .decode()
        .strip()
    )
    assert out == "[]"


def test_base_image_creates_each_kept_services_client_and_no_dropped_one(docker_client: Any) -> None:
    """The build keeps only docker/aws-services.txt's botocore models: each of those clients can be
    created (creating a client loads its model; no network, no credentials), a dropped one cannot."""
    from pathlib import Path

    kept = [
        line.split("#", 1)[0].strip()
        for line in (Path(__file__).resolve().parents[2] / "docker" / "aws-services.txt")
        .read_text()
        .splitlines()
    ]
    kept = [name for name in kept if name]
    code = (
        "import sys, boto3, botocore.exceptions as e; s = boto3.session.Session(region_name='us-east-1'); "
        "made = [s.client(n).meta.service_model.service_name for n in sys.argv[1:]]; "
        "dropped = ''\n"
        "try:\n    s.client('ec2')\nexcept e.UnknownServiceError:\n    dropped = 'ec2'\n"
        "print(' '.join(made), '|', dropped, '|', ' '.join(sorted(s.get_available_services())))"
    )
    out = (
        docker_client.containers.run(
            BASE_IMAGE,
            entrypoint=["python", "-c", code, *kept],
            read_only=True,
            remove=True,
            network_mode="none",
        )
        .decode()
        .strip()
    )
    made, dropped, available = (part.split() for part in out.split("|"))
    assert made == kept
    assert dropped == ["ec2"]
    assert available == sorted(kept)


def test_base_image_trims_leave_every_shipped_module_importable(docker_client: Any) -> None:
    """What Dockerfile.base deletes (unused Powertools parts, the stdlib's tests and pydoc topics,
    glibc's iconv modules) is gone, and every module the functions ship still imports, with the
    compiled extensions (cryptography's Rust core through pypdf's AES, awslambdaric's runtime client)."""
    code = (
        "import importlib, importlib.util as u, os, pkgutil, sysconfig, common\n"
        "mods = [m.name for m in pkgutil.walk_packages(common.__path__, 'common.')]\n"
        "for name in mods: importlib.import_module(name)\nimport runtime_client, "
        "simplejson._speedups\nfrom cryptography.hazmat.primitives.ciphers import "
        "Cipher, algorithms, modes\nfrom pypdf._crypt_providers import crypt_provider\n"
        "enc = Cipher(algorithms.AES(b'k' * 16), modes.CBC(b'i' * 16)).encryptor()\n"
        "assert len(enc.update(b'x' * 16) + enc.finalize()) == 16\n"
        "from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer\nfrom aws_"
        "lambda_powertools.utilities.batch import BatchProcessor\nfrom importlib.metadata import version\n"
        "gone = [m for m in ('aws_lambda_powertools.event_handler', 'aws_lambda_powertools.utilities.parser',"
        " 'test', 'pydoc_data') if u.find_spec(m)]\n"
        "gconv = [d for d in os.listdir('/usr/lib') if os.path.isdir(f'/usr/lib/{d}/gconv')]\n"
        "print(len(mods), crypt_provider[0], version('aws-lambda-powertools'), gone, gconv)\n"
    )
    out = (
        docker_client.containers.run(
            BASE_IMAGE,
            entrypoint=["python", "-c", code],
            read_only=True,
            remove=True,
            network_mode="none",
        )
        .decode()
        .split(maxsplit=3)
    )
    assert int(out[0]) > 50
    assert out[1] == "cryptography"
    assert out[2][0].isdigit()  # Powertools reads its own version from its metadata
    assert out[3].strip() == "[] []"
