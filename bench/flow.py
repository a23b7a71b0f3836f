"""What a user feels, end to end on the embedded stack (`email-handler dev`'s machinery in this process:
moto, the six functions under the RIE on the host, the local wiring with Lambda's account concurrency
at a new account's 10):

* latency: a contact's mail from its receipt (stored and handed to the receipt rule's Lambda action, as
  the SMTP ingress does) to the forward SES accepts, and the owner's reply from its receipt to the
  reply SES accepts, at a steady rate; p50 and p95 (target p95 <= 2 s, the first spec's latency target);
* a burst of first-contact mails (``BENCH_BURST_MAILS``, default 1,000) within one minute: every
  mail forwarded exactly once, none lost, none in a DLQ, the minutes until the last forward and the
  stage that set the pace (target <= 10 minutes);
* what each function's invocations took (count and duration), for the cost per 1,000 mails
  (:func:`cost_per_1000_mails`, combined with bench/cost.py's calls per mail in bench/__main__.py).

SES acceptance is timed inside the emulator (moto's SendRawEmail, which SESv2's raw SendEmail uses),
so the figures include every queue, poll and invocation on the way. Locally each function runs one
instance (one RIE), where Lambda would run up to the account's 10 at once: the burst's pace here is a
floor for AWS's, and the throttles and peak concurrency say whether the account's limit bound at all.
"""

from __future__ import annotations

import contextlib
import email
import email.parser
import email.policy
import os
import statistics
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from deploy.functions import BY_NAME, FUNCTIONS
from local.rie import free_port

REPO = Path(__file__).resolve().parent.parent
LATENCY_MAILS = int(os.environ.get("BENCH_LATENCY_MAILS") or 30)
LATENCY_RATE = 1.0  # mails per second: steady, well below what the stack can carry
BURST_MAILS = int(os.environ.get("BENCH_BURST_MAILS") or 1000)
BURST_WINDOW_S = 60.0
BURST_TIMEOUT_S = float(os.environ.get("BENCH_BURST_TIMEOUT_S") or 20 * 60)
ACCOUNT_CONCURRENCY = 10


class Probe:
    """What the emulator's SES accepted (when, to whom, the MIME) and what each function's invocations
    took, recorded in this process."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.accepted: list[tuple[float, list[str], str, str]] = []  # (when, to, subject, MIME)
        self.invocations: dict[str, list[float]] = defaultdict(list)
        self.headers = email.parser.Parser(policy=email.policy.default)
        self.outcomes: Counter[str] = Counter()  # inbound-handler's answers to the receipts

    def activity(self, line: str) -> None:
        """The wiring's line per invocation: ``inbound-handler <- <queue>: <status>``."""
        if line.startswith("inbound-handler <- ") and "invocations" in line:
            with self.lock:
                self.outcomes[line.rsplit(": ", 1)[-1]] += 1

    def install_ses(self) -> Callable[[], None]:
        from moto.ses.models import SESBackend

        real = SESBackend.send_raw_email

        def send_raw_email(backend: Any, source: str, destinations: list[str], raw_data: str) -> Any:
            result = real(backend, source, destinations, raw_data)  # refused sends raise: not accepted
            at = time.time()
            # The subject read once, here: the emulator shares this process, and parsing every accepted
            # mail at each look would take its time.
            subject = str(self.headers.parsestr(raw_data, headersonly=True).get("Subject", ""))
            with self.lock:
                self.accepted.append((at, list(destinations), subject, raw_data))
            return result

        SESBackend.send_raw_email = send_raw_email  # type: ignore[method-assign,assignment]

        def undo() -> None:
            SESBackend.send_raw_email = real  # type: ignore[method-assign]

        return undo

    def time_endpoint(self, endpoint: Any) -> None:
        real = endpoint._invoke

        def timed(url: str, event: Any, timeout: float) -> Any:
            started = time.perf_counter()
            try:
                return real(url, event, timeout)
            finally:
                with self.lock:
                    self.invocations[endpoint.function].append(time.perf_counter() - started)

        endpoint._invoke = timed

    def by_subject(self, to: str | None = None, prefix: str = "Re: ") -> dict[str, list[tuple[float, str]]]:
        """Accepted sends keyed by their subject (``prefix`` removed), optionally only those to ``to``."""
        out: dict[str, list[tuple[float, str]]] = defaultdict(list)
        with self.lock:
            accepted = list(self.accepted)
        for at, destinations, subject, raw in accepted:
            if to is None or to in destinations:
                out[subject.removeprefix(prefix)].append((at, raw))
        return out


