"""A push from Docker's containerd image store (the default of Docker Engine 29 and recent Docker Desktop)
deploys: a second Docker daemon (Debian trixie's dockerd 26 with the containerd-snapshotter feature,
unpacked by scripts/containerd-engine.sh) with its own data root and socket, reached the way Colima or
OrbStack users reach theirs -- a `docker context` -- builds the function images with BuildKit's
defaults and pushes them. That push is an OCI image index (the image plus an attestation manifest),
which Lambda refuses; the deploy gives Lambda the image's own single-platform manifest.

The second daemon and its containerd run in a network namespace of their own: a dockerd started with
``--bridge none`` in the host's namespace deletes the host's ``docker0`` (moby's daemon_unix.go,
removeDefaultBridgeInterface), which breaks every container the host's own engine starts. They reach
the test's loopback registry through tests/docker/relay.py.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from deploy.functions import FUNCTIONS
from local.guard import admin_request
from tests.conftest import IN_CI, REPO
from tests.docker.conftest import BASE_IMAGE
from tests.docker.pushing import OCI_INDEX, PREFIX, SINGLE_PLATFORM, deploy_cli, die_with_parent, manifest

pytestmark = pytest.mark.docker
CONTEXT = "containerd-store"


def _start(argv: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # its own group: the teardown signals the daemon and its children
            preexec_fn=die_with_parent,
        )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


@dataclass
class Engine:
    socket: str  # unix:///...
    env: dict[str, str]  # DOCKER_CONFIG with the context selected; no DOCKER_HOST
    client: Any


def _wait_for(path: Path, proc: subprocess.Popen[bytes], log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"{path.name} did not appear:\n{log.read_text(errors='replace')[-3000:]}")
        time.sleep(0.2)


def _has_link(name: str) -> bool:
    """Whether this process's network namespace (the host's) has an interface of that name."""
    try:
        socket.if_nametoindex(name)
    except OSError:
        return False
    return True


def _namespace(
    work: Path, registry: str, env: dict[str, str], procs: list[subprocess.Popen[bytes]]
) -> list[str]:
    """Start a process holding a network and mount namespace of their own, with only ``lo`` up, where
    ``registry`` (the host's loopback address) is relayed to the host's registry over a unix socket on
    the shared filesystem. Returns the argv prefix that runs a program inside both namespaces."""
    relay = [sys.executable, str(Path(__file__).with_name("relay.py"))]
    bridge = work / "registry.sock"
    procs.append(_start([*relay, f"unix:{bridge}", f"tcp:{registry}"], work / "relay-host.log", env))
    _wait_for(bridge, procs[-1], work / "relay-host.log")
    procs.append(
        _start(
            # Private propagation: dockerd bind-mounts its data root, and a daemon killed with the test
            # would otherwise leave that mount on the host.
            [*("unshare", "--net", "--mount", "--propagation", "private", "--")]
            + ["sh", "-c", 'ip link set lo up && exec "$@"', "sh"]
            + [*relay, f"tcp:{registry}", f"unix:{bridge}", str(work / "relay.ready")],
            work / "relay-namespace.log",
            env,
        )
    )
    _wait_for(work / "relay.ready", procs[-1], work / "relay-namespace.log")
    holder = procs[-1].pid  # unshare, sh and the relay each exec the next: one process throughout
    return ["nsenter", f"--net=/proc/{holder}/ns/net", f"--mount=/proc/{holder}/ns/mnt", "--"]


def _own_network(pid: int) -> bool:
    return os.readlink(f"/proc/{pid}/ns/net") != os.readlink("/proc/self/ns/net")


@pytest.fixture
def containerd_engine(registry: str) -> Iterator[Engine]:
    """dockerd with the containerd image store on its own socket, data root, containerd and network
    namespace, which reaches ``registry``; killed on teardown, and by the kernel if this process dies
    first. The host's ``docker0`` is still there afterwards."""
    had_bridge = _has_link("docker0")
    found = subprocess.run(
        [str(REPO / "scripts" / "containerd-engine.sh")], capture_output=True, text=True, timeout=600
    )
    if found.returncode != 0:
        message = f"no containerd-store engine (scripts/containerd-engine.sh):\n{found.stderr[-2000:]}"
        pytest.fail(message) if IN_CI else pytest.skip(message)
    root = Path(found.stdout.strip().splitlines()[-1])
    # Unix socket paths are limited to 108 bytes: a short folder of its own under /tmp, named by this
    # process so that what a run killed hard left behind (its daemons died with it) is removed here.
    for stale in Path("/tmp").glob("ctrd-*-*"):
        pid = stale.name.split("-")[1]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            shutil.rmtree(stale, ignore_errors=True)
    work = Path(tempfile.mkdtemp(prefix=f"ctrd-{os.getpid()}-", dir="/tmp"))
    env = {**os.environ, "PATH": f"{root}/usr/bin:{root}/usr/sbin:{os.environ['PATH']}"}
    env.pop("DOCKER_HOST", None)
    (work / "containerd.toml").write_text(
        f'version = 2\nroot = "{work}/containerd"\nstate = "{work}/containerd-state"\n'
        f'[grpc]\n  address = "{work}/containerd.sock"\n'
        '[plugins."io.containerd.grpc.v1.cri"]\n  disable = true\n'
    )
    (work / "daemon.json").write_text(json.dumps({"features": {"containerd-snapshotter": True}}))
    procs: list[subprocess.Popen[bytes]] = []
    try:
        inside = _namespace(work, registry, env, procs)
        procs.append(
            _start(
                [*inside, f"{root}/usr/bin/containerd", "--config", str(work / "containerd.toml")],
                work / "containerd.log",
                env,
            )
        )
        _wait_for(work / "containerd.sock", procs[-1], work / "containerd.log")
        procs.append(
            _start(
                [
                    *inside,
                    f"{root}/usr/sbin/dockerd",
                    *("--config-file", str(work / "daemon.json")),
                    *("--containerd", str(work / "containerd.sock")),
                    *("--data-root", str(work / "docker"), "--exec-root", str(work / "exec")),
                    *("--pidfile", str(work / "docker.pid"), "-H", f"unix://{work}/docker.sock"),
                    # No bridge: it builds and pushes only, to the registry relayed into its namespace.
                    *("--bridge", "none", "--iptables=false", "--ip6tables=false", "--ip-masq=false"),
                ],
                work / "dockerd.log",
                env,
            )
        )
        _wait_for(work / "docker.sock", procs[-1], work / "dockerd.log")
        assert _own_network(procs[-1].pid), "dockerd runs in the host's network namespace"
        address = f"unix://{work}/docker.sock"
        # The user's side: a CLI config whose current context is this engine, with the buildx plugin.
        config = work / "cli"
        (config / "cli-plugins").mkdir(parents=True)
        (config / "cli-plugins" / "docker-buildx").symlink_to(
            root / "usr/libexec/docker/cli-plugins/docker-buildx"
        )
        cli_env = {**env, "DOCKER_CONFIG": str(config)}
        for argv in (
            ["context", "create", CONTEXT, "--docker", f"host={address}"],
            ["context", "use", CONTEXT],
        ):
            subprocess.run(["docker", *argv], env=cli_env, check=True, capture_output=True, timeout=30)
        import docker

        client = docker.DockerClient(base_url=address)  # type: ignore[attr-defined]  # mypy: the repo's docker/
        store = dict(client.info().get("DriverStatus") or [])
        assert store.get("driver-type") == "io.containerd.snapshotter.v1", client.info().get("DriverStatus")
        yield Engine(address, cli_env, client)
    finally:
        for proc in reversed(procs):
            _stop(proc)
        shutil.rmtree(work, ignore_errors=True)
    assert _has_link("docker0") or not had_bridge, "the host's docker0 went away with the second daemon"


def _docker(engine: Engine, *argv: str, stdin: Any = None) -> str:
    done = subprocess.run(
        ["docker", *argv], env=engine.env, stdin=stdin, capture_output=True, text=True, timeout=600, cwd=REPO
    )
    assert done.returncode == 0, (argv, done.stdout[-2000:], done.stderr[-2000:])
    return done.stdout


@pytest.mark.timeout(1500)
def test_a_push_from_the_containerd_image_store_gives_lambda_a_single_platform_manifest(
    registry: str,
    docker_client: Any,
    containerd_engine: Engine,
    moto_server: str,
    local_defaults: dict[str, str],
) -> None:
    engine = containerd_engine
    # The base image from the host's engine, then the function images built on the containerd store as
    # scripts/images.sh builds them, with buildx's defaults: what `docker build` makes on Engine 29.
    host_env = {k: v for k, v in os.environ.items() if k not in ("DOCKER_CONFIG", "DOCKER_CONTEXT")}
    save = subprocess.Popen(["docker", "save", BASE_IMAGE], stdout=subprocess.PIPE, env=host_env)
    _docker(engine, "load", stdin=save.stdout)
    assert save.wait(60) == 0
    build_env = {k: v for k, v in engine.env.items() if k != "BUILDX_NO_DEFAULT_ATTESTATIONS"}
    for f in FUNCTIONS:
        done = subprocess.run(
            ["docker", "buildx", "build", "--network", "none", "-t", f.image]
            + ["--build-arg", f"BASE_IMAGE={BASE_IMAGE}", f"images/{f.name}"],
            env=build_env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr[-3000:]

    urllib.request.urlopen(admin_request(moto_server + "/moto-api/reset", method="POST")).read()
    first = deploy_cli(registry, moto_server, local_defaults, "--skip-build", env=engine.env)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert "pushed" in first.stdout

    import boto3
    from botocore.exceptions import ClientError

    admin = {
        "aws_access_key_id": local_defaults["AWS_ACCESS_KEY_ID"],
        "aws_secret_access_key": local_defaults["AWS_SECRET_ACCESS_KEY"],
    }
    lam = boto3.client("lambda", endpoint_url=moto_server, region_name="us-east-1", **admin)
    for f in FUNCTIONS:
        repository = f"{PREFIX}-{f.name}"
        image = engine.client.images.get(f.image)
        tag = "c-" + image.id.removeprefix("sha256:")[:12]
        # What the containerd store pushed under the tag: an index with the image and its attestation.
        media_type, index_digest, index = manifest(registry, repository, tag)
        assert media_type == OCI_INDEX, (f.name, media_type)
        kinds = [(m.get("annotations") or {}).get("vnd.docker.reference.type") for m in index["manifests"]]
        assert "attestation-manifest" in kinds, index
        # What Lambda got: the image's own manifest for the platform it was built for, by digest.
        uri = lam.get_function(FunctionName=f"{PREFIX}-{f.name}")["Code"]["ImageUri"]
        assert uri.startswith(f"{registry}/{repository}@sha256:")
        child = uri.partition("@")[2]
        entry = next(m for m in index["manifests"] if m["digest"] == child)
        assert entry["platform"] == {"architecture": image.attrs["Architecture"], "os": "linux"}
        assert "annotations" not in entry or "vnd.docker.reference.type" not in entry["annotations"]
        child_type, _, document = manifest(registry, repository, child)
        assert child_type in SINGLE_PLATFORM and "manifests" not in document
        assert document["config"]["mediaType"].endswith(("container.image.v1+json", "image.config.v1+json"))
        # The emulator refuses the index itself, as Lambda does.
        with pytest.raises(ClientError, match="is not supported") as refused:
            lam.update_function_code(
                FunctionName=f"{PREFIX}-{f.name}", ImageUri=f"{registry}/{repository}@{index_digest}"
            )
        assert refused.value.response["Error"]["Code"] == "InvalidParameterValueException"

    # The tag is immutable and still names the index: a rerun resolves it again and changes nothing.
    again = deploy_cli(registry, moto_server, local_defaults, "--skip-build", env=engine.env)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "pushed" not in again.stdout and "nothing to change" in again.stdout
