"""The reply corpus (tests/fixtures/replies/) on the embedded stack: each public fixture is the owner's
answer to a real thread, through reply-handler and reply-sender under the real RIE; what the contact
received is compared with the visible reply the fixture's source states, and the four counts are
printed (exact, leaked, partly lost, lost; "acceptable" is exact plus the owner's signature). No loss
is silent: a fixture not sent, or sent with a line of the owner's missing, has a notice to the owner."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from common.mail.outbound import OutboundMessage
from common.store.sendqueue import load
from local.rie import RieProcess
from tests.support import replycorpus
from tests.support.harness import Stack
from tests.support.mailgen import mail


@pytest.fixture(scope="module")
def fns(rie_module: Callable[..., RieProcess]) -> dict[str, RieProcess]:
    return {
        name: rie_module(name, env={"RETRY_DELAYS_SECONDS": "0"})
        for name in ("inbound-handler", "reply-handler", "reply-sender")
    }


def drain(stack: Stack, queue: str) -> list[OutboundMessage]:
    """Every message on ``queue`` (a peek sees only a few dozen): each received once, kept invisible."""
    out = []
    while batch := stack.receive(queue, visibility_s=600):
        out += [load(m["Body"], stack.cfg.bucket) for m in batch]
    return out


def test_the_reply_corpus_reaches_the_contact_without_quotes_or_losses(
    stack: Stack, fns: dict[str, RieProcess], capsys: pytest.CaptureFixture[str]
) -> None:
    fns["inbound-handler"].invoke(
        stack.receipt(
            mail(subject="Role", text=replycorpus.CONTACT_TEXT, message_id="<jane-1@corp.example>"),
            "0000000000000000000000000000000000000c01",
        )
    )
    [fwd] = stack.peek(stack.cfg.forward_queue)
    fixtures = replycorpus.load()
    statuses = {}
    for n, fx in enumerate(fixtures):
        raw = replycorpus.reply_mail(
            fx, replycorpus.OWNER, fwd.reply_to, replycorpus.subject_of(n), f"<corpus-{n}@example.net>"
        )
        result = fns["reply-handler"].invoke(
            stack.receipt(raw, f"{n:040d}", to=fwd.reply_to, source="owner@example.net")
        )
        statuses[fx.name] = result["status"]
    stack.run_sender(fns["reply-sender"], stack.cfg.reply_queue, max_batches=100)
    received = {}
    for sent in stack.sent():
        n, text = replycorpus.sent_text(sent.raw)
        assert sent.destinations == ["jane@corp.example"] and n is not None
        received[n] = text
    outcomes = replycorpus.outcomes(fixtures, received)
    # No silent loss: every fixture that was not sent, or reached the contact with a line of the
    # owner's missing, told the owner (a notice on the forward queue, keyed by the reply's message id).
    notices = [m for m in drain(stack, stack.cfg.forward_queue) if m.kind == "notice"]
    noticed = {m.idempotency_key.rsplit(":", 1)[-1] for m in notices}
    silent = [
        fx.name
        for n, fx in enumerate(fixtures)
        if (statuses[fx.name] != "queued" or outcomes[fx.name] in ("partly lost", "lost"))
        and f"{n:040d}" not in noticed
    ]
    assert silent == [], silent
    counts = replycorpus.tally(outcomes)
    with capsys.disabled():
        print("\n" + replycorpus.report(outcomes) + f"\n  notices      {len(noticed)}")
    assert counts["lost"] == 0 and counts["partly lost"] <= 2 and counts["leaked"] <= 2, counts
    assert counts["exact"] + counts["acceptable"] >= len(fixtures) - 4, counts
    assert len(fixtures) >= 180 and {f.name.split("/")[0] for f in fixtures} == set(replycorpus.SOURCES)
