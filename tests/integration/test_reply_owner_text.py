"""The owner's text is kept unless it is proven to be the contact's (docs/reply.md, "What is removed"):
inline answers between quote blocks reach the contact whatever they name, a line the contact planted
removes at most itself (and the owner is shown what went out), a display name holding the forward's
marker text cuts nothing, and a conversation holding a 500 KB mail still answers in one invocation.
reply-handler and reply-sender under the real RIE, after a real forward by inbound-handler."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from common.delivery.compose import FORWARD_MARKER
from common.mail.outbound import OutboundMessage
from local.rie import RieProcess
from tests.support.harness import Stack
from tests.support.mailgen import mail

OWNER = "Ana Lindqvist <owner@example.net>"


@pytest.fixture(scope="module")
def fns(rie_module: Callable[..., RieProcess]) -> dict[str, RieProcess]:
    env = {"RETRY_DELAYS_SECONDS": "0"}
    return {name: rie_module(name, env=env) for name in ("inbound-handler", "reply-handler", "reply-sender")}


_ids = iter(range(1, 10**6))


def forward_of(stack: Stack, fns: dict[str, RieProcess], raw: bytes) -> OutboundMessage:
    result = fns["inbound-handler"].invoke(stack.receipt(raw, f"{next(_ids):040d}"))
    assert result["status"] == "forwarded", result
    [fwd] = [m for m in stack.peek(stack.cfg.forward_queue) if m.kind == "forward"]
    return fwd


def answer(stack: Stack, fns: dict[str, RieProcess], text: str, to: str) -> dict[str, Any]:
    raw = mail(sender=OWNER, to=to, subject="Re: Role", text=text)
    result: dict[str, Any] = fns["reply-handler"].invoke(
        stack.receipt(raw, f"{next(_ids):040d}", to=to, source="owner@example.net")
    )
    return result


def received(stack: Stack, fns: dict[str, RieProcess], contact: str) -> list[str]:
    stack.run_sender(fns["reply-sender"], stack.cfg.reply_queue)
    out = []
    for sent in stack.sent():
        assert sent.destinations == [contact]
        body = sent.message.get_body(("plain",))
        out.append(body.get_content() if body is not None else "")
    return out


def notices(stack: Stack) -> list[OutboundMessage]:
    return [m for m in stack.peek(stack.cfg.forward_queue) if m.kind == "notice"]


def attribution(fwd: OutboundMessage) -> str:
    """What the owner's client writes above the quoted forward: it names the forward's sender."""
    return f"On Mon, 3 Nov 2026 at 10:00, {fwd.from_name} <{fwd.reply_to}> wrote:"


def test_inline_answers_naming_times_addresses_or_one_word_all_reach_the_contact(
    stack: Stack, fns: dict[str, RieProcess]
) -> None:
    fwd = forward_of(stack, fns, mail(sender="Jane <jane@corp.example>", subject="Role", text="Questions.\n"))
    text = (
        f"{attribution(fwd)}\n> When can you meet?\nTuesday 4 Nov 2026 at 10:00, at 5 Main St:\n"
        "> Is that confirmed?\nYes.\n> Your address?\nana@mail.example\n> The salary?\nOK\n> Anything else?\n"
        "Confirmed.\n> Bye\n"
    )
    assert answer(stack, fns, text, fwd.reply_to)["status"] == "queued"
    assert received(stack, fns, "jane@corp.example") == [
        "Tuesday 4 Nov 2026 at 10:00, at 5 Main St:\nYes.\nana@mail.example\nOK\nConfirmed.\n"
    ]
    assert notices(stack) == []  # the attribution names this conversation: removed without a word


def test_a_phrase_the_contact_planted_removes_at_most_itself_and_the_owner_sees_what_went_out(
    stack: Stack, fns: dict[str, RieProcess]
) -> None:
    planted = "Thanks for reaching out.\nBest regards,\n"
    fwd = forward_of(stack, fns, mail(sender="Mallory <mallory@corp.example>", subject="Role", text=planted))
    text = "Hi Mallory,\nThanks for reaching out.\nThe role is open; we meet Tuesday.\nAna\n"
    assert answer(stack, fns, text, fwd.reply_to)["status"] == "queued"
    assert received(stack, fns, "mallory@corp.example") == [
        "Hi Mallory,\nThe role is open; we meet Tuesday.\nAna\n"
    ]
    [note] = notices(stack)
    assert "What went out" in note.text and "The role is open; we meet Tuesday." in note.text
    assert "Left out:\n\nThanks for reaching out." in note.text


def test_a_display_name_holding_the_forwards_marker_cuts_nothing_of_the_owners(
    stack: Stack, fns: dict[str, RieProcess]
) -> None:
    sender = f'"{FORWARD_MARKER}" <mallory@corp.example>'
    fwd = forward_of(stack, fns, mail(sender=sender, subject="Role", text="When? Where?\n"))
    text = f"Sure.\n\n{attribution(fwd)}\n> When?\nTuesday.\n> Where?\nIn Malmö.\n"
    assert answer(stack, fns, text, fwd.reply_to)["status"] == "queued"
    assert received(stack, fns, "mallory@corp.example") == ["Sure.\n\nTuesday.\nIn Malmö.\n"]


def test_a_500_kb_mail_in_the_conversation_leaves_every_reply_one_invocation(
    stack: Stack, fns: dict[str, RieProcess]
) -> None:
    """Each reply re-reads the conversation's archived mail as evidence; every pass over it is linear,
    so a reply quoting all of it, and the next one, each go out in one invocation."""
    line = "An ordinary line of a long mail, number {n}, about the role, the team and the dates.\n"
    big = "".join(line.format(n=n) for n in range(500 * 1024 // len(line)))
    assert len(big) >= 490 * 1024
    fwd = forward_of(stack, fns, mail(sender="Jane <jane@corp.example>", subject="Role", text=big))
    quoted = "".join("> " + q + "\n" for q in fwd.text.splitlines())
    for n, reply in enumerate(("Thanks, read it all.", "One more thing: Tuesday.")):
        start = time.monotonic()
        result = answer(stack, fns, f"{reply}\n\n{attribution(fwd)}\n{quoted}", fwd.reply_to)
        assert result["status"] == "queued", result
        assert time.monotonic() - start < 30, n
    assert received(stack, fns, "jane@corp.example") == [
        "Thanks, read it all.\n",
        "One more thing: Tuesday.\n",
    ]
    assert notices(stack) == []


def test_answers_typed_into_an_unmarked_outlook_quote_are_shown_to_the_owner(
    stack: Stack, fns: dict[str, RieProcess]
) -> None:
    """Outlook quotes the forward without ">" under its header block, and the owner types an answer
    into the quote: the quote is not sent (it is the contact's), and the owner is shown the answer."""
    fwd = forward_of(
        stack,
        fns,
        mail(sender="Jane <jane@corp.example>", subject="Role", text="When?\nWhere is the office?\n"),
    )
    quote = fwd.text.replace("When?\n", "When?\nTuesday at ten.\n", 1)
    header = (
        f"From: {fwd.from_name} <hello@example.com>\nSent: Monday, 3 November 2026 10:00\nSubject: Role\n\n"
    )
    assert answer(stack, fns, f"See below.\n\n{header}{quote}", fwd.reply_to)["status"] == "queued"
    assert received(stack, fns, "jane@corp.example") == ["See below.\n"]
    [note] = notices(stack)
    assert "Left out:\n\nTuesday at ten." in note.text and "What went out:\n\nSee below." in note.text
