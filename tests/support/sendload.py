"""In-process sender workers on a moto server: the chaos test and the send benchmark share them.

Each worker is one "Lambda instance": it polls the queue like an event-source mapping
(local.wiring.poll_queue_once: delete successes, leave failures to the visibility timeout
and the DLQ redrive) and runs the real sender logic with a Lambda-like context. A simulated crash
(a BaseException, like the process dying) skips every cleanup, exactly as a killed sandbox would.
"""

from __future__ import annotations

import contextlib
import contextvars
import random
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from common.aws import client, ses
from common.mail.outbound import OutboundMessage
from common.senders import handler as sender
from deploy.config import Config
from local.wiring import poll_queue_once

if TYPE_CHECKING:  # pragma: no cover
    from aws_lambda_powertools.utilities.typing import LambdaContext


class SimulatedCrash(BaseException):
    """The sandbox died: nothing after this point runs (not even powertools' cleanup)."""


@dataclass
class Context:
    timeout_s: float
    started: float = field(default_factory=time.time)
    aws_request_id: str = "local"
    function_name: str = "sender"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:sender"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.started + self.timeout_s - time.time()) * 1000))


@dataclass
class Faults:
    throttle: float = 0.0
    crash_before_send: float = 0.0
    crash_after_send: float = 0.0
    seed: int = 7
    after_send_keys: Counter[str] = field(default_factory=Counter)  # crash-after-send injections per key
    counts: dict[str, int] = field(
        default_factory=lambda: {"throttle": 0, "crash_before": 0, "crash_after": 0}
    )
    accepted_at: dict[str, list[float]] = field(default_factory=dict)  # when SES returned success
    called_at: list[float] = field(default_factory=list)  # when each accepted SendRawEmail call started
    lock: threading.Lock = field(default_factory=threading.Lock)

    def wrap(self, real: Callable[..., str]) -> Callable[..., str]:
        rng = random.Random(self.seed)

        def send_raw(raw: bytes, source: str, destinations: list[str], configuration_set: str = "") -> str:
            corr = re.search(rb"X-Correlation-ID: (\S+)", raw)
            key = corr.group(1).decode() if corr else "?"
            with self.lock:
                roll = rng.random()
                fault = (
                    "throttle"
                    if roll < self.throttle
                    else "crash_before"
                    if roll < self.throttle + self.crash_before_send
                    else ""
                )
                if fault:
                    self.counts[fault] += 1
            if fault == "throttle":
                from botocore.exceptions import ClientError

                raise ClientError({"Error": {"Code": "Throttling", "Message": "injected"}}, "SendRawEmail")
            if fault == "crash_before":
                raise SimulatedCrash("before send")
            called = time.time()
            message_id = real(raw, source, destinations, configuration_set)
            with self.lock:
                self.accepted_at.setdefault(key, []).append(time.time())
                self.called_at.append(called)
            if roll < self.throttle + self.crash_before_send + self.crash_after_send:
                with self.lock:
                    self.counts["crash_after"] += 1
                    self.after_send_keys[key] += 1
                raise SimulatedCrash("after send")
            return message_id

        return send_raw


def enqueue_copies(
    cfg: Config, messages: list[OutboundMessage], copies: int, seed: int = 11, max_depth: int = 0
) -> tuple[threading.Thread, dict[str, float]]:
    """Feed ``copies`` queue messages per message, shuffled, from a background thread.

    With ``max_depth`` the feeder keeps at most that many messages waiting: moto's ReceiveMessage
    scans the whole queue, so a 3,000-message backlog would measure moto, not the senders.
    Returns the thread and the first enqueue time per correlation id (filled as it goes).
    """
    bodies = [m for m in messages for _ in range(copies)]
    random.Random(seed).shuffle(bodies)
    sqs = client("sqs")
    url = sqs.get_queue_url(QueueName=cfg.send_queue)["QueueUrl"]
    enqueued: dict[str, float] = {}

    def depth() -> int:
        a = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])[
            "Attributes"
        ]
        return int(a["ApproximateNumberOfMessages"])

    def feed() -> None:
        for start in range(0, len(bodies), 10):
            while max_depth and depth() >= max_depth:
                time.sleep(0.25)  # each depth read makes moto count the whole queue
            chunk = bodies[start : start + 10]
            now = time.time()
            for m in chunk:
                enqueued.setdefault(m.correlation_id, now)
            sqs.send_message_batch(
                QueueUrl=url,
                Entries=[{"Id": str(i), "MessageBody": m.to_json()} for i, m in enumerate(chunk)],
            )

    thread = threading.Thread(target=feed, daemon=True)
    thread.start()
    return thread, enqueued


def run_workers(
    cfg: Config,
    workers: int,
    visibility_s: int,
    timeout_s: float,
    done: Callable[[], bool],
    deadline_s: float = 600.0,
    batch_size: int = 10,
) -> dict[str, int]:
    arn = f"arn:aws:sqs:{cfg.region}:123456789012:{cfg.send_queue}"
    stats = {"batches": 0, "crashed_batches": 0}
    stop = threading.Event()

    def invoke(event: dict[str, Any]) -> Any:
        try:
            return sender.handle(cfg, event, cast("LambdaContext", Context(timeout_s)))
        except SimulatedCrash:
            stats["crashed_batches"] += 1  # one worker thread per counter update: the GIL keeps it whole
            raise RuntimeError("sandbox crashed") from None

    def worker() -> None:
        while not stop.is_set():
            # Long polling, as an event-source mapping does: an idle worker answers within moments.
            result = poll_queue_once(
                cfg.send_queue,
                arn,
                invoke,
                batch_size=batch_size,
                wait_s=1,
                visibility_s=visibility_s,
                region=cfg.region,
            )
            stats["batches"] += 1 if result.received else 0

    # Each in a copy of the caller's context, as asyncio.to_thread does: a benchmark counting the calls
    # made in its context (tests.support.awscalls) counts the workers' too.
    threads = [
        threading.Thread(
            target=contextvars.copy_context().run, args=(worker,), daemon=True, name=f"sender-worker-{i}"
        )
        for i in range(workers)
    ]
    for t in threads:
        t.start()
    end = time.monotonic() + deadline_s
    while not done() and time.monotonic() < end:
        time.sleep(0.5)
    stop.set()
    for t in threads:
        t.join(30)
    return stats


def queue_empty(cfg: Config, feeder: threading.Thread | None = None) -> Callable[[], bool]:
    sqs = client("sqs")
    url = sqs.get_queue_url(QueueName=cfg.send_queue)["QueueUrl"]

    def check() -> bool:
        if feeder is not None and feeder.is_alive():
            return False
        a = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["All"])["Attributes"]
        return int(a["ApproximateNumberOfMessages"]) + int(a["ApproximateNumberOfMessagesNotVisible"]) == 0

    return check


@contextlib.contextmanager
def emulator_process(env: dict[str, str]) -> Iterator[Config]:
    """A provisioned stack on a moto server in its own process; AWS_ENDPOINT_URL points at it meanwhile."""
    from deploy import config
    from local import provision
    from local.emulator import MotoProcess
    from local.env import aws_endpoint
    from local.rie import free_port

    server = MotoProcess(free_port()).start()
    try:
        with aws_endpoint(server.url, env):
            cfg = config.load(env)
            provision.provision(cfg)
            yield cfg
    finally:
        server.stop()


def patch_ses(faults: Faults) -> Callable[[], None]:
    real = ses.send_raw
    ses.send_raw = faults.wrap(real)

    def undo() -> None:
        ses.send_raw = real

    return undo
