"""Chaos: 1,000 messages, each delivered 3 times in random order to 4 concurrent sender workers,
with injected throttling and crashes. Every message must end sent exactly once or in the DLQ;
the only duplicates allowed are the injected crash-after-send window, and they are counted."""

from __future__ import annotations

import json
import os
from dataclasses import replace

import pytest

from common.aws import sqs
from common.mail.outbound import OutboundMessage
from deploy.config import Config
from tests.support.sendload import (
    Faults,
    emulator_process,
    enqueue_copies,
    patch_ses,
    queue_empty,
    run_workers,
)

N = int(os.environ.get("CHAOS_MESSAGES", "1000"))


@pytest.mark.timeout(900)
def test_chaos_exactly_once_or_dlq(
    local_defaults: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    with emulator_process(local_defaults) as base:
        run_chaos(
            replace(
                base,
                send_queue=base.ack_queue,
                retry_delays=(0.0, 0.05, 0.1),
                attempt_reserve_s=0.5,
                max_send_rate=5000.0,
            ),
            capsys,
        )


def run_chaos(cfg: Config, capsys: pytest.CaptureFixture[str]) -> None:
    messages = [
        OutboundMessage(
            kind="ack",
            idempotency_key=f"ack:chaos{n}",
            correlation_id=f"ack-chaos{n}",
            to=[f"user{n}@corp.example"],
            subject=f"m{n}",
            text="x",
        )
        for n in range(N)
    ]
    faults = Faults(throttle=0.05, crash_before_send=0.01, crash_after_send=0.005)
    undo = patch_ses(faults)
    try:
        feeder, _ = enqueue_copies(cfg, messages, copies=3, max_depth=60)
        # 5 s: both the visibility timeout and the in-progress window of a crashed sandbox.
        stats = run_workers(
            cfg, workers=4, visibility_s=5, timeout_s=5, done=queue_empty(cfg, feeder), deadline_s=780
        )
    finally:
        undo()
    assert queue_empty(cfg)(), "messages left in the queue"
    sends = {k: len(v) for k, v in faults.accepted_at.items()}  # SendRawEmail calls SES accepted
    dead: set[str] = set()
    while batch := sqs.receive(cfg.send_queue + "-dlq", max_messages=10, wait_s=0, visibility_s=300):
        dead |= {json.loads(m["Body"])["correlation_id"] for m in batch}
    duplicates = {k: c for k, c in sends.items() if c > 1}
    unexplained = {k for k in duplicates if k not in faults.after_send_keys}
    lost = {
        m.correlation_id for m in messages if m.correlation_id not in sends and m.correlation_id not in dead
    }
    with capsys.disabled():
        print(
            f"\n[chaos] {N} messages x3: sent={len(sends)} dlq={len(dead)} duplicates={len(duplicates)} "
            f"(crash-after-send injected {faults.counts['crash_after']}) faults={faults.counts} "
            f"workers={stats}"
        )
    assert not lost, f"{len(lost)} messages neither sent nor in the DLQ"
    assert not unexplained, f"duplicates outside the crash-after-send window: {sorted(unexplained)[:5]}"
    # Each injected crash-after-send can cause at most one extra send of its key.
    assert all(c <= 1 + faults.after_send_keys[k] for k, c in sends.items())
    assert faults.counts["throttle"] and faults.counts["crash_before"] and faults.counts["crash_after"]
