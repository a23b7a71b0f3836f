"""Image sizes, cold start (container start -> first response) and warm invoke latency.

The cold-start figure is net of what every container pays: each function start is measured in a
triple with a bare ``hello`` (no AWS call) and the one-call baseline ``hello-boto``, all three on the
same base with the same entry script, the order
rotated from triple to triple; ``cold_net_vs_baseline`` is the median of (function - hello) /
(baseline - hello). A function's cheap event (a staged mail that is not there, a duplicate send, a
calendar file) compares like with like; ``cold_real_first_event_ms`` is the same start on the event a
real first invocation brings: a first-contact mail for inbound-handler, a first send for the senders.
"""

from __future__ import annotations

import itertools
import json
import os
import statistics
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common.aws.sts import account_id
from common.mail.outbound import OutboundMessage
from deploy.functions import FUNCTIONS, image_ref
from local.env import local_env
from local.rie import free_port, invoke

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


Event = Callable[[], Any]  # a fresh event per start (a first contact, a new send)


def _triple(client: Any, image: str, event: Event, i: int, cpus: float = 0.0) -> tuple[float, float, float]:
    """(hello, baseline, function) cold starts, the order rotated from one triple to the next: a start
    right after another's removal is slower (the same image twice in a row: 1.01-1.04x), so a fixed
    order would favour whichever goes first."""
    order = [(HELLO, dict), (HELLO_AWS, dict), (image, event)]
    order = order[i % 3 :] + order[: i % 3]
    seconds = {ref: _cold_start(client, ref, ev(), cpus) for ref, ev in order}
    return seconds[HELLO], seconds[HELLO_AWS], seconds[image]


def _net(triples: list[tuple[float, float, float]]) -> float:
    """Median of (function - hello) / (baseline - hello): the container's and the runtime's own start,
    which both sides pay, taken out."""
    return round(statistics.median((f - h) / max(b - h, 1e-3) for h, b, f in triples), 2)


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
        attach_emulator()
        try:
            return _run(rounds, warm_n)
        finally:
            detach_emulator()


def attach_emulator() -> None:
    """The functions' containers talk to the emulator the caller started (``emulator_process``)."""
    _EMULATOR["AWS_ENDPOINT_URL"] = os.environ["AWS_ENDPOINT_URL"]
    _EMULATOR["ACCOUNT_ID"] = account_id()  # as the deploy sets it for every function


def detach_emulator() -> None:
    _EMULATOR.clear()


def function_images() -> list[tuple[str, str]]:
    """(function, image of this tree) for each of the six."""
    return [(fn.name, fn.image) for fn in FUNCTIONS]


def cheap_event(fn_name: str) -> Event:
    """The function's cheap event: the same work whatever the code's shape (a staged mail that is not
    there, a duplicate send, a calendar file)."""
    return _cheap(fn_name)


def _cheap(fn_name: str) -> Event:
    doc = json.loads((EVENTS / EVENT_FOR.get(fn_name, "sqs-send.json")).read_text())
    return lambda: doc


_SERIAL = itertools.count()


def _first_contact() -> Any:
    """A first-contact mail staged in the bucket as SES's S3 action leaves it, and the receipt event
    that names it: a sender never seen before, so the whole first-contact path runs."""
    from common.aws import s3
    from deploy import config
    from local import events
    from tests.support import mailgen

    cfg = config.load(local_env())
    n = f"{os.getpid()}{next(_SERIAL):05d}"
    raw = mailgen.mail(
        sender=f"Contact {n} <contact{n}@corp{n}.example>",
        to=cfg.public_email,
        subject=f"Role {n}",
        text=f"Hello, I would like to talk about role {n}.\n",
    )
    mid = f"bench{n}"
    s3.put(cfg.bucket, f"staging/{mid}", raw, "message/rfc822")
    return events.receipt_event(
        raw,
        mid,
        [cfg.public_email],
        function_arn=f"arn:aws:lambda:{cfg.region}:{_EMULATOR['ACCOUNT_ID']}:function:inbound-handler",
    )


