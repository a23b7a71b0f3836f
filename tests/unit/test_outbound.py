import json
from typing import Any

import pytest

from common.errors import EventError
from common.mail.build import build
from common.mail.outbound import Attachment, OutboundMessage


def msg(**kw: Any) -> OutboundMessage:
    base = dict(
        kind="reply",
        idempotency_key="reply:m1",
        correlation_id="reply-m1",
        to=["jane@corp.example"],
        subject="Re: Role",
        text="Hello",
    )
    return OutboundMessage(**(base | kw))


def test_round_trip_and_validation() -> None:
    m = msg(attachments=[Attachment("reply-attachments/c/m/a.pdf", "a.pdf", "application/pdf")])
    assert OutboundMessage.from_dict(json.loads(m.to_json())) == m
    for bad, why in [
        ({"schema": 4}, "unsupported queue message schema"),
        ({"schema": 3}, "schema 3 does not say hide_correspondent"),
        ({"hide_correspondent": "yes"}, "not a boolean"),
        ({"from_address": ["jobs@example.com"]}, "from_address"),
        ({"to": []}, "'to'"),
        ({"to": ["nobody"]}, "'to'"),
        ({"idempotency_key": ""}, "empty idempotency_key"),
        ({"headers": {"Bcc": "x@y.z"}}, "not allowed"),
    ]:
        with pytest.raises(EventError, match=why):
            OutboundMessage.from_dict(json.loads(m.to_json()) | bad)


def test_a_schema_1_message_is_read_as_one_from_the_default_address() -> None:
    """Queued before the upgrade (one public address, no from_address): read, and sent from the default."""
    doc = json.loads(msg().to_json())
    del doc["from_address"]
    old = OutboundMessage.from_dict(doc | {"schema": 1})
    assert old.from_address == "" and old == msg()
    assert json.loads(msg(from_address="jobs@example.com").to_json())["schema"] == 2


def test_a_forward_that_hides_its_correspondent_is_schema_3_and_only_it() -> None:
    hidden = msg(kind="forward", hide_correspondent=True)
    doc = json.loads(hidden.to_json())
    assert doc["schema"] == 3 and doc["hide_correspondent"] is True
    assert OutboundMessage.from_dict(doc) == hidden
    # every other message stays schema 2: a sender of before (schema 1 and 2) still sends them
    assert json.loads(msg(kind="forward").to_json())["schema"] == 2


def test_mime_cannot_be_given_extra_headers_or_foreign_attachments() -> None:
    m = msg(
        subject="Hi\r\nBcc: x@evil.example",
        from_name="Owner\nBcc: y@evil.example",
        in_reply_to="<a@b>\r\nBcc: z@evil.example",
        references=["<ok@corp.example>", "bad"],
    )
    email = build(m, "hello@example.com", "example.com", "reply-attachments/", lambda k: b"")
    raw = email.as_bytes()
    assert b"\nBcc:" not in raw and email["Subject"] == "Hi Bcc: x@evil.example"
    assert "In-Reply-To" not in email and email["References"] == "<ok@corp.example>"
    assert email["From"].addresses[0].addr_spec == "hello@example.com"
    for key in ("attachments/c/m/a.pdf", "reply-attachments/../attachments/x.pdf"):
        with pytest.raises(EventError, match="outside"):
            build(
                msg(attachments=[Attachment(key, "a.pdf")]),
                "hello@example.com",
                "example.com",
                "reply-attachments/",
                lambda k: b"",
            )


def test_long_message_ids_are_written_unencoded_and_folded_between_ids() -> None:
    """Exchange ids are longer than a line; the stdlib would RFC 2047-encode them."""
    ids = [f"<AM0PR0702MB{i}{'A' * 70}@AM0PR0702MB3603.eurprd07.prod.outlook.com>" for i in range(4)]
    email = build(
        msg(in_reply_to=ids[-1], references=ids), "hello@example.com", "example.com", "", lambda k: b""
    )
    raw = email.as_bytes()
    assert b"=?" not in raw
    assert f"In-Reply-To: {ids[-1]}\n".encode() in raw
    assert ("References: " + "\n ".join(ids) + "\n").encode() in raw
    assert all(len(line) <= 998 for line in raw.split(b"\n"))
    reparsed = __import__("email").message_from_bytes(raw, policy=__import__("email.policy").policy.default)
    assert reparsed["References"].split() == ids and str(reparsed["In-Reply-To"]) == ids[-1]


@pytest.mark.parametrize(
    ("to", "why"),
    [
        ("jdöe@mächine.example", "non-ASCII local part"),
        ("a..b@x.example", "not dot-atom"),
        ("x@[192.0.2.1]", "bad domain"),
    ],
)
def test_addresses_ses_cannot_take_are_refused_before_sending(to: str, why: str) -> None:
    from common.mail.build import unbuildable

    assert why in unbuildable(msg(to=[to]), "hello@example.com", "example.com")


def test_idn_domains_are_sent_in_ascii() -> None:
    email = build(msg(to=["jane@mächine.example"]), "hello@example.com", "example.com", "", lambda k: b"")
    assert email["To"].addresses[0].addr_spec == "jane@xn--mchine-bua.example"


def test_queue_bodies_are_ascii_whatever_the_mail_held() -> None:
    """SQS refuses characters outside XML's set (U+FFFE, U+FFFF, C0 controls): the JSON escapes them."""
    msg = OutboundMessage(
        kind="forward",
        idempotency_key="forward:x",
        correlation_id="forward-x",
        to=["o@example.net"],
        subject="\uffff Grüße",
        text="\ufffe\x01 body",
    )
    body = msg.to_json()
    assert (
        body.isascii()
        and json.loads(body)["subject"] == "\uffff Grüße"
        and json.loads(body)["text"] == "\ufffe\x01 body"
    )


def test_dynamodb_keys_over_the_limit_are_refused_before_any_request() -> None:
    from common.aws import dynamodb

    assert dynamodb.check_key("t", {"entry": "a" * dynamodb.MAX_KEY_BYTES}) == {
        "entry": "a" * dynamodb.MAX_KEY_BYTES
    }
    with pytest.raises(dynamodb.KeyTooLongError, match="key entry is 3012 bytes"):
        dynamodb.check_key("t", {"entry": "a" * 3000 + "@x.example.o"})
