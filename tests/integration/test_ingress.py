"""The SMTP ingress (aiosmtpd, loopback) against a real moto server: what SES's receipt rules do."""

from __future__ import annotations

import json
import smtplib
import socket
from collections.abc import Iterator
from email.message import EmailMessage
from typing import Any

import pytest

from deploy.config import Config
from local import provision
from local.ingress import SmtpIngress
from local.rie import free_port
from tests.support.harness import Stack


@pytest.fixture
def ingress(stack: Stack) -> Iterator[SmtpIngress]:
    provision.provision(stack.cfg, wiring=True)  # the wiring's invocations queue, as `email-handler dev` has
    server = SmtpIngress(stack.cfg, "127.0.0.1", free_port()).start()
    yield server
    server.stop()


def saved_eml(cfg: Config) -> bytes:
    """A multi-kilobyte message as mail clients save it: every line ends in a bare LF."""
    msg = EmailMessage()
    msg["From"] = "Jane Smith <jane@corp.example>"
    msg["To"] = cfg.public_email
    msg["Subject"] = "A saved message"
    body = "\n".join(f"Line {i}: the quick brown fox jumps over the lazy dog." for i in range(120))
    msg.set_content(body + "\n.\n..a line that starts with a dot\nThe end.\n")
    msg.add_attachment(bytes(range(256)) * 24, maintype="application", subtype="pdf", filename="cv.pdf")
    raw = msg.as_bytes()  # the default policy writes "\n"
    assert b"\r" not in raw and len(raw) > 8000
    return raw


def staged(stack: Stack, queue_messages: list[dict]) -> bytes:
    [invocation] = queue_messages
    event = json.loads(invocation["Body"])["event"]
    mid = event["Records"][0]["ses"]["mail"]["messageId"]
    return stack.s3_body(f"staging/{mid}")


def test_a_saved_eml_with_bare_lf_line_ends_is_accepted_and_stored_with_crlf(
    stack: Stack, ingress: SmtpIngress
) -> None:
    raw = saved_eml(stack.cfg)
    with smtplib.SMTP("127.0.0.1", ingress.port, timeout=30) as smtp:
        assert smtp.sendmail("jane@corp.example", [stack.cfg.public_email], raw) == {}  # raises on 500
    stored = staged(stack, stack.receive(provision.wiring_queue(stack.cfg, "invocations")))
    # Every line end as CRLF; smtplib ends the data with one more CRLF, which is kept as sent.
    assert stored == raw.replace(b"\n", b"\r\n") + b"\r\n"
    assert b"\r\n.\r\n..a line that starts with a dot\r\n" in stored  # dot-stuffing undone, the lone dot kept


def test_crlf_messages_pass_unchanged(stack: Stack, ingress: SmtpIngress) -> None:
    raw = saved_eml(stack.cfg).replace(b"\n", b"\r\n")
    with smtplib.SMTP("127.0.0.1", ingress.port, timeout=30) as smtp:
        smtp.sendmail("jane@corp.example", [stack.cfg.public_email], raw)
    assert staged(stack, stack.receive(provision.wiring_queue(stack.cfg, "invocations"))) == raw


def test_a_bare_lf_dot_does_not_end_the_message(stack: Stack, ingress: SmtpIngress) -> None:
    """SMTP smuggling: <LF>.<LF> followed by commands must stay content, as with Postfix's normalize."""
    smuggled = (
        b"From: jane@corp.example\nSubject: one\n\nbody\n.\nMAIL FROM:<evil@corp.example>\r\n"
        b"RCPT TO:<" + stack.cfg.public_email.encode() + b">\r\nDATA\r\n"
    )
    with socket.create_connection(("127.0.0.1", ingress.port), timeout=30) as s:
        f = s.makefile("rwb")

        def say(line: bytes) -> bytes:
            f.write(line)
            f.flush()
            return f.readline()

        f.readline()  # greeting
        say(b"HELO client\r\n")
        say(b"MAIL FROM:<jane@corp.example>\r\n")
        say(b"RCPT TO:<" + stack.cfg.public_email.encode() + b">\r\n")
        assert say(b"DATA\r\n").startswith(b"354")
        assert say(smuggled + b"\r\n.\r\n").startswith(b"250")
        say(b"QUIT\r\n")
    queue = provision.wiring_queue(stack.cfg, "invocations")
    assert stack.depth(queue) == 1  # one message, not two
    assert b"\r\nbody\r\n.\r\nMAIL FROM:<evil@corp.example>\r\n" in staged(stack, stack.receive(queue))


def test_a_mail_to_the_public_and_a_thread_address_reaches_both_handlers(
    stack: Stack, ingress: SmtpIngress
) -> None:
    from common.runtime.events import SesReceipt
    from common.store import staging

    thread = f"jane-at-corp.example.abcdef@{stack.cfg.thread_domain}"
    raw = saved_eml(stack.cfg).replace(b"\n", b"\r\n")
    with smtplib.SMTP("127.0.0.1", ingress.port, timeout=30) as smtp:
        smtp.sendmail("jane@corp.example", [stack.cfg.public_email, thread], raw)
    seen: dict[str, dict] = {}
    for _ in range(5):  # moto returns a subset per call
        seen.update(
            (m["MessageId"], m) for m in stack.receive(provision.wiring_queue(stack.cfg, "invocations"))
        )
    bodies = [json.loads(m["Body"]) for m in seen.values()]
    by_function = {b["function"]: SesReceipt.from_event(b["event"]) for b in bodies}
    assert sorted(by_function) == ["inbound-handler", "reply-handler"]
    # the public rule matches the thread domain too: inbound-handler sees every envelope recipient
    assert by_function["inbound-handler"].recipients == (stack.cfg.public_email, thread)
    assert by_function["reply-handler"].recipients == (thread,)
    [mid] = {r.message_id for r in by_function.values()}
    # Whichever finishes first leaves the shared staging object to the other; the last deletes it,
    # and a retry of the first changes nothing.
    staging.done(stack.cfg, by_function["reply-handler"], "reply-handler")
    staging.done(stack.cfg, by_function["reply-handler"], "reply-handler")
    assert staging.fetch(stack.cfg, mid) == raw
    staging.done(stack.cfg, by_function["inbound-handler"], "inbound-handler")
    assert staging.fetch(stack.cfg, mid) is None