@contextlib.contextmanager
def stack(probe: Probe) -> Iterator[tuple[Any, Any]]:
    """The dev stack on free ports, with the account's concurrency at a new account's 10."""
    from local import concurrency
    from local.devstack import DevPorts, DevStack
    from local.env import local_env

    ports = DevPorts(
        emulator=free_port(), smtp=free_port(), functions={f.name: free_port() for f in FUNCTIONS}
    )
    logs = REPO / ".build" / "bench" / "dev"
    dev = DevStack(local_env(), ports, logs, report=lambda line: None, activity=probe.activity)
    try:
        dev.start()
        # The emulator's account is the default one (no SES sandbox: the owner's address and every contact
        # may receive), with Lambda's concurrency at a new account's: GetAccountSettings and the wiring agree.
        concurrency.set_account_limit(ACCOUNT_CONCURRENCY)
        dev.wiring.account.limit = ACCOUNT_CONCURRENCY
        for endpoint in dev.wiring.endpoints.values():
            probe.time_endpoint(endpoint)
        undo = probe.install_ses()
        try:
            from deploy import config

            yield dev, config.load(dev.env)
        finally:
            undo()
    finally:
        dev.stop()
        concurrency.set_account_limit(concurrency.DEFAULT_CONCURRENCY)


def _first_contact(cfg: Any, tag: str) -> bytes:
    from tests.support import mailgen

    return mailgen.mail(
        sender=f"Contact {tag} <{tag}@corp-{tag}.example>",
        to=cfg.public_email,
        subject=tag,
        text=f"Hello, I would like to talk about the role ({tag}).\n",
        message_id=f"<{tag}@corp-{tag}.example>",
    )


def _deliver(cfg: Any, raw: bytes, envelope_from: str, to: str) -> None:
    from local.ingress import deliver

    assert deliver(cfg, raw, envelope_from, [to]), f"no receipt rule for {to}"


def _wait(what: str, check: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.2)


def _pcts(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50_s": round(statistics.median(ordered), 3),
        "p95_s": round(ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))], 3),
    }


def _owner_reply(cfg: Any, tag: str, forward_raw: str) -> tuple[bytes, str]:
    """The owner's answer to a forward, sent to its Reply-To (the conversation's thread address)."""
    from tests.support import mailgen

    thread = email.message_from_string(forward_raw, policy=email.policy.default)["Reply-To"].addresses[0]
    raw = mailgen.mail(
        sender=f"Owner <{cfg.private_email}>",
        to=thread.addr_spec,
        subject=f"Re: {tag}",
        text=f"Hello, happy to talk ({tag}).\n\nOn Monday, the contact wrote:\n> {tag}\n",
    )
    return raw, thread.addr_spec


def _round_trips(cfg: Any, probe: Probe, tags: list[str]) -> tuple[list[float], list[float]]:
    """Each tag's first contact, then the owner's reply to each forward, one a second; the seconds from
    each receipt to the forward SES accepted, and from each reply's receipt to the reply SES accepted."""
    received: dict[str, float] = {}
    for tag in tags:  # one every second: the stack is keeping up, not draining a backlog
        received[tag] = time.time()
        _deliver(cfg, _first_contact(cfg, tag), f"{tag}@corp-{tag}.example", cfg.public_email)
        time.sleep(1 / LATENCY_RATE)
    forwards = lambda: probe.by_subject(cfg.private_email, prefix="")  # noqa: E731
    _wait("the forwards", lambda: all(t in forwards() for t in tags), 300)
    forward = {t: forwards()[t][0] for t in tags}

    replied: dict[str, float] = {}
    for tag in tags:
        raw, thread = _owner_reply(cfg, tag, forward[tag][1])
        replied[tag] = time.time()
        _deliver(cfg, raw, cfg.private_email, thread)
        time.sleep(1 / LATENCY_RATE)

    def reply(tag: str) -> float | None:
        """When SES accepted the reply to the contact (the ack went to the same address before)."""
        to_contact = probe.by_subject(f"{tag}@corp-{tag}.example").get(tag, [])
        sent = [at for at, _ in to_contact if at > replied[tag]]
        return sent[0] if sent else None

    _wait("the replies", lambda: all(reply(t) for t in tags), 300)
    return [forward[t][0] - received[t] for t in tags], [(reply(t) or 0.0) - replied[t] for t in tags]


def _latency(cfg: Any, probe: Probe) -> dict[str, Any]:
    # One untimed round trip first: each function's first invocation is its cold start, which a
    # steady flow meets once per sandbox, not per mail.
    _round_trips(cfg, probe, [f"warm{os.getpid()}"])
    to_forward, to_contact = _round_trips(
        cfg, probe, [f"lat{os.getpid()}x{i:03d}" for i in range(LATENCY_MAILS)]
    )
    return {
        "mails": LATENCY_MAILS,
        "rate_per_s": LATENCY_RATE,
        "receipt_to_forward": _pcts(to_forward),
        "reply_to_send": _pcts(to_contact),
        "target_p95_s": 2.0,
    }


