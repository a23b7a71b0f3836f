"""Image sizes, cold start (container start -> first response) and warm invoke latency."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

from common.aws.sts import account_id
from common.local.env import local_env
from common.local.rie import free_port, invoke
from common.runtime.functions import FUNCTIONS, image_ref

REPO = Path(__file__).resolve().parent.parent
EVENTS = REPO / "tests" / "fixtures" / "events"
EVENT_FOR = {
    "inbound-handler": "ses-inbound.json",
    "reply-handler": "ses-reply.json",
    "attachment-extractor": "s3-calendar.json",
}
HELLO = image_ref("bench-hello")
HELLO_AWS = image_ref("bench-hello-boto")


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


_EMULATOR: dict[str, str] = {}  # AWS_ENDPOINT_URL of the emulator the functions talk to (set by run)


def _start(client: Any, image: str, cpus: float = 0.0) -> tuple[Any, str]:
    # Host network, like the tests: the functions reach the emulator on loopback; every container
    # (hello-world included) starts the same way, so the ratios compare like with like.
    port = free_port()
    environment = {
        **local_env(),
        **_EMULATOR,
        "RIE_ADDRESS": f"127.0.0.1:{port}",
        "RIE_RUNTIME_API_ADDRESS": f"127.0.0.1:{free_port()}",
    }
    container = client.containers.run(
        image,
        detach=True,
        read_only=True,
        tmpfs={"/tmp": ""},
        environment=environment,
        network_mode="host",
        **({"nano_cpus": int(cpus * 1e9)} if cpus else {}),
    )
    return container, f"http://127.0.0.1:{port}"


def _first_response(url: str, event: Any, timeout: float = 60.0) -> None:
    """Retry until the RIE answers: the port opens before the emulator inside is listening."""
    deadline = time.perf_counter() + timeout
    while True:
        try:
            invoke(url, event, timeout=30)
            return
        except OSError:
            if time.perf_counter() > deadline:
                raise
            time.sleep(0.01)


def _cold_start(client: Any, image: str, event: Any, cpus: float = 0.0) -> float:
    """Seconds from `docker run` to the first successful response (start + RIE + init + invoke); with
    ``cpus``, the container gets that share of a CPU (``docker run --cpus``)."""
    t0 = time.perf_counter()
    container, url = _start(client, image, cpus)
    try:
        _first_response(url, event)
        return time.perf_counter() - t0
    finally:
        container.remove(force=True)


def _pair(client: Any, image: str, event: Any, i: int, cpus: float = 0.0) -> tuple[float, float]:
    """(baseline, function) cold starts, the order alternated from one pair to the next: a start right
    after another's removal is slower (the same image twice in a row: 1.01-1.04x), so a fixed order
    would favour whichever goes first."""
    order = [(HELLO_AWS, {}), (image, event)]
    seconds = {ref: _cold_start(client, ref, ev, cpus) for ref, ev in (order if i % 2 == 0 else order[::-1])}
    return seconds[HELLO_AWS], seconds[image]


def _warm(client: Any, image: str, event: Any, n: int) -> list[float]:
    container, url = _start(client, image)
    try:
        _first_response(url, event)
        samples = []
        for _ in range(n):
            t0 = time.perf_counter()
            invoke(url, event)
            samples.append((time.perf_counter() - t0) * 1000)
        return samples
    finally:
        container.remove(force=True)


def run(rounds: int = 0, warm_n: int = 50) -> dict[str, Any]:
    """``rounds`` cold starts per figure: 3, or ``BENCH_ROUNDS`` (7 for figures worth quoting: the pairs
    move by about ±0.05 between runs of 3)."""
    from tests.support.sendload import emulator_process

    rounds = rounds or int(os.environ.get("BENCH_ROUNDS") or 3)

    with emulator_process(local_env()):  # the functions do their real AWS calls against it
        _EMULATOR["AWS_ENDPOINT_URL"] = os.environ["AWS_ENDPOINT_URL"]
        _EMULATOR["ACCOUNT_ID"] = account_id()  # as the deploy sets it for every function
        try:
            return _run(rounds, warm_n)
        finally:
            _EMULATOR.clear()


def _run(rounds: int, warm_n: int) -> dict[str, Any]:
    import docker

    client = docker.from_env()  # type: ignore[attr-defined]  # mypy sees the repo's docker/ folder
    for tag, folder in ((HELLO, "hello"), (HELLO_AWS, "hello-boto")):
        subprocess.run(
            # On the base of the same IMAGE_TAG as the functions, so a tree measured beside another
            # compares its functions with its own baseline.
            ["docker", "build", "-q", "--network", "none", "--build-arg", f"BASE_IMAGE={image_ref('base')}"]
            + ["-t", tag, str(REPO / "bench" / folder)],
            check=True,
            capture_output=True,
        )
    base = client.images.get(image_ref("base")).attrs["Size"]
    results: dict[str, Any] = {
        "base_image_mb": round(base / 1e6, 1),
        "base_image_target_mb": 160,
        "aws_base_image_mb_reference": 534,
        "functions": {},
    }
    hello_event: Any = {}
    hello_cold = [_cold_start(client, HELLO, hello_event) for _ in range(rounds)]
    results["hello_world"] = {
        "cold_start_ms": round(statistics.median(hello_cold) * 1000, 1),
        "extra_bytes": client.images.get(HELLO).attrs["Size"] - base,
    }
    _cold_start(client, HELLO_AWS, hello_event)  # untimed: moto loads each service's backend on first use
    aws_cold = [_cold_start(client, HELLO_AWS, hello_event) for _ in range(rounds)]
    for fn in FUNCTIONS:
        image = fn.image
        event = json.loads((EVENTS / EVENT_FOR.get(fn.name, "sqs-send.json")).read_text())
        _cold_start(client, image, event)  # untimed, for the same reason
        # Each function cold start beside one of the baseline: on a shared machine the load drifts
        # over the minutes a run takes, and a pair measured together sees the same load.
        pairs = [_pair(client, image, event, i) for i in range(rounds)]
        aws_cold += [baseline for baseline, _ in pairs]
        cold = [function for _, function in pairs]
        warm = _warm(client, image, event, warm_n)
        results["functions"][fn.name] = {
            "extra_bytes": client.images.get(image).attrs["Size"] - base,
            # Init alone: `import app` in the image (configuration, logging, the modules app.py imports).
            "import_ms": _import_ms(client, image, "pass", rounds),
            "cold_start_ms": round(statistics.median(cold) * 1000, 1),
            "cold_vs_hello": round(statistics.median(cold) / statistics.median(hello_cold), 2),
            "cold_vs_hello_one_aws_call": round(statistics.median(f / b for b, f in pairs), 2),
            "warm_p50_ms": round(_pct(warm, 50), 2),
            "warm_p95_ms": round(_pct(warm, 95), 2),
        }
    results["hello_one_aws_call"] = {"cold_start_ms": round(statistics.median(aws_cold) * 1000, 1)}
    # The extractor's heavy imports: cold start on a calendar file (no pypdf) vs on a PDF (pypdf imported).
    results["extractor_cold_start_ms"] = _extractor_cold_starts(client, rounds)
    results["lambda_cpu"] = _lambda_cpu(client, rounds)
    return results


# "At 1,769 MB, a function has the equivalent of one vCPU" (Lambda Developer Guide, "Configure Lambda
# function memory", https://docs.aws.amazon.com/lambda/latest/dg/configuration-memory.html).
VCPU_MB = 1769


def _lambda_cpu(client: Any, rounds: int) -> dict[str, dict[str, float]]:
    """Cold starts with the CPU share Lambda gives each function's memory size, the baseline beside each
    at the same share: the machine's idle cores flatter every figure above, Lambda has none to give."""
    out = {}
    for fn in FUNCTIONS:
        cpus = round(fn.memory_mb / VCPU_MB, 2)
        event = json.loads((EVENTS / EVENT_FOR.get(fn.name, "sqs-send.json")).read_text())
        pairs = [_pair(client, fn.image, event, i, cpus) for i in range(rounds)]
        out[fn.name] = {
            "cpus": cpus,
            "cold_start_ms": round(statistics.median(f for _, f in pairs) * 1000, 1),
            "hello_one_aws_call_ms": round(statistics.median(b for b, _ in pairs) * 1000, 1),
            "cold_vs_hello_one_aws_call": round(statistics.median(f / b for b, f in pairs), 2),
        }
    return out


