"""The reply corpus (tests/fixtures/replies/) through reply-handler on the embedded stack: each public
fixture as the owner's answer to a real thread, and what would reach the contact (the reply queue's
text, which reply-sender sends as it is) against the visible reply the fixture's source states.

The same fixtures and the same counting as tests/integration/test_reply_corpus.py
(tests.support.replycorpus): exact, acceptable (exact plus the owner's signature), leaked (a quoted
line reached the contact), partly lost, lost. Both handlers run in this process on a moto server in
its own process (bench.cost's arrangement); the integration suite runs them under the RIE.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from local.env import local_env
from tests.support import replycorpus
from tests.support.mailgen import mail
from tests.support.sendload import Context, emulator_process

if TYPE_CHECKING:  # pragma: no cover
    from aws_lambda_powertools.utilities.typing import LambdaContext


def _event(cfg: Any, raw: bytes, mid: str, to: str, source: str) -> dict[str, Any]:
    from common.aws import s3
    from local import events

    s3.put(cfg.bucket, f"staging/{mid}", raw, "message/rfc822")
    return events.receipt_event(raw, mid, [to], source=source)


def _drain(cfg: Any, queue: str) -> list[Any]:
    from common.aws import sqs
    from common.store.sendqueue import load

    out = []
    while batch := sqs.receive(queue, max_messages=10, wait_s=0, visibility_s=600):
        out += [load(m["Body"], cfg.bucket) for m in batch]
    return out


def run() -> dict[str, Any]:
    from common.inbound.handler import handle as inbound
    from common.reply.handler import handle as reply

    fixtures = replycorpus.load()
    ctx = cast("LambdaContext", Context(60))
    with emulator_process(local_env()) as cfg:
        contact = mail(subject="Role", text=replycorpus.CONTACT_TEXT, message_id="<jane-1@corp.example>")
        inbound(cfg, _event(cfg, contact, "c" * 40, cfg.public_email, "jane@corp.example"), ctx)
        [fwd] = [m for m in _drain(cfg, cfg.forward_queue) if m.kind == "forward"]
        for n, fx in enumerate(fixtures):
            raw = replycorpus.reply_mail(
                fx, replycorpus.OWNER, fwd.reply_to, replycorpus.subject_of(n), f"<corpus-{n}@example.net>"
            )
            reply(cfg, _event(cfg, raw, f"{n:040d}", fwd.reply_to, "owner@example.net"), ctx)
        received: dict[int, str] = {}
        for message in _drain(cfg, cfg.reply_queue):
            number = replycorpus.number_in(message.subject)
            if number is not None:
                received[number] = message.text
        noticed = {
            m.idempotency_key.rsplit(":", 1)[-1] for m in _drain(cfg, cfg.forward_queue) if m.kind == "notice"
        }
    outcomes = replycorpus.outcomes(fixtures, received)
    silent = [
        fx.name
        for n, fx in enumerate(fixtures)
        if outcomes[fx.name] in ("partly lost", "lost") and f"{n:040d}" not in noticed
    ]
    return {
        "fixtures": len(fixtures),
        "sources": list(replycorpus.SOURCES),
        "counts": replycorpus.tally(outcomes),
        "notices": len(noticed),
        "silent_losses": silent,
        "not_exact": {k: v for k, v in sorted(outcomes.items()) if v not in ("exact", "acceptable")},
    }


def table(r: dict[str, Any]) -> str:
    counts = r["counts"]
    lines = [
        f"{r['fixtures']} public reply fixtures ({', '.join(r['sources'])}), {r['notices']} notices to the "
        f"owner, {len(r['silent_losses'])} silent losses"
    ]
    lines += [f"  {name:<12}{counts[name]:>5}" for name in replycorpus.OUTCOMES]
    lines += [f"  {outcome}: {name}" for name, outcome in r["not_exact"].items()]
    return "\n".join(lines)


if __name__ == "__main__":  # python -m bench.replies: this section alone, without results.json
    print(table(run()))
