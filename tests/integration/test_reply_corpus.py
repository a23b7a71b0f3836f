"""The reply corpus (tests/fixtures/replies/) on the embedded stack: each public fixture is the owner's
answer to a real thread, through reply-handler and reply-sender under the real RIE; what the contact
received is compared with the visible reply the fixture's source states, and the four counts are
printed (exact, leaked, partly lost, lost; "acceptable" is exact plus the owner's signature)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

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
    # Every fixture either reached the contact or told the owner why not (a notice on the forward queue).
    notices = [m for m in stack.peek(stack.cfg.forward_queue) if m.kind == "notice"]
    not_sent = [name for name, s in statuses.items() if s not in ("queued",)]
    assert len(notices) >= len(not_sent), (not_sent, len(notices))
    counts = replycorpus.tally(outcomes)
    with capsys.disabled():
        print("\n" + replycorpus.report(outcomes))
    assert counts["lost"] == 0 and counts["partly lost"] <= 2 and counts["leaked"] <= 2, counts
    assert counts["exact"] + counts["acceptable"] >= len(fixtures) - 4, counts