def _first_send(kind: str) -> Event:
    """An SQS batch of one message never sent before: the claim, the SES call and the completion."""

    def event() -> Any:
        n = f"{os.getpid()}{next(_SERIAL):05d}"
        to = "owner@example.net" if kind == "forward" else f"contact{n}@corp.example"
        msg = OutboundMessage(
            kind=kind,
            idempotency_key=f"{kind}:bench{n}",
            correlation_id=f"{kind}-bench{n}",
            to=[to],
            subject=f"Role {n}",
            text="Hello,\n\nThanks for getting in touch.\n",
            reply_to=f"c{n}@thread.example.com" if kind == "forward" else "",
            conversation_id=f"contact{n}-at-corp.example",
        )
        doc = json.loads((EVENTS / "sqs-send.json").read_text())
        doc["Records"][0].update(messageId=f"bench-{n}", body=msg.to_json())
        return doc

    return event


REAL_FIRST_EVENT: dict[str, Event] = {
    "inbound-handler": _first_contact,
    "ack-sender": _first_send("ack"),
    "forward-sender": _first_send("forward"),
    "reply-sender": _first_send("reply"),
}


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
    base_image = client.images.get(image_ref("base"))
    base = base_image.attrs["Size"]
    labels = base_image.labels
    results: dict[str, Any] = {
        # The interpreter every figure below was measured on: the Debian revision floats between builds
        # (scripts/os-image.sh), so the run records the one it had, from the base image's labels.
        "python": {
            "version": labels.get("org.service-email-handler.python", ""),
            "debian_package": labels.get("org.service-email-handler.python-deb", ""),
        },
        "base_image_mb": round(base / 1e6, 1),
        "base_image_target_mb": 170,
        "aws_base_image_mb_reference": 534,
        "functions": {},
        "targets": {"handlers_net_vs_baseline": 1.3, "senders_net_vs_baseline": 1.2},
    }
    _cold_start(client, HELLO_AWS, {})  # untimed: moto loads each service's backend on first use
    hellos, baselines = [], []
    for fn in FUNCTIONS:
        image = fn.image
        cheap = _cheap(fn.name)
        _cold_start(client, image, cheap())  # untimed, for the same reason
        # Each function start beside a hello and a baseline start: on a shared machine the load drifts
        # over the minutes a run takes, and a triple measured together sees the same load.
        triples = [_triple(client, image, cheap, i) for i in range(rounds)]
        hellos += [h for h, _, _ in triples]
        baselines += [b for _, b, _ in triples]
        warm = _warm(client, image, cheap(), warm_n)
        row: dict[str, Any] = {
            "extra_bytes": client.images.get(image).attrs["Size"] - base,
            # Init alone: `import app` in the image (configuration, logging, the modules app.py imports).
            "import_ms": _import_ms(client, image, "pass", rounds),
            "cold_start_ms": round(statistics.median(f for _, _, f in triples) * 1000, 1),
            "cold_net_vs_baseline": _net(triples),
            "warm_p50_ms": round(_pct(warm, 50), 2),
            "warm_p95_ms": round(_pct(warm, 95), 2),
        }
        real = REAL_FIRST_EVENT.get(fn.name)
        if real:
            _cold_start(client, image, real())  # untimed: the first write of each kind in moto
            real_triples = [_triple(client, image, real, i) for i in range(rounds)]
            row["cold_real_first_event_ms"] = round(
                statistics.median(f for _, _, f in real_triples) * 1000, 1
            )
            row["cold_net_real_vs_baseline"] = _net(real_triples)
        results["functions"][fn.name] = row
    results["hello_world"] = {
        "cold_start_ms": round(statistics.median(hellos) * 1000, 1),
        "extra_bytes": client.images.get(HELLO).attrs["Size"] - base,
    }
    results["hello_one_aws_call"] = {"cold_start_ms": round(statistics.median(baselines) * 1000, 1)}
    # The extractor's heavy imports: cold start on a calendar file (no pypdf) vs on a PDF (pypdf imported).
    results["extractor_cold_start_ms"] = _extractor_cold_starts(client, rounds)
    results["lambda_cpu"] = _lambda_cpu(client, rounds)
    return results