# --- which handlers share the staged mail: SES's envelope recipients, never the To and Cc fields -------


def invocations(stack: Stack) -> dict[str, dict]:
    """The receipt rules' Lambda actions queued for one mail, by function."""
    seen: dict[str, dict] = {}
    for _ in range(5):  # moto returns a subset per call
        seen.update(
            (m["MessageId"], m) for m in stack.receive(provision.wiring_queue(stack.cfg, "invocations"))
        )
    bodies = [json.loads(m["Body"]) for m in seen.values()]
    return {b["function"]: b["event"] for b in bodies}


def header_mail(to: str, text: str = "Hello there.") -> bytes:
    msg = EmailMessage()
    msg["From"] = "Mallory <mallory@evil.example>"
    msg["To"] = to
    msg["Subject"] = "Hi"
    msg["Message-ID"] = "<share-1@evil.example>"
    msg.set_content(text)
    return msg.as_bytes().replace(b"\n", b"\r\n")


@pytest.fixture(scope="module")
def handlers(rie_module: Any) -> dict[str, Any]:
    env = {"RETRY_DELAYS_SECONDS": "0"}
    return {name: rie_module(name, env=env) for name in ("inbound-handler", "reply-handler")}


def test_a_mail_bccd_to_a_thread_address_reaches_reply_handler_after_inbound_handler_finished(
    stack: Stack, ingress: SmtpIngress, handlers: dict[str, Any]
) -> None:
    """Envelope to the public address and (Bcc) a thread address; the To field names only the public
    address. inbound-handler, done first, must not delete what reply-handler still needs."""
    thread = f"jane-at-corp.example.abcdef@{stack.cfg.thread_domain}"
    raw = header_mail(stack.cfg.public_email)
    with smtplib.SMTP("127.0.0.1", ingress.port, timeout=30) as smtp:
        smtp.sendmail("mallory@evil.example", [stack.cfg.public_email, thread], raw)
    events = invocations(stack)
    assert sorted(events) == ["inbound-handler", "reply-handler"]
    mail = events["inbound-handler"]["Records"][0]["ses"]["mail"]
    assert mail["destination"] == [stack.cfg.public_email]  # as SES: the To field, no Bcc
    mid = mail["messageId"]
    assert handlers["inbound-handler"].invoke(events["inbound-handler"])["status"] == "forwarded"
    assert stack.s3_keys(f"staging/{mid}")  # reply-handler has yet to read it
    refused = handlers["reply-handler"].invoke(events["reply-handler"])
    assert refused["status"] == "rejected", refused  # handled (refused and kept), not lost
    assert stack.s3_keys("rejected/") and stack.s3_keys(f"staging/{mid}") == []


def test_a_thread_address_only_in_the_to_field_never_keeps_the_staged_mail(
    stack: Stack, ingress: SmtpIngress, handlers: dict[str, Any]
) -> None:
    """The To field names a thread address the envelope never had: one rule ran, and its handler
    deletes the staged mail."""
    thread = f"jane-at-corp.example.abcdef@{stack.cfg.thread_domain}"
    raw = header_mail(f"{stack.cfg.public_email}, {thread}")
    with smtplib.SMTP("127.0.0.1", ingress.port, timeout=30) as smtp:
        smtp.sendmail("mallory@evil.example", [stack.cfg.public_email], raw)
    events = invocations(stack)
    assert sorted(events) == ["inbound-handler"]
    mid = events["inbound-handler"]["Records"][0]["ses"]["mail"]["messageId"]
    assert handlers["inbound-handler"].invoke(events["inbound-handler"])["status"] == "forwarded"
    assert stack.s3_keys(f"staging/{mid}") == []
    assert stack.s3_keys("staging/") == []


def test_a_reply_to_a_thread_address_alone_is_left_to_reply_handler_and_cleaned_up_by_the_last(
    stack: Stack, ingress: SmtpIngress, handlers: dict[str, Any]
) -> None:
    thread = f"jane-at-corp.example.abcdef@{stack.cfg.thread_domain}"
    raw = header_mail(thread)
    with smtplib.SMTP("127.0.0.1", ingress.port, timeout=30) as smtp:
        smtp.sendmail("mallory@evil.example", [thread], raw)
    events = invocations(stack)
    assert sorted(events) == ["inbound-handler", "reply-handler"]
    assert events["inbound-handler"]["Records"][0]["ses"]["receipt"]["recipients"] == [thread]
    mid = events["inbound-handler"]["Records"][0]["ses"]["mail"]["messageId"]
    assert handlers["inbound-handler"].invoke(events["inbound-handler"])["status"] == "thread-only"
    assert stack.s3_keys(f"staging/{mid}")  # not read, not deleted: reply-handler's
    assert handlers["reply-handler"].invoke(events["reply-handler"])["status"] == "rejected"
    assert stack.s3_keys("staging/") == []
