"""The owner decides who gets through, reviews the quarantine and starts conversations: inbound-handler,
reply-handler and the senders under the real RIE against moto, driven by mail as SES delivers it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from common.aws import dynamodb
from common.delivery.compose import FORWARD_MARKER
from common.mail.threads import release_address
from common.store import layout
from common.store import quarantine as records
from local.rie import RieProcess
from tests.support.harness import Stack
from tests.support.mailgen import mail

OWNER = "Owner Name <owner@example.net>"
JANE = "jane-at-corp.example"
counter = iter(range(10_000))


def next_id(prefix: str = "m") -> str:
    return f"{prefix}{next(counter):039d}"[-40:]


@pytest.fixture(scope="module")
def fns(rie_module: Callable[..., RieProcess]) -> dict[str, RieProcess]:
    env = {"RETRY_DELAYS_SECONDS": "0", "SPAM_RULES_TTL_SECONDS": "0"}
    return {
        name: rie_module(name, env=env)
        for name in ("inbound-handler", "reply-handler", "forward-sender", "reply-sender")
    }


def inbound(stack: Stack, fns: dict[str, RieProcess], raw: bytes, **kwargs: Any) -> Any:
    return fns["inbound-handler"].invoke(stack.receipt(raw, next_id("i"), **kwargs))


def owner_mail(
    stack: Stack, fns: dict[str, RieProcess], to: str, text: str, subject: str = "Re: Hello", **kw: Any
) -> Any:
    raw = mail(sender=OWNER, to=to, subject=subject, text=text, **kw)
    return fns["reply-handler"].invoke(stack.receipt(raw, next_id("r"), to=to, source="owner@example.net"))


def thread_of(
    stack: Stack, fns: dict[str, RieProcess], sender: str = "Jane Smith <jane@corp.example>"
) -> str:
    result = inbound(stack, fns, mail(sender=sender))
    assert result["status"] == "forwarded", result
    forwards = [
        m for m in stack.peek(stack.cfg.forward_queue) if m.conversation_id == result["conversationId"]
    ]
    return forwards[-1].reply_to


def drain(stack: Stack, fns: dict[str, RieProcess]) -> list:
    stack.run_sender(fns["forward-sender"], stack.cfg.forward_queue)
    stack.run_sender(fns["reply-sender"], stack.cfg.reply_queue)
    return stack.sent()


def digest_event(task: str = "", **detail: Any) -> dict:
    return {
        "version": "0",
        "id": "e1",
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "time": "2026-11-24T07:00:00Z",
        "resources": [],
        "detail": {**({"task": task} if task else {}), **detail},
    }


# --- block / allow / unblock -----------------------------------------------------------------------


def test_block_in_a_reply_quarantines_later_mail_without_forward_or_ack(
    stack: Stack, fns: dict[str, RieProcess]
) -> None:
    thread = thread_of(stack, fns)
    result = owner_mail(stack, fns, thread, "[block]\n")
    # Only a command: nothing goes to Jane.
    assert result["status"] == "commands-applied" and result["controls"] == ["block jane@corp.example"]
    assert stack.peek(stack.cfg.reply_queue) == []
    assert dynamodb.get(stack.cfg.sender_lists_table, {"entry": "jane@corp.example"})["list"] == "block"
    before = stack.depth(stack.cfg.forward_queue)
    later = inbound(stack, fns, mail(subject="Again"))
    assert (later["status"], later["reason"]) == ("quarantined", "blocked by the owner (jane@corp.example)")
    assert stack.depth(stack.cfg.forward_queue) == before  # no forward
    assert f"ack:{later['messageId']}" not in {
        a.idempotency_key for a in stack.peek(stack.cfg.ack_queue)
    }  # no ack
    # Someone else at the same domain still gets through.
    assert inbound(stack, fns, mail(sender="Bob <bob@corp.example>"))["status"] == "forwarded"


def test_block_domain_covers_every_sender_and_subdomain_and_the_reply_text_still_goes(
    stack: Stack, fns: dict[str, RieProcess]
) -> None:
    thread = thread_of(stack, fns)
    result = owner_mail(stack, fns, thread, "No thanks, please stop.\n[block: domain]\n")
    assert result["status"] == "queued" and result["controls"] == ["block @corp.example"]
    [sent] = drain(stack, fns)[-1:]
    assert sent.destinations == ["jane@corp.example"]
    assert (
        sent.message.get_body(("plain",)).get_content() == "No thanks, please stop.\n"
    )  # the command never goes out
    for sender in ("Bob <bob@corp.example>", "X <x@mail.corp.example>"):
        r = inbound(stack, fns, mail(sender=sender))
        assert (r["status"], r["reason"]) == ("quarantined", "blocked by the owner (@corp.example)")
    assert inbound(stack, fns, mail(sender="Y <y@notcorp.example>"))["status"] == "forwarded"


def test_allow_exempts_the_contact_from_the_keyword_lists_and_unblock_clears_it(
    stack: Stack, fns: dict[str, RieProcess]
) -> None:
    from tests.integration.test_inbound import _set_rules

    _set_rules(stack, "[subject_patterns]\ninvoice\n")
    assert inbound(stack, fns, mail(subject="Invoice 42"))["status"] == "quarantined"
    thread = thread_of(stack, fns)
    assert owner_mail(stack, fns, thread, "[allow]\n")["controls"] == ["allow jane@corp.example"]
    assert inbound(stack, fns, mail(subject="Invoice 43"))["status"] == "forwarded"
    # SES's own verdicts still apply to an allowed contact.
    assert inbound(stack, fns, mail(subject="Hi"), verdicts={"spam": "FAIL"})["status"] == "quarantined"
    assert owner_mail(stack, fns, thread, "[unblock]\n")["controls"] == ["unblock jane@corp.example"]
    assert inbound(stack, fns, mail(subject="Invoice 44"))["status"] == "quarantined"


def test_an_address_entry_is_more_specific_than_a_domain_block(
    stack: Stack, fns: dict[str, RieProcess]
) -> None:
    thread = thread_of(stack, fns)
    owner_mail(stack, fns, thread, "[block: @corp.example]\n[allow: jane@corp.example]\n")
    assert inbound(stack, fns, mail())["status"] == "forwarded"
    assert inbound(stack, fns, mail(sender="Bob <bob@corp.example>"))["status"] == "quarantined"


def test_the_owner_cannot_block_their_own_mail(stack: Stack, fns: dict[str, RieProcess]) -> None:
    thread = thread_of(stack, fns)
    result = owner_mail(
        stack, fns, thread, "[block: owner@example.net]\n[block: @example.com]\n[block: @example.net]\n"
    )
    assert [c.split(":")[0] for c in result["controls"]] == ["block refused"] * 3
    assert dynamodb.scan(stack.cfg.sender_lists_table) == []


# --- quarantine digest and release ----------------------------------------------------------------


def test_daily_digest_lists_what_was_held_with_release_addresses_once(
    stack: Stack, fns: dict[str, RieProcess]
) -> None:
    assert fns["inbound-handler"].invoke(digest_event())["status"] == "nothing-quarantined"
    a = inbound(stack, fns, mail(subject="Cheap pills"), verdicts={"spam": "FAIL"})
    b = inbound(
        stack, fns, mail(sender="Mallory <m@evil.example>", subject="Hello"), verdicts={"spam": "FAIL"}
    )
    result = fns["inbound-handler"].invoke(digest_event())
    assert result["status"] == "digest-sent" and result["count"] == 2
    [digest] = drain(stack, fns)
    assert (
        digest.destinations == ["owner@example.net"]
        and digest.message["Subject"] == "Quarantine: 2 messages held"
    )
    text = digest.message.get_body(("plain",)).get_content()
    for held, sender, subject in (
        (a, "Jane Smith <jane@corp.example>", "Cheap pills"),
        (b, "Mallory <m@evil.example>", "Hello"),
    ):
        qid = records.quarantine_id(held["messageId"])
        address = release_address(qid, stack.cfg.thread_secret, stack.cfg.thread_domain)
        assert sender in text and f"Subject:  {subject}" in text and "Reason:   spam verdict FAIL" in text
        assert (
            f"Release:  {address}" in text
            and f"mailto:{address}" in digest.message.get_body(("html",)).get_content()
        )
        assert len(address.split("@")[0]) <= 64  # SMTP's local-part limit
    # A second run the same day (or a retried schedule) sends nothing new.
    assert fns["inbound-handler"].invoke(digest_event())["status"] == "nothing-quarantined"
    assert len(drain(stack, fns)) == 1


def test_mailing_a_release_address_forwards_the_held_mail_once(
    stack: Stack, fns: dict[str, RieProcess]
) -> None:
    held = inbound(
        stack,
        fns,
        mail(subject="Real offer", attachments=[("offer.pdf", b"%PDF offer", "application/pdf")]),
        verdicts={"spam": "FAIL"},
    )
    qid = records.quarantine_id(held["messageId"])
    address = release_address(qid, stack.cfg.thread_secret, stack.cfg.thread_domain)
    result = owner_mail(stack, fns, address, "", subject=f"Release {qid}")
    assert result["status"] == "released" and result["conversationId"] == JANE
    assert stack.peek(stack.cfg.ack_queue) == []  # a release is never acked
    [fwd] = drain(stack, fns)
    assert fwd.destinations == ["owner@example.net"] and fwd.message["Subject"] == "Real offer"
    text = fwd.message.get_body(("plain",)).get_content()
    assert text.startswith(
        f"{FORWARD_MARKER}\n[!] Released from quarantine by the owner "
        "(it was held because: spam verdict FAIL)."
    )
    assert [p.get_filename() for p in fwd.message.iter_attachments()] == ["offer.pdf"]
    assert records.get(stack.cfg, qid)["status"] == "released"
    assert stack.conversation(JANE)["subject"] == "Real offer"
    again = owner_mail(stack, fns, address, "")
    assert again["status"] == "already-released" and len(drain(stack, fns)) == 1
    # The released mail is no longer pending for the digest.
    assert fns["inbound-handler"].invoke(digest_event())["status"] == "nothing-quarantined"


def test_release_addresses_are_owner_only_and_tamper_proof(stack: Stack, fns: dict[str, RieProcess]) -> None:
    held = inbound(stack, fns, mail(), verdicts={"spam": "FAIL"})
    qid = records.quarantine_id(held["messageId"])
    address = release_address(qid, stack.cfg.thread_secret, stack.cfg.thread_domain)
    forged = release_address(qid, "another-secret-of-16+", stack.cfg.thread_domain)
    r = fns["reply-handler"].invoke(
        stack.receipt(
            mail(sender="Mallory <m@evil.example>", to=address),
            next_id("r"),
            to=address,
            source="m@evil.example",
        )
    )
    assert (r["status"], r["reason"]) == ("rejected", "envelope sender is not the owner")
    assert owner_mail(stack, fns, forged, "")["reason"] == "no thread address with a valid tag"
    assert records.get(stack.cfg, qid)["status"] == "held" and drain(stack, fns) == []


def test_an_operator_release_event_forwards_through_inbound_handler(
    stack: Stack, fns: dict[str, RieProcess]
) -> None:
    held = inbound(stack, fns, mail(subject="Held"), verdicts={"spam": "FAIL"})
    qid = records.quarantine_id(held["messageId"])
    event = {
        "detail-type": "Quarantine Release",
        "source": "service-email-handler",
        "time": "2026-11-24T08:00:00Z",
        "detail": {"task": "quarantine-release", "id": qid, "by": "alice"},
    }
    assert fns["inbound-handler"].invoke(event)["status"] == "released"
    assert records.get(stack.cfg, qid)["releasedBy"] == "cli:alice"
    [fwd] = drain(stack, fns)
    assert fwd.message["Subject"] == "Held"


def test_mail_held_unparsed_over_a_cap_is_released_whole_without_being_parsed(
    stack: Stack, fns: dict[str, RieProcess]
) -> None:
    """A mail quarantined because it is over a parsing cap is released by mailing its release
    address: forwarded unparsed, the raw original attached, a note saying why; no conversation, no ack."""
    from tests.support import mailgen as g

    raw = g.many_parts(2_000)
    held = inbound(stack, fns, raw)
    assert held["status"] == "quarantined" and held["reason"] == "not parsed: 2002 MIME parts (limit 500)"
    qid = records.quarantine_id(held["messageId"])
    address = release_address(qid, stack.cfg.thread_secret, stack.cfg.thread_domain)
    result = owner_mail(stack, fns, address, "", subject=f"Release {qid}")
    assert (result["status"], result["conversationId"]) == ("released", "")
    assert stack.peek(stack.cfg.ack_queue) == []
    [fwd] = drain(stack, fns)
    msg = fwd.message
    assert fwd.destinations == ["owner@example.net"] and msg["Subject"] == "Hello"
    text = msg.get_body(("plain",)).get_content()
    assert "it was held because: not parsed: 2002 MIME parts (limit 500)" in text
    assert (
        "It was not parsed (2002 MIME parts (limit 500))" in text and "attached whole as original.eml" in text
    )
    [part] = list(msg.iter_attachments())
    # an opaque file, not a message/rfc822 the client (or SES's attachment checks) would read inline
    assert (part.get_filename(), part.get_content_type()) == ("original.eml", "application/octet-stream")
    assert part.get_content() == raw  # the original, byte for byte
    assert (
        stack.s3_body(layout.released_original(held["messageId"])) == raw
    )  # copied inside S3 from the held copy
    assert stack.conversation(JANE) is None  # its sender was never read: no conversation
    assert records.get(stack.cfg, qid)["status"] == "released"
    assert owner_mail(stack, fns, address, "")["status"] == "already-released" and drain(stack, fns) == [fwd]


def test_an_unparsed_release_too_large_to_attach_names_the_s3_key(
    stack: Stack, rie_function: Callable[..., RieProcess], fns: dict[str, RieProcess]
) -> None:
    from tests.support import mailgen as g

    small = rie_function("inbound-handler", env={"MAX_FORWARD_BYTES": "200000"})
    raw = g.many_headers(1_500) + b"x" * 200_000
    held = small.invoke(stack.receipt(raw, next_id("i")))
    assert held["reason"] == "not parsed: 1505 header fields (limit 1000)"
    qid = records.quarantine_id(held["messageId"])
    event = {
        "detail-type": "Quarantine Release",
        "source": "service-email-handler",
        "time": "2026-11-24T08:00:00Z",
        "detail": {"task": "quarantine-release", "id": qid, "by": "alice"},
    }
    assert small.invoke(event)["status"] == "released"
    [fwd] = drain(stack, fns)
    text = fwd.message.get_body(("plain",)).get_content()
    assert f"would not fit SES's size limit. It is stored at s3://{stack.cfg.bucket}/{held['key']}" in text
    assert list(fwd.message.iter_attachments()) == []


def test_a_shortened_release_links_the_left_out_part_signed_by_reply_handlers_role(
    stack: Stack, rie_function: Callable[..., RieProcess], fns: dict[str, RieProcess]
) -> None:
    """A release by mail is a forward that reply-handler builds: its download link is signed by
    reply-handler's own role, which may read attachments/ for it (common/store/layout.py)."""
    import re

    import requests

    from local.env import function_credentials

    big = bytes(range(256)) * 1200
    held = inbound(
        stack,
        fns,
        mail(subject="Big offer", attachments=[("big.pdf", big, "application/pdf")]),
        verdicts={"spam": "FAIL"},
    )
    qid = records.quarantine_id(held["messageId"])
    reply = rie_function("reply-handler", env={"MAX_FORWARD_BYTES": "400000"})
    address = release_address(qid, stack.cfg.thread_secret, stack.cfg.thread_domain)
    raw = mail(sender=OWNER, to=address, subject=f"Release {qid}", text="")
    assert (
        reply.invoke(stack.receipt(raw, next_id("r"), to=address, source="owner@example.net"))["status"]
        == "released"
    )
    [fwd] = drain(stack, fns)
    text = fwd.message.get_body(("plain",)).get_content()
    link = re.search(
        r"big\.pdf \(too large to forward; stored at s3://\S+; download until [^:]+:\d\d UTC at the latest: "
        r"(\S+)\)",
        text,
    )
    assert link is not None, text
    signer = function_credentials(stack.cfg, "reply-handler", ensure_role=False)["AWS_ACCESS_KEY_ID"]
    assert f"X-Amz-Credential={signer}%2F" in link[1]
    got = requests.get(link[1], timeout=10)
    assert (got.status_code, got.content) == (200, big)


