"""Sender throughput, latency and rate accuracy on the emulator, against baselines in the same run.

* ceiling: bare SendRawEmail calls from 4 threads: the most sends/s this emulator accepts at all;
* floor: the three requests exactly-once needs per send, made as the sender makes them and nothing
  else: powertools' idempotency wrapper (its conditional PutItem, then its completion UpdateItem with
  the send record, common/senders/idempotency.py) around a bare SendEmail, from the same 4 threads.
  No sender can beat it, whatever the emulator's speed for each kind of request; an earlier floor,
  the ceiling divided by three, priced a DynamoDB write as an SES call and moved with the emulator's
  mix (0.44 and 0.85 of it in two runs of the same code);
* throughput: a backlog drained by 4 sender workers through the full path (SQS -> idempotency ->
  suppression -> rate limiter -> MIME -> SES -> completion with the send record), sends/s, and
  ``full_vs_floor``: that as a fraction of the floor (target >= 0.9): what the rest of the path
  (the queue, the batch, the suppression read, the pacing, the MIME) costs. What a send costs in calls
  and CPU is bench/cost.py's;
* latency (target p95 < 2 s): enqueue -> SES accepted, p50/p95, with messages arriving at half the measured
  throughput (a system that is keeping up; a backlog would measure queueing instead);
* rate: a configured MAX_SEND_RATE below what the pipeline can do, against the achieved rate and
  the busiest one-second window of SES calls (target 95-100 %, never above).

The emulator is moto in its own process (the embedded emulator of `email-handler dev`, without
sharing the benchmark's GIL).
"""

from __future__ import annotations

import logging
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from common.aws import client, ses
from common.mail.outbound import OutboundMessage
from local.env import local_env
from tests.support.sendload import (
    Faults,
    emulator_process,
    enqueue_copies,
    patch_ses,
    queue_empty,
    run_workers,
)

N_BASELINE = 400
N_FULL = 400
N_LATENCY = 120
N_RATE = 100
WORKERS = 4


def _messages(prefix: str, n: int) -> list[OutboundMessage]:
    return [
        OutboundMessage(
            kind="ack",
            idempotency_key=f"ack:{prefix}{i}",
            correlation_id=f"ack-{prefix}{i}",
            to=[f"user{i}@corp.example"],
            subject=f"bench {i}",
            text="Thanks for your message.\n",
        )
        for i in range(n)
    ]


