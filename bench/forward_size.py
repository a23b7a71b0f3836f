"""SESv2's 40 MB in practice: a mail with one large attachment through inbound-handler, and the forward
it queues through forward-sender, both under the real RIE against moto in its own process. Per
case: the mail's size, each function's wall time and peak RSS (Linux VmHWM, reset before each
invocation), and the size of what SES was asked to send (whole, or shortened above the limit).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from deploy.functions import BY_NAME
from local.env import local_env
from local.rie import RieProcess, free_port
from tests.support import caps
from tests.support.mailgen import mail

MIB = 1024 * 1024
# attachment MiB: over SESv1's 10 MB once encoded; a forward near SESv2's 40 MB; a mail at SES's
# 40 MB receiving limit, whose forward cannot carry the attachment
CASES = (
    ("attachment 12 MiB (over SESv1's limit)", 12.0),
    ("attachment 26 MiB (forward near 40 MB)", 26.0),
    ("attachment 28.3 MiB (40 MB mail; forward shortened)", 28.3),
)


def run() -> dict[str, Any]:
    from common.aws import client
    from deploy import resources
    from local import events, outbox
    from local.wiring import poll_queue_once
    from tests.support.sendload import emulator_process

    if not caps.can_measure():
        return {"skipped": "peak RSS is read from Linux /proc"}
    env = local_env()
    with emulator_process(env) as cfg, tempfile.TemporaryDirectory() as tmp:
        endpoint = os.environ["AWS_ENDPOINT_URL"]
        fn_env = {**env, "AWS_ENDPOINT_URL": endpoint, "RETRY_DELAYS_SECONDS": "0"}
        inbound = RieProcess("inbound-handler", free_port(), fn_env, Path(tmp) / "inbound.log").start()
        sender = RieProcess("forward-sender", free_port(), fn_env, Path(tmp) / "sender.log").start()
        rows = []
        measured: list[caps.Measured] = []

        def send(event: dict[str, Any]) -> Any:
            measured.append(caps.measure(sender, event))
            return measured[-1].result

        def deliver(raw: bytes, mid: str) -> dict[str, Any]:
            client("s3").put_object(Bucket=cfg.bucket, Key=f"staging/{mid}", Body=raw)
            return events.receipt_event(raw, mid, [cfg.public_email])

        def one(raw: bytes, mid: str) -> tuple[caps.Measured, caps.Measured, dict[str, Any]]:
            received = caps.measure(inbound, deliver(raw, mid))
            poll_queue_once(
                cfg.forward_queue, resources.queue_arn(cfg, cfg.forward_queue), send, region=cfg.region
            )
            return received, measured[-1], outbox.from_moto(endpoint)[-1]

        try:  # warm up: each runtime process starts with its function's first invocation
            inbound.invoke(deliver(mail(), "warm" + "0" * 36))
            poll_queue_once(
                cfg.forward_queue,
                resources.queue_arn(cfg, cfg.forward_queue),
                sender.invoke,
                region=cfg.region,
            )
            for n, (name, mib) in enumerate(CASES):
                raw = mail(attachments=[("scan.pdf", os.urandom(int(mib * MIB)), "application/pdf")])
                received, forwarded, sent = one(raw, f"size{n:02d}" + "0" * 34)
                rows.append(
                    {
                        "case": name,
                        "mail_mb": round(len(raw) / 1e6, 1),
                        "inbound_s": round(received.seconds, 2),
                        "inbound_peak_mb": round(received.peak_mb),
                        "sender_s": round(forwarded.seconds, 2),
                        "sender_peak_mb": round(forwarded.peak_mb),
                        "sent_mb": round(len(sent["raw"].encode()) / 1e6, 1),
                        "whole": "scan.pdf" in sent["raw"] and "too large to forward" not in sent["raw"],
                    }
                )
        finally:
            inbound.stop()
            sender.stop()
    return {
        "memory_mb": {f: BY_NAME[f].memory_mb for f in ("inbound-handler", "forward-sender")},
        "limit_bytes": 40_000_000,
        "cases": rows,
    }


def table(r: dict[str, Any]) -> str:
    if "skipped" in r:
        return f"skipped: {r['skipped']}"
    lines = [
        f"{'case':<52} {'mail':>6} {'inbound':>16} {'forward-sender':>18} {'sent':>7}  forward",
        "-" * 112,
    ]
    for row in r["cases"]:
        lines.append(
            f"{row['case']:<52} {row['mail_mb']:>5}M {row['inbound_s']:>6.2f}s {row['inbound_peak_mb']:>5}MB "
            f"{row['sender_s']:>8.2f}s {row['sender_peak_mb']:>5}MB {row['sent_mb']:>6}M  "
            f"{'whole' if row['whole'] else 'shortened'}"
        )
    memory = r["memory_mb"]
    lines.append(
        f"function memory: inbound-handler {memory['inbound-handler']} MB, forward-sender "
        f"{memory['forward-sender']} MB; SESv2 limit {r['limit_bytes']:,} bytes"
    )
    return "\n".join(lines)