def _dlq_depth() -> int:
    from common.aws import client

    sqs = client("sqs")
    total = 0
    for url in sqs.list_queues(QueueNamePrefix="").get("QueueUrls", []):
        if url.endswith("-dlq"):
            attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
            total += int(attrs["ApproximateNumberOfMessages"])
            total += int(attrs["ApproximateNumberOfMessagesNotVisible"])
    return total


def _burst(cfg: Any, dev: Any, probe: Probe) -> dict[str, Any]:
    account = dev.wiring.account
    account.peak, before = 0, {f: len(v) for f, v in probe.invocations.items()}
    outcomes_before = Counter(probe.outcomes)
    tags = [f"burst{os.getpid()}x{i:04d}" for i in range(BURST_MAILS)]
    started = time.time()
    for i, tag in enumerate(tags):  # spread over the minute, as a reply storm would arrive
        delay = started + i * BURST_WINDOW_S / len(tags) - time.time()
        if delay > 0:
            time.sleep(delay)
        _deliver(cfg, _first_contact(cfg, tag), f"{tag}@corp-{tag}.example", cfg.public_email)
    delivered_s = time.time() - started
    forwards = lambda: probe.by_subject(cfg.private_email, prefix="")  # noqa: E731
    with contextlib.suppress(AssertionError):  # a timeout is reported as mails lost, not raised
        _wait("every forward", lambda: sum(t in forwards() for t in tags) >= len(tags), BURST_TIMEOUT_S)
    time.sleep(5)  # a duplicate would come within the senders' next poll
    seen = forwards()
    times = sorted(seen[t][0][0] for t in tags if t in seen)
    contacts = {f"{t}@corp-{t}.example" for t in tags}
    with probe.lock:
        acks = sum(1 for _, to, _, _ in probe.accepted if contacts & set(to))
    invoked = {f: probe.invocations[f][before.get(f, 0) :] for f in probe.invocations}
    # The pace-setting stage: the one whose own busy time is closest to the whole burst's.
    elapsed = (times[-1] - started) if times else BURST_TIMEOUT_S
    busy = {f: sum(d) for f, d in invoked.items() if d}
    slowest = max(busy, key=lambda f: busy[f]) if busy else ""
    return {
        "mails": len(tags),
        "delivered_in_s": round(delivered_s, 1),
        "forwarded": len(times),
        "acks": acks,
        "lost": len(tags) - len(times),
        "duplicates": sum(len(seen[t]) - 1 for t in tags if t in seen),
        "dlq": _dlq_depth(),
        "minutes_to_last_forward": round(elapsed / 60, 2),
        "forwards_per_s": round(len(times) / elapsed, 2) if times else 0.0,
        "account_concurrency": account.limit,
        "peak_concurrency": account.peak,
        "throttles": sum(account.throttles.values()),
        "busy_s": {f: round(s, 1) for f, s in busy.items()},
        "inbound_outcomes": dict(probe.outcomes - outcomes_before),
        "bottleneck": (
            f"{slowest}: busy {busy[slowest]:.0f} s of the {elapsed:.0f} s (one instance locally)"
            if slowest
            else "nothing was invoked"
        ),
        "target_minutes": 10,
        "invocations": {
            f: {"count": len(d), "mean_s": round(statistics.mean(d), 4)} for f, d in invoked.items() if d
        },
    }


def run() -> dict[str, Any]:
    probe = Probe()
    with stack(probe) as (dev, cfg):
        latency = _latency(cfg, probe)
        burst = _burst(cfg, dev, probe)
    return {"latency": latency, "burst": burst}


