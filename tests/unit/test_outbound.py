import json

import pytest

from common.mail.build import build
from common.runtime.errors import EventError
from common.store.sendqueue import Attachment, OutboundMessage


def msg(**kw) -> OutboundMessage:
    base = dict(kind="reply", idempotency_key="reply:m1", correlation_id="reply-m1", to=["jane@corp.example"],
                subject="Re: Role", text="Hello")
    return OutboundMessage(**(base | kw))


def test_round_trip_and_validation() -> None:
    m = msg(attachments=[Attachment("reply-attachments/c/m/a.pdf", "a.pdf", "application/pdf")])
    assert OutboundMessage.from_dict(json.loads(m.to_json())) == m
    for bad, why in [({"schema": 2}, "schema"), ({"to": []}, "'to'"), ({"to": ["nobody"]}, "'to'"),
                     ({"idempotency_key": ""}, "empty idempotency_key"), ({"headers": {"Bcc": "x@y.z"}}, "not allowed")]:
        with pytest.raises(EventError, match=why):
            OutboundMessage.from_dict(json.loads(m.to_json()) | bad)


def test_mime_cannot_be_given_extra_headers_or_foreign_attachments() -> None:
    m = msg(subject="Hi\r\nBcc: x@evil.example", from_name="Owner\nBcc: y@evil.example",
            in_reply_to="<a@b>\r\nBcc: z@evil.example", references=["<ok@corp.example>", "bad"])
    email = build(m, "hello@example.com", "example.com", "reply-attachments/", lambda k: b"")
    raw = email.as_bytes()
    assert b"\nBcc:" not in raw and email["Subject"] == "Hi Bcc: x@evil.example"
    assert "In-Reply-To" not in email and email["References"] == "<ok@corp.example>"
    assert email["From"].addresses[0].addr_spec == "hello@example.com"
    for key in ("attachments/c/m/a.pdf", "reply-attachments/../attachments/x.pdf"):
        with pytest.raises(EventError, match="outside"):
            build(msg(attachments=[Attachment(key, "a.pdf")]), "hello@example.com", "example.com",
                  "reply-attachments/", lambda k: b"")
