"""What a mail costs on AWS: API calls per inbound mail and per send, and the senders' CPU per send.

On the embedded stack (moto in its own process, every resource provisioned): ``N`` first-contact
mails go through inbound-handler's logic in this process, each staged in S3 first as SES's S3
action would (not counted). The forwards they enqueue are then drained by two sender workers, as
the forward-sender's event-source mapping would (maximum concurrency 2, batches of up to 10), at
the configured ``MAX_SEND_RATE`` (14/s by default). Each part starts as a cold sandbox (no cached
client, queue URL or keyword list), so its one-off lookups are spread over the ``N`` mails as
they would be over a warm sandbox's life.

Calls are counted at the boto3 client (tests.support.awscalls), so every call counts, whichever
module made it; the event-source mapping's ReceiveMessage and DeleteMessageBatch are counted per
send as well (on AWS Lambda makes them, and they are billed), an idle poll is not.

The floors: a first-contact mail must be read, archived and deleted (S3 GetObject, PutObject,
DeleteObject), recorded (one DynamoDB write) and produce two queue messages: 6 calls. A send must
start its idempotency record, call SES and complete the record (3), plus its share of the queue's
receive and delete.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

from local.env import local_env
from tests.support import mailgen
from tests.support.awscalls import IDLE_POLL, CallCounter
from tests.support.sendload import Faults, emulator_process, patch_ses, run_workers

if TYPE_CHECKING:  # pragma: no cover
    from aws_lambda_powertools.utilities.typing import LambdaContext

N = 40
INBOUND_FLOOR = 6
SEND_FLOOR = 3  # + the queue's receive and delete per send, measured
TARGET_CALLS_PER_SEND = 4.0
# At 512 MB a sender has about 0.29 vCPU (Lambda gives 1 vCPU at 1,769 MB), so 30 ms of one core is
# ~100 ms of its time per send: two instances (the event sources' maximum concurrency) then keep up
# with SES's default 14 sends/s.
TARGET_CPU_MS_PER_SEND = 30.0


def _cold_sandbox() -> None:
    """Forget what a warm sandbox would have cached, so its first-use lookups are counted."""
    from common.aws import reset_clients, sts
    from common.inbound import policy
    from common.senders import handler as sender
    from tests.support.harness import ACCOUNT

    reset_clients()
    sts.use_account(ACCOUNT)  # as make_handler does with the ACCOUNT_ID the deploy sets: no STS call
    policy.RULES.clear()
    for cached in (sender._idempotent, sender._limiter):
        cached.cache_clear()


def _inbound(cfg: Any, prefix: str) -> dict[str, Any]:
    from common.aws import s3
    from common.inbound.handler import handle
    from local import events
    from tests.support.harness import ACCOUNT
    from tests.support.sendload import Context

    mails = [
        mailgen.mail(
            sender=f"Contact {i} <contact{i}@corp{i}.example>",
            to=cfg.public_email,
            subject=f"Role {i}",
            text=f"Hello, I would like to talk about role {i}.\n",
        )
        for i in range(N)
    ]
    staged = []
    for i, raw in enumerate(mails):  # SES's S3 action: not the function's cost
        mid = f"{prefix}{i:04d}"
        s3.put(cfg.bucket, f"staging/{mid}", raw, "message/rfc822")
        staged.append(
            events.receipt_event(
                raw,
                mid,
                [cfg.public_email],
                function_arn=f"arn:aws:lambda:{cfg.region}:{ACCOUNT}:function:inbound",
            )
        )
    _cold_sandbox()
    outcomes = []
    with CallCounter() as calls, calls.track():
        for event in staged:
            outcomes.append(handle(cfg, event, cast("LambdaContext", Context(60))).get("status"))
    assert outcomes.count(outcomes[0]) == N, outcomes
    return {
        "mails": N,
        "outcome": outcomes[0],
        "aws_calls_per_mail": round(calls.total() / N, 2),
        "floor": INBOUND_FLOOR,
        "by_operation": calls.per(N),
    }


def _sends(cfg: Any) -> dict[str, Any]:
    faults = Faults()
    _cold_sandbox()
    undo = patch_ses(faults)
    try:
        with CallCounter() as calls, calls.track():  # the workers (and their record threads) only
            started, cpu = time.monotonic(), time.process_time()
            stats = run_workers(
                cfg,
                workers=2,
                visibility_s=60,
                timeout_s=180,
                done=lambda: len(faults.accepted_at) >= N,
                deadline_s=300,
            )
            cpu, wall = time.process_time() - cpu, time.monotonic() - started
    finally:
        undo()
    sent = len(faults.accepted_at)
    assert sent == N and all(len(v) == 1 for v in faults.accepted_at.values()), f"{sent} of {N} sent"
    queue = calls.calls["SQS.ReceiveMessage"] + calls.calls["SQS.DeleteMessageBatch"]
    return {
        "sends": N,
        "max_send_rate": cfg.max_send_rate,
        "batches": stats["batches"],
        "aws_calls_per_send": round(calls.total() / N, 2),
        "floor": round(SEND_FLOOR + queue / N, 2),
        "by_operation": calls.per(N),
        "idle_polls": calls.calls[IDLE_POLL],
        # This process's CPU while two workers drained the queue (the emulator runs in another).
        "sender_cpu_ms_per_send": round(cpu * 1000 / N, 1),
        "seconds": round(wall, 1),
    }


def run() -> dict[str, Any]:
    with emulator_process(local_env()) as base:
        inbound = _inbound(base, "cost")
        senders = _sends(replace(base, send_queue=base.forward_queue, function="forward-sender"))
    return {
        "inbound": inbound,
        "senders": senders,
        "targets": {
            "aws_calls_per_send": TARGET_CALLS_PER_SEND,
            "sender_cpu_ms_per_send": TARGET_CPU_MS_PER_SEND,
        },
    }


def _ops(by_operation: dict[str, float]) -> str:
    return ", ".join(f"{name} {n:g}" for name, n in by_operation.items())


def table(r: dict[str, Any]) -> str:
    i, s = r["inbound"], r["senders"]
    inbound_label = f"inbound-handler, first contact ({i['mails']} mails)"
    sender_label = f"forward-sender, 2 workers at {s['max_send_rate']:g}/s ({s['sends']} sends)"
    target = r["targets"]["aws_calls_per_send"]
    return "\n".join(
        [
            f"{inbound_label:<50}{i['aws_calls_per_mail']:>6} calls/mail   (floor {i['floor']})",
            f"    {_ops(i['by_operation'])}",
            f"{sender_label:<50}{s['aws_calls_per_send']:>6} calls/send"
            f"   (floor {s['floor']}; target <= {target:g})",
            f"    {_ops(s['by_operation'])}",
            f"{'  sender CPU per send (emulator excluded)':<50}{s['sender_cpu_ms_per_send']:>6} ms"
            f"         (target <= {r['targets']['sender_cpu_ms_per_send']:g})",
        ]
    )