def _import_ms(client: Any, image: str, extra: str, rounds: int) -> float:
    """Median in-container time of ``import app`` followed by ``extra`` (no network: init makes no
    call)."""
    code = (
        f"import time; t=time.perf_counter(); import app; {extra}; "
        "print(round((time.perf_counter()-t)*1000, 1))"
    )
    samples = [
        float(
            client.containers.run(
                image,
                entrypoint=["python", "-c", code],
                environment=local_env(),
                remove=True,
                read_only=True,
                network_mode="none",
            )
            .decode()
            .strip()
        )
        for _ in range(rounds)
    ]
    return statistics.median(samples)


def _extractor_cold_starts(client: Any, rounds: int) -> dict[str, float]:
    """In-container import cost of the extractor with and without its parsers (pypdf + cryptography,
    the DOCX reader)."""
    image = image_ref("attachment-extractor")
    return {
        label: _import_ms(client, image, extra, rounds)
        for label, extra in (
            ("handler_only", "pass"),
            ("with_parsers", "import pypdf, common.extractor.ooxml"),
        )
    }


def table(results: dict[str, Any]) -> str:
    lines = [
        f"base image: {results['base_image_mb']} MB"
        f" (target <= 160; AWS base ~{results['aws_base_image_mb_reference']} MB)",
        f"hello-world cold start: {results['hello_world']['cold_start_ms']} ms; hello + one AWS call "
        f"(boto3 import, client, S3 GetObject): {results['hello_one_aws_call']['cold_start_ms']} ms",
        f"{'function':22} {'extra B':>8} {'import ms':>9} {'cold ms':>8} {'x hello':>8}"
        f" {'x 1 call':>9} {'warm p50':>9} {'warm p95':>9}",
    ]
    for name, r in results["functions"].items():
        lines.append(
            f"{name:22} {r['extra_bytes']:>8} {r.get('import_ms', '-'):>9} {r['cold_start_ms']:>8} "
            f"{r['cold_vs_hello']:>8} {r['cold_vs_hello_one_aws_call']:>9} {r['warm_p50_ms']:>9} "
            f"{r['warm_p95_ms']:>9}"
        )
    lines.append(
        "targets: function layer <= 50 KB, cold start <= 1.5x hello-world "
        "(platform issue, when the functions made no AWS calls); cold ms = "
        "docker run -> first response, real AWS calls on the emulator included"
    )
    ex = results["extractor_cold_start_ms"]
    lines.append(
        f"extractor init: handler import {ex['handler_only']} ms;"
        f" + pypdf/DOCX reader {ex['with_parsers']} ms (paid only when a PDF/DOCX arrives)"
    )
    for name, r in results.get("lambda_cpu", {}).items():
        lines.append(
            f"at Lambda's CPU share, {name} ({r['cpus']} CPU): cold {r['cold_start_ms']} ms, "
            f"hello + one AWS call {r['hello_one_aws_call_ms']} ms ({r['cold_vs_hello_one_aws_call']}x)"
        )
    return "\n".join(lines)
