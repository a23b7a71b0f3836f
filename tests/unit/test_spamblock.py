"""The owner's complaint about a forward: which block it makes, from SES's send record alone
(common/inbound/spamblock.py); the path through SES, SNS and the handlers is
tests/integration/test_spam_block.py."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from common.inbound import spamblock
from common.mail.build import unbuildable
from common.reply.owner import entry_for
from common.reply.text import owner_controls
from common.store import senderlists
from deploy import config
from local.env import local_env

CFG = config.load(local_env())  # hello@, jobs@ (label "jobs") and *@example.com; owner@example.net
OWNER = "owner@example.net"
CID = "jane-at-corp.example"


def sent(**fields: Any) -> dict[str, Any]:
    """A completed forward's send record as the forward-sender leaves it in the idempotency table."""
    record = {
        "id": "forward-sender.send#abc",
        "status": "COMPLETED",
        "sesMessageId": "ses-1",
        "correlationId": "forward-m1",
        "conversationId": CID,
        "fromAddress": "jobs@example.com",
        "data": json.dumps({"status": "sent", "recipients": [OWNER], "kind": "forward"}),
    }
    return {k: v for k, v in {**record, **fields}.items() if v is not None}


CONVERSATION = {
    "conversationId": CID,
    "senderEmail": "Jane@Corp.example",
    "publicAddress": "hello@example.com",  # the contact's latest mail was to hello@
}


def test_a_forward_blocks_its_contact_for_the_address_it_was_written_to() -> None:
    block = spamblock.decide(CFG, "Owner@Example.net", "ses-1", sent(), CONVERSATION)
    assert isinstance(block, spamblock.Block)
    # the forward's own address, not the conversation's latest one (hello@)
    assert (block.contact, block.public, block.entry) == (
        "jane@corp.example",
        "jobs@example.com",
        "jane@corp.example to jobs@example.com",
    )
    assert block.original == f"s3://{CFG.bucket}/conversations/{CID}/m1.eml"
    assert block.to == (OWNER,)  # the address's mailboxes: PRIVATE_EMAIL unless forward_to says others


def test_the_notice_says_who_where_why_and_the_exact_undo() -> None:
    block = spamblock.decide(CFG, OWNER, "ses-1", sent(), CONVERSATION)
    assert isinstance(block, spamblock.Block)
    notice = spamblock.notice(CFG, block, OWNER, "abuse")
    assert notice.to == [OWNER] and notice.from_address == "jobs@example.com"
    assert notice.idempotency_key == "notice:spam-block:ses-1"  # one notice per reported send
    assert "Blocked:      jane@corp.example" in notice.text and "mail to jobs@example.com only" in notice.text
    assert "feedback type: abuse" in notice.text
    assert "    email-handler unblock jane@corp.example --to jobs@example.com\n" in notice.text
    assert "    [unblock: jane@corp.example to jobs@example.com]\n" in notice.text
    assert unbuildable(notice, "jobs@example.com", CFG.domain_name) == ""


def test_the_reply_line_the_notice_gives_undoes_exactly_that_entry() -> None:
    block = spamblock.decide(CFG, OWNER, "ses-1", sent(), CONVERSATION)
    assert isinstance(block, spamblock.Block)
    [control] = owner_controls(spamblock.unblock_line(block) + "\n")
    assert entry_for(CFG, control, "jane@corp.example") == block.entry


def test_a_catch_all_recipient_is_the_address_blocked_for() -> None:
    block = spamblock.decide(CFG, OWNER, "ses-1", sent(fromAddress="shop-7@example.com"), CONVERSATION)
    assert isinstance(block, spamblock.Block) and block.entry == "jane@corp.example to shop-7@example.com"


def test_an_older_record_without_the_address_falls_back_to_the_conversations() -> None:
    block = spamblock.decide(CFG, OWNER, "ses-1", sent(fromAddress=None), CONVERSATION)
    assert isinstance(block, spamblock.Block) and block.public == "hello@example.com"


def test_the_address_forward_to_mailboxes_get_the_notice() -> None:
    cfg = replace(
        CFG,
        public_addresses=json.dumps({"jobs@example.com": {"forward_to": ["r@x.example", "s@x.example"]}}),
    )
    block = spamblock.decide(cfg, OWNER, "ses-1", sent(), CONVERSATION)
    assert isinstance(block, spamblock.Block) and block.to == ("r@x.example", "s@x.example")


def test_a_hidden_correspondent_is_not_named_in_the_subject() -> None:
    """hide_correspondent: the provider sees headers unencrypted; the body says who (encrypted when
    the owner has a key, like every notice on the forward queue)."""
    cfg = replace(CFG, public_addresses=json.dumps({"jobs@example.com": {"hide_correspondent": True}}))
    block = spamblock.decide(cfg, OWNER, "ses-1", sent(), CONVERSATION)
    assert isinstance(block, spamblock.Block) and block.hidden
    notice = spamblock.notice(cfg, block, OWNER, "abuse")
    assert notice.subject == "Blocked a sender for jobs@example.com (you reported spam)"
    assert "jane" not in notice.subject and "Blocked:      jane@corp.example" in notice.text


@pytest.mark.parametrize(
    ("ses_id", "record", "conversation", "why"),
    [
        ("", None, CONVERSATION, "SES named no message id"),
        ("ses-forged", None, CONVERSATION, "SES message id unknown"),
        ("ses-1", sent(correlationId="ack-m1"), CONVERSATION, "no forward (ack)"),
        ("ses-1", sent(correlationId="reply-r1"), CONVERSATION, "no forward (reply)"),
        ("ses-1", sent(correlationId="notice-x"), CONVERSATION, "no forward (notice)"),
        # a mailbox the forward did not go to (another address's) acts on nothing
        ("ses-1", sent(data=json.dumps({"recipients": ["r@x.ex"]})), CONVERSATION, "not one the forward"),
        ("ses-1", sent(data="not json"), CONVERSATION, "not one the forward"),
        ("ses-1", sent(conversationId=None), CONVERSATION, "belongs to no conversation"),
        ("ses-1", sent(), None, "conversation is gone"),
        ("ses-1", sent(), {**CONVERSATION, "senderEmail": ""}, "names no contact"),
        ("ses-1", sent(fromAddress="old@elsewhere.example"), CONVERSATION, "no longer served"),
        # the owner writing to their own address: never an entry that catches the owner's mail
        ("ses-1", sent(), {**CONVERSATION, "senderEmail": OWNER}, "covers the owner's address"),
    ],
)
def test_nothing_is_blocked_unless_ses_own_record_names_a_forward(
    ses_id: str, record: dict[str, Any] | None, conversation: dict[str, Any] | None, why: str
) -> None:
    found = spamblock.decide(CFG, OWNER, ses_id, record, conversation)
    assert isinstance(found, str) and why in found


def test_the_entry_is_the_one_the_cli_writes() -> None:
    block = spamblock.decide(CFG, OWNER, "ses-1", sent(), CONVERSATION)
    assert isinstance(block, spamblock.Block)
    assert block.entry == senderlists.normalise("jane@corp.example" + senderlists.SCOPE + "jobs@example.com")
    assert senderlists.candidates("jane@corp.example", "jobs@example.com")[0] == block.entry
    assert block.entry not in senderlists.candidates("jane@corp.example", "hello@example.com")