# --- starting a conversation ----------------------------------------------------------------------


def test_owner_starts_a_conversation_and_the_answer_threads_without_an_ack(
    stack: Stack, fns: dict[str, RieProcess]
) -> None:
    new = f"new@{stack.cfg.thread_domain}"
    result = owner_mail(
        stack,
        fns,
        new,
        "[to: Bob.Lee@Other.example]\nHi Bob,\nshall we talk?\n[company: Other]\n\nOwner\n",
        subject="An idea",
    )
    assert result["status"] == "started" and result["conversationId"] == "bob.lee-at-other.example"
    [sent] = drain(stack, fns)
    msg = sent.message
    assert sent.destinations == ["bob.lee@other.example"] and sent.source == "hello@example.com"
    assert msg["Subject"] == "An idea" and msg["In-Reply-To"] is None
    assert msg.get_body(("plain",)).get_content() == "Hi Bob,\nshall we talk?\n\nOwner\n"
    record = stack.conversation("bob.lee-at-other.example")
    assert record["senderEmail"] == "bob.lee@other.example" and record["companyName"] == "Other"
    # Bob answers the public address: same conversation, forwarded, not acked as a first contact.
    answer = inbound(stack, fns, mail(sender="Bob Lee <bob.lee@other.example>", subject="Re: An idea"))
    assert (answer["status"], answer["conversationId"], answer["firstContact"], answer["ack"]) == (
        "forwarded",
        "bob.lee-at-other.example",
        False,
        False,
    )
    # The owner replies in that thread as usual.
    forward = [
        m for m in stack.peek(stack.cfg.forward_queue) if m.conversation_id == "bob.lee-at-other.example"
    ][-1]
    assert owner_mail(stack, fns, forward.reply_to, "Great, Tuesday then.")["status"] == "queued"
    assert drain(stack, fns)[-1].message["In-Reply-To"] is not None


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("Hi there, no recipient line\n", "new conversation without a [to: ADDRESS] first line"),
        ("Hello\n[to: bob@other.example]\n", "new conversation without a [to: ADDRESS] first line"),
        ("[to: hello@example.com]\nloop\n", "[to: hello@example.com] is one of this system's own addresses"),
        (
            "[to: someone@thread.example.com]\nloop\n",
            "[to: someone@thread.example.com] is one of this system's own addresses",
        ),
        ("[to: not an address]\nx\n", "[to: not an address]: address unusable for a reply"),
    ],
)
def test_a_new_conversation_needs_a_usable_to_line(
    stack: Stack, fns: dict[str, RieProcess], text: str, reason: str
) -> None:
    result = owner_mail(stack, fns, f"new@{stack.cfg.thread_domain}", text)
    assert (result["status"], result["reason"]) == ("rejected", reason)
    assert drain(stack, fns) == []