def _in_threads(n: int, one: Callable[[int], object]) -> float:
    """``one(i)`` for i in 0..n-1 from WORKERS threads; calls per second."""
    counter = iter(range(n))
    lock = threading.Lock()

    def worker() -> None:
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                return
            one(i)

    started = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(WORKERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return n / (time.perf_counter() - started)


_RAW = b"From: hello@example.com\r\nTo: a@corp.example\r\nSubject: x\r\n\r\nbody\r\n"


def _ceiling(cfg: Any) -> float:
    """Bare SendRawEmail calls per second: the emulator's ceiling."""
    return _in_threads(N_BASELINE, lambda i: ses.send_raw(_RAW, cfg.public_email, ["a@corp.example"]))


def _floor(cfg: Any) -> float:
    """Sends per second through the idempotency claim, SendEmail and the completion, and nothing else."""
    from common.senders.idempotency import send_exactly_once

    def bare(message: OutboundMessage, sender: object) -> dict[str, Any]:
        ses_id = ses.send_raw(_RAW, cfg.public_email, ["a@corp.example"])
        return {"correlationId": message.correlation_id, "sesMessageId": ses_id}

    once = send_exactly_once(cfg, bare)
    messages = _messages("floor", N_BASELINE)
    return _in_threads(N_BASELINE, lambda i: once(message=messages[i], sender=None))


def _drain(cfg: Any, prefix: str, n: int) -> dict[str, Any]:
    """Enqueue a backlog of ``n`` and let the workers drain it; sends/s and the SES call times."""
    faults = Faults()
    undo = patch_ses(faults)
    slots = SlotRecorder()
    try:
        feeder, _ = enqueue_copies(cfg, _messages(prefix, n), copies=1, max_depth=60)
        started, cpu = time.time(), time.process_time()
        run_workers(
            cfg,
            workers=WORKERS,
            visibility_s=60,
            timeout_s=180,
            done=queue_empty(cfg, feeder),
            deadline_s=600,
        )
        cpu = time.process_time() - cpu
    finally:
        undo()
        slots.close()
    accepted = [v[0] for v in faults.accepted_at.values()]
    calls = sorted(faults.called_at)
    return {
        "messages": n,
        "sent": len(accepted),
        "sends_per_s": round(len(accepted) / (max(accepted) - started), 1),
        # The senders' own CPU (this process; the emulator runs in another): what a send costs the code.
        "sender_cpu_ms_per_send": round(cpu * 1000 / len(accepted), 1),
        "achieved_rate": round(_rate(calls), 2),
        # The mechanism: the rate slots the workers claimed (never more than the rate in a second) ...
        "max_slots_in_any_second": _busiest(sorted(slots.slots)),
        # ... and when the SES calls started: the same plus this one process's thread scheduling.
        "max_calls_in_any_second": _busiest(calls),
    }


def _busiest(times: list[float]) -> int:
    return max((sum(1 for t in times if s <= t < s + 1.0) for s in times), default=0)


class SlotRecorder(logging.Handler):
    """Collects the ``rate_slot`` of every "mail sent" record the sender logs."""

    def __init__(self) -> None:
        super().__init__()
        self.slots: list[float] = []
        self.logger = logging.getLogger("sender")
        self.logger.addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        slot = getattr(record, "rate_slot", None)
        if slot is not None:
            self.slots.append(float(slot))

    def close(self) -> None:
        self.logger.removeHandler(self)
        super().close()


def _rate(times: list[float]) -> float:
    """Sends per second as the least-squares slope of call number over time (robust to edge jitter)."""
    n = len(times)
    mean_i, mean_t = (n - 1) / 2, sum(times) / n
    spacing = sum((i - mean_i) * (t - mean_t) for i, t in enumerate(times)) / sum(
        (i - mean_i) ** 2 for i in range(n)
    )
    return 1 / spacing


def _latency(cfg: Any, prefix: str, n: int, arrivals_per_s: float) -> dict[str, Any]:
    """Messages arrive one at a time at ``arrivals_per_s``; enqueue -> SES accepted per message."""
    faults = Faults()
    undo = patch_ses(faults)
    sqs = client("sqs")
    url = sqs.get_queue_url(QueueName=cfg.send_queue)["QueueUrl"]
    enqueued: dict[str, float] = {}

    def feed() -> None:
        for m in _messages(prefix, n):
            enqueued[m.correlation_id] = time.time()
            sqs.send_message(QueueUrl=url, MessageBody=m.to_json())
            time.sleep(1 / arrivals_per_s)

    feeder = threading.Thread(target=feed, daemon=True)
    try:
        feeder.start()
        run_workers(
            cfg,
            workers=WORKERS,
            visibility_s=60,
            timeout_s=180,
            done=queue_empty(cfg, feeder),
            deadline_s=600,
        )
    finally:
        undo()
    latencies = sorted(v[0] - enqueued[k] for k, v in faults.accepted_at.items())
    return {
        "messages": n,
        "arrivals_per_s": round(arrivals_per_s, 1),
        "p50_s": round(statistics.median(latencies), 3),
        "p95_s": round(latencies[int(0.95 * (len(latencies) - 1))], 3),
    }


def run() -> dict[str, Any]:
    with emulator_process(local_env()) as base:
        cfg = replace(base, send_queue=base.ack_queue, function="ack-sender", max_send_rate=100000.0)
        baseline = _ceiling(cfg)
        floor = _floor(cfg)
        full = _drain(cfg, "full", N_FULL)
        latency = _latency(cfg, "lat", N_LATENCY, full["sends_per_s"] / 2)
        # An integer like SES's MaxSendRate (14/s in production, if the emulator can carry it).
        configured = float(max(1, int(min(14.0, full["sends_per_s"] * 0.6))))
        rate = _drain(replace(cfg, max_send_rate=configured), "rate", N_RATE)
    return {
        "baseline_raw_sends_per_s": round(baseline, 1),
        "full": full,
        "full_vs_baseline": round(full["sends_per_s"] / baseline, 2),
        # the three requests a send needs, each at its own time: calls per send x time per call
        "floor_sends_per_s": round(floor, 1),
        "full_vs_floor": round(full["sends_per_s"] / floor, 2),
        "latency": latency,
        "rate": {
            "configured": configured,
            **rate,
            "achieved_ratio": round(rate["achieved_rate"] / configured, 3),
        },
        "targets": {"p95_s": 2.0, "rate_ratio": [0.95, 1.0], "full_vs_floor": 0.9},
    }


def table(r: dict[str, Any]) -> str:
    f, lat, q = r["full"], r["latency"], r["rate"]
    latency_label = f"enqueue -> SES accepted at {lat['arrivals_per_s']} msg/s"
    p50 = f"p50 {lat['p50_s']} s"
    rate_label = f"rate limit {q['configured']}/s across 4 workers"
    return "\n".join(
        [
            f"{'ceiling: bare SendRawEmail, 4 threads':<50}{r['baseline_raw_sends_per_s']:>8} sends/s"
            "   (the emulator's ceiling)",
            f"{'floor: idempotency claim + SendEmail + completion':<50}{r['floor_sends_per_s']:>8} sends/s"
            "   (exactly once, nothing else)",
            f"{'full path: queue -> sender -> SES, 4 workers':<50}{f['sends_per_s']:>8} sends/s"
            f"   ({r['full_vs_floor']:.2f} of the three-request floor; target >= 0.9)",
            f"{'  sender CPU per send (emulator excluded)':<50}{f['sender_cpu_ms_per_send']:>8} ms",
            f"{latency_label:<50}{p50:>8}   p95 {lat['p95_s']} s (target < 2 s)",
            f"{rate_label:<50}{q['achieved_rate']:>8} sends/s"
            f"   ({q['achieved_ratio']:.1%} of configured;"
            f" busiest second: {q['max_slots_in_any_second']} slots,"
            f" {q['max_calls_in_any_second']} SES calls)",
        ]
    )