# --- cost ----------------------------------------------------------------------------------------
# Public prices, us-east-1, on-demand, after the free tiers (checked 2026-11):
# Lambda (https://aws.amazon.com/lambda/pricing/): x86, $0.0000166667 per GB-second, $0.20 per 1M requests.
# SQS (https://aws.amazon.com/sqs/pricing/): standard queue, $0.40 per 1M requests (64 KB chunks).
# DynamoDB on-demand (https://aws.amazon.com/dynamodb/pricing/on-demand/): $0.625 per 1M write request
#   units, $0.125 per 1M read request units; a transactional write is two units per item.
# S3 Standard (https://aws.amazon.com/s3/pricing/): $0.005 per 1,000 PUT/COPY/POST/LIST, $0.0004 per
#   1,000 GET; DELETE free.
# SES (https://aws.amazon.com/ses/pricing/): $0.10 per 1,000 emails sent; receiving $0.10 per 1,000
#   emails plus $0.09 per 1,000 incoming 256 KB chunks (the same for both designs).
LAMBDA_GB_S, LAMBDA_REQUEST = 0.0000166667, 0.20 / 1e6
SQS_REQUEST = 0.40 / 1e6
DDB_WRITE, DDB_READ = 0.625 / 1e6, 0.125 / 1e6
S3_PUT, S3_GET = 0.005 / 1000, 0.0004 / 1000
SES_SEND, SES_RECEIVE = 0.10 / 1000, (0.10 + 0.09) / 1000
# Units per call (a small item: one unit). A first contact's TransactWriteItems holds five items (the
# record, the hour's ack budget, the sender-list checks of the address and its two domains), two units each.
UNIT_PRICE = {
    "SQS": SQS_REQUEST,
    "DynamoDB.PutItem": DDB_WRITE,
    "DynamoDB.UpdateItem": DDB_WRITE,
    "DynamoDB.DeleteItem": DDB_WRITE,
    "DynamoDB.TransactWriteItems": 2 * 5 * DDB_WRITE,
    "DynamoDB.GetItem": DDB_READ,
    "DynamoDB.BatchGetItem": DDB_READ,
    "DynamoDB.Query": DDB_READ,
    "S3.PutObject": S3_PUT,
    "S3.CopyObject": S3_PUT,
    "S3.GetObject": S3_GET,
    "S3.HeadObject": S3_GET,
    "S3.DeleteObject": 0.0,
    "SESv2.SendEmail": SES_SEND,
    "SES.SendRawEmail": SES_SEND,
}


def _call_cost(by_operation: dict[str, float]) -> float:
    total = 0.0
    for op, per in by_operation.items():
        price = UNIT_PRICE.get(op, UNIT_PRICE.get(op.split(".")[0], 0.0))
        total += per * price
    return total


def cost_per_1000_mails(flow: dict[str, Any], calls: dict[str, Any]) -> dict[str, Any]:
    """A first contact's cost on AWS: its calls (bench/cost.py, per mail and per send), the invocations
    and their durations measured in the burst (per mail), SES receiving; against a plain SES forwarder
    (one 128 MB Lambda invocation as long as inbound-handler's mean, one S3 GetObject, one SendRawEmail).
    """
    burst = flow["burst"]
    mails = burst["mails"]
    lambda_usd = 0.0
    for fn, inv in burst["invocations"].items():
        gb = BY_NAME[fn].memory_mb / 1024
        lambda_usd += inv["count"] * (LAMBDA_REQUEST + inv["mean_s"] * gb * LAMBDA_GB_S)
    sends_per_mail = (burst["forwarded"] + burst["acks"]) / mails  # forwards, and the acks the budget allowed
    ours = (
        lambda_usd / mails
        + _call_cost(calls["inbound"]["by_operation"])
        + sends_per_mail * _call_cost(calls["senders"]["by_operation"])
        + SES_RECEIVE
    )
    inbound_s = burst["invocations"].get("inbound-handler", {}).get("mean_s", 0.0)
    plain = LAMBDA_REQUEST + inbound_s * (128 / 1024) * LAMBDA_GB_S + S3_GET + SES_SEND + SES_RECEIVE
    return {
        "per_1000_mails_usd": round(ours * 1000, 4),
        "plain_forwarder_per_1000_mails_usd": round(plain * 1000, 4),
        "lambda_per_1000_mails_usd": round(lambda_usd / mails * 1000, 4),
    }


def table(r: dict[str, Any]) -> str:
    lat, b = r["latency"], r["burst"]
    return "\n".join(
        [
            f"receipt -> forward accepted by SES ({lat['mails']} mails at {lat['rate_per_s']}/s): "
            f"p50 {lat['receipt_to_forward']['p50_s']} s, p95 {lat['receipt_to_forward']['p95_s']} s"
            f" (target p95 <= {lat['target_p95_s']} s)",
            f"owner's reply -> SES: p50 {lat['reply_to_send']['p50_s']} s,"
            f" p95 {lat['reply_to_send']['p95_s']} s",
            f"burst: {b['mails']} first contacts in {b['delivered_in_s']} s at account concurrency "
            f"{b['account_concurrency']} (peak {b['peak_concurrency']}, {b['throttles']} throttled): "
            f"{b['forwarded']} forwarded, {b['lost']} lost, {b['duplicates']} duplicates,"
            f" {b['dlq']} in DLQs; "
            f"last forward after {b['minutes_to_last_forward']} min (target <= {b['target_minutes']})",
            f"  bottleneck: {b['bottleneck']}",
        ]
    )