def test_only_the_owner_can_start_a_conversation(stack: Stack, fns: dict[str, RieProcess]) -> None:
    new = f"new@{stack.cfg.thread_domain}"
    raw = mail(sender="Mallory <m@evil.example>", to=new, text="[to: victim@other.example]\nspam\n")
    r = fns["reply-handler"].invoke(stack.receipt(raw, next_id("r"), to=new, source="m@evil.example"))
    assert r["status"] == "rejected"
    raw = mail(sender=OWNER, to=new, text="[to: victim@other.example]\nspam\n")
    r = fns["reply-handler"].invoke(
        stack.receipt(
            raw, next_id("r"), to=new, source="owner@example.net", verdicts={"dmarc": "FAIL", "spf": "FAIL"}
        )
    )
    assert r["status"] == "rejected" and drain(stack, fns) == []


def test_the_digest_offers_a_week_of_held_mail_and_reads_no_older_days(
    stack: Stack, fns: dict[str, RieProcess]
) -> None:
    """Listing only 100 a day, a sustained flood would leave the digest a backlog of old spam for ever (and
    every run reading all of it): the pending index is partitioned by the day the mail was held and a digest
    reads the last DIGEST_WINDOW_DAYS days only; older held mail stays in `quarantine list` and releasable."""
    from datetime import UTC, datetime, timedelta

    from common.mail import limits

    now = datetime.now(UTC)
    old = now - timedelta(days=limits.DIGEST_WINDOW_DAYS + 1)
    qids = {
        when: records.record(
            stack.cfg,
            f"held{n:035d}",
            f"spam/x/held{n}.eml",
            when,
            "s@spam.example",
            f"held {n}",
            "spam verdict FAIL",
        )
        for n, when in enumerate((old, now - timedelta(days=limits.DIGEST_WINDOW_DAYS - 1), now))
    }
    assert records.get(stack.cfg, qids[old])[records.PENDING_INDEX] == layout.day(old)
    result = fns["inbound-handler"].invoke(digest_event())
    assert result["status"] == "digest-sent" and result["count"] == 2 and qids[old] not in result["ids"]
    [digest] = drain(stack, fns)
    text = digest.message.get_body(("plain",)).get_content()
    assert "held 1" in text and "held 2" in text and "held 0" not in text
    assert records.get(stack.cfg, qids[old])["status"] == records.HELD  # still there for the CLI and release