# "At 1,769 MB, a function has the equivalent of one vCPU" (Lambda Developer Guide, "Configure Lambda
# function memory", https://docs.aws.amazon.com/lambda/latest/dg/configuration-memory.html).
VCPU_MB = 1769


def _lambda_cpu(client: Any, rounds: int) -> dict[str, dict[str, float]]:
    """Cold starts with the CPU share Lambda gives each function's memory size, hello and the baseline
    beside each at the same share: the machine's idle cores flatter every figure above, Lambda has none
    to give."""
    out = {}
    for fn in FUNCTIONS:
        cpus = round(fn.memory_mb / VCPU_MB, 2)
        triples = [_triple(client, fn.image, _cheap(fn.name), i, cpus) for i in range(rounds)]
        out[fn.name] = {
            "cpus": cpus,
            "cold_start_ms": round(statistics.median(f for _, _, f in triples) * 1000, 1),
            "hello_ms": round(statistics.median(h for h, _, _ in triples) * 1000, 1),
            "hello_one_aws_call_ms": round(statistics.median(b for _, b, _ in triples) * 1000, 1),
            "cold_net_vs_baseline": _net(triples),
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
    t = results["targets"]
    python = results.get("python") or {}
    lines = [
        f"Python {python.get('version') or '?'} (Debian python3.13 {python.get('debian_package') or '?'})",
        f"base image: {results['base_image_mb']} MB"
        f" (target <= 170; AWS base ~{results['aws_base_image_mb_reference']} MB)",
        f"hello cold start: {results['hello_world']['cold_start_ms']} ms; hello + one AWS call "
        f"(boto3 import, client, S3 GetObject): {results['hello_one_aws_call']['cold_start_ms']} ms",
        f"{'function':22} {'extra B':>8} {'import ms':>9} {'cold ms':>8} {'net x':>6}"
        f" {'real ms':>8} {'real x':>7} {'warm p50':>9} {'warm p95':>9}",
    ]
    for name, r in results["functions"].items():
        lines.append(
            f"{name:22} {r['extra_bytes']:>8} {r.get('import_ms', '-'):>9} {r['cold_start_ms']:>8} "
            f"{r['cold_net_vs_baseline']:>6} {r.get('cold_real_first_event_ms', '-'):>8} "
            f"{r.get('cold_net_real_vs_baseline', '-'):>7} {r['warm_p50_ms']:>9} {r['warm_p95_ms']:>9}"
        )
    lines.append(
        "net x = (function - hello) / (baseline - hello), median of triples (targets: handlers <= "
        f"{t['handlers_net_vs_baseline']}, senders <= {t['senders_net_vs_baseline']}); real = the same on a "
        "real first event (first-contact mail, first send); cold ms = docker run -> first response"
    )
    ex = results["extractor_cold_start_ms"]
    lines.append(
        f"extractor init: handler import {ex['handler_only']} ms;"
        f" + pypdf/DOCX reader {ex['with_parsers']} ms (paid only when a PDF/DOCX arrives)"
    )
    for name, r in results.get("lambda_cpu", {}).items():
        lines.append(
            f"at Lambda's CPU share, {name} ({r['cpus']} CPU): cold {r['cold_start_ms']} ms, hello "
            f"{r['hello_ms']} ms, hello + one AWS call {r['hello_one_aws_call_ms']} ms "
            f"(net {r['cold_net_vs_baseline']}x)"
        )
    return "\n".join(lines)