def test_the_digest_stays_bounded_whatever_the_days_volume(stack: Stack, fns: dict[str, RieProcess]) -> None:
    """A flood of a few thousand held mails makes a digest of at most 100 entries, each
    field cut short, that names how many more there are and the command that lists them; only those
    100 are marked digested, so the next run lists the next 100."""
    from common.aws import client
    from common.mail import limits

    total = 3_000
    long_subject = "Win " + "big " * 400
    long_sender = "Spammer " + "x" * 600 + " <spam@flood.example>"
    items = [
        {
            "id": f"{n:016d}",
            "sesMessageId": f"flood{n:035d}",
            "key": f"spam/2026-11-23/flood{n}.eml",
            "receivedAt": f"2026-11-23T{n // 3600 % 24:02d}:{n // 60 % 60:02d}:{n % 60:02d}Z",
            "sender": long_sender,
            "subject": long_subject,
            "reason": "spam verdict FAIL " + "r" * 2000,
            "status": records.HELD,
            records.PENDING_INDEX: records.PENDING,
        }
        for n in range(total)
    ]
    ddb = client("dynamodb")
    for start in range(0, total, 25):
        ddb.batch_write_item(
            RequestItems={
                stack.cfg.quarantine_table: [
                    {"PutRequest": {"Item": dynamodb.to_item(i)}} for i in items[start : start + 25]
                ]
            }
        )
    result = fns["inbound-handler"].invoke(digest_event())
    assert result["status"] == "digest-sent" and result["count"] == total
    [digest] = drain(stack, fns)
    assert len(digest.raw) < 300_000  # SES takes 40 MB; a digest of 100 entries is a fraction of a megabyte
    assert digest.message["Subject"] == f"Quarantine: {total} messages held"
    text = digest.message.get_body(("plain",)).get_content()
    html = digest.message.get_body(("html",)).get_content()
    assert text.count("   Release:  release.") == limits.DIGEST_MAX_ENTRIES == html.count("mailto:release.")
    more = (
        f"and {total - limits.DIGEST_MAX_ENTRIES} more, listed in the next digests — "
        "run `email-handler quarantine list`"
    )
    assert more in text and more in html
    assert long_subject not in text and long_sender not in text and "r" * 300 not in text
    assert "0000000000000000" in text and f"{total - 1:016d}" not in text  # the oldest are listed
    # Only the listed ones were marked digested: the rest lead the next digest, which lists the next 100.
    assert len(records.pending(stack.cfg)) == total - limits.DIGEST_MAX_ENTRIES
    result = fns["inbound-handler"].invoke(digest_event())
    assert result["status"] == "digest-sent" and result["count"] == total - limits.DIGEST_MAX_ENTRIES
    assert result["ids"] == [
        f"{n:016d}" for n in range(limits.DIGEST_MAX_ENTRIES, 2 * limits.DIGEST_MAX_ENTRIES)
    ]
    [_, second] = drain(stack, fns)  # everything sent so far: the first digest, then this one
    text = second.message.get_body(("plain",)).get_content()
    assert f"{limits.DIGEST_MAX_ENTRIES - 1:016d}" not in text and f"{limits.DIGEST_MAX_ENTRIES:016d}" in text
    assert f"and {total - 2 * limits.DIGEST_MAX_ENTRIES} more" in text
