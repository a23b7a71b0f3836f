"""One write per forwarded mail (common/store/intake.py) against moto: the conversation record, the
owner's block list and the ack budget in one TransactWriteItems, and every case where DynamoDB
cancels it falling back to the separate calls with the same outcome as before."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from common.aws import dynamodb
from common.mail.parse import parse
from common.store import conversations, intake, senderlists
from deploy.config import Config
from tests.conftest import IAM_ENFORCED
from tests.integration.test_iam import as_role, denied
from tests.support.awscalls import CallCounter
from tests.support.harness import Stack
from tests.support.mailgen import mail

WHEN = datetime(2026, 1, 5, 9, 30, tzinfo=UTC)


def record(
    cfg: Config, sender: str, mid: str, cid: str = "c1", ack_refusal: str = ""
) -> tuple[intake.Recorded, dict[str, int]]:
    parsed = parse(mail(sender=sender))
    with CallCounter() as calls, calls.track():
        recorded = intake.record(cfg, cid, mid, parsed, WHEN, True, ack_refusal)
    return recorded, dict(calls.calls)


def budget(cfg: Config) -> dict[str, Any]:
    items = [i for i in dynamodb.scan(cfg.send_status_table) if str(i["id"]).startswith("ack-budget#")]
    return items[0] if items else {}


def test_a_first_contact_is_recorded_and_acked_in_one_call(stack: Stack) -> None:
    recorded, calls = record(stack.cfg, "Jane <jane@corp.example>", "m1")
    assert recorded == intake.Recorded(True, "")
    assert calls == {"DynamoDB.TransactWriteItems": 1}
    item = conversations.get(stack.cfg, "c1")
    assert item is not None and (item["senderEmail"], item["firstMessageId"]) == ("jane@corp.example", "m1")
    assert (budget(stack.cfg)["total"], budget(stack.cfg)["domain:corp.example"]) == (1, 1)
    # SES delivers the same mail again: still the first contact (its ack is deduplicated by the sender)
    assert record(stack.cfg, "Jane <jane@corp.example>", "m1")[0] == intake.Recorded(True, "")


def test_a_known_contact_costs_two_calls_as_before_and_takes_no_ack(stack: Stack) -> None:
    record(stack.cfg, "Jane <jane@corp.example>", "m1")
    recorded, calls = record(stack.cfg, "Jane <jane@corp.example>", "m2")
    assert recorded == intake.Recorded(False, "not first contact")
    assert calls == {"DynamoDB.TransactWriteItems": 1, "DynamoDB.UpdateItem": 1}
    item = conversations.get(stack.cfg, "c1")
    assert item is not None and (item["firstMessageId"], item["lastSesMessageId"]) == ("m1", "m2")
    assert budget(stack.cfg)["total"] == 1


def test_no_ack_wanted_records_without_touching_the_budget(stack: Stack) -> None:
    recorded, calls = record(stack.cfg, "Jane <jane@corp.example>", "m1", ack_refusal="no-reply sender")
    assert recorded == intake.Recorded(True, "no-reply sender")
    assert calls == {"DynamoDB.TransactWriteItems": 1}
    assert budget(stack.cfg) == {}


@pytest.mark.parametrize(
    ("entry", "sender"),
    [
        ("jane@corp.example", "Jane <jane@corp.example>"),
        ("@corp.example", "Jane <jane@corp.example>"),
        ("@corp.example", "Jane <jane@eu.corp.example>"),  # a domain entry covers its subdomains
    ],
)
def test_a_blocked_sender_is_not_recorded(stack: Stack, entry: str, sender: str) -> None:
    senderlists.put(stack.cfg, entry, senderlists.BLOCK, "cli")
    recorded, _ = record(stack.cfg, sender, "m1")
    assert recorded.blocked is not None and recorded.blocked.entry == entry
    assert not recorded.first_contact
    assert conversations.get(stack.cfg, "c1") is None and budget(stack.cfg) == {}


def test_an_allowed_address_in_a_blocked_domain_gets_through(stack: Stack) -> None:
    senderlists.put(stack.cfg, "@corp.example", senderlists.BLOCK, "cli")
    senderlists.put(stack.cfg, "jane@corp.example", senderlists.ALLOW, "cli")
    recorded, calls = record(stack.cfg, "Jane <jane@corp.example>", "m1")
    assert recorded == intake.Recorded(True, "")
    assert calls["DynamoDB.BatchGetItem"] == 1  # the check failed: the lists were read to find who decides
    assert conversations.get(stack.cfg, "c1") is not None and budget(stack.cfg)["total"] == 1


def test_an_allow_entry_alone_needs_no_read(stack: Stack) -> None:
    senderlists.put(stack.cfg, "jane@corp.example", senderlists.ALLOW, "cli")
    assert record(stack.cfg, "Jane <jane@corp.example>", "m1")[1] == {"DynamoDB.TransactWriteItems": 1}


def test_over_budget_the_mail_is_recorded_and_the_limit_named(stack: Stack) -> None:
    cfg = replace(stack.cfg, ack_limit_per_hour=2, ack_limit_per_domain_per_hour=1)
    assert record(cfg, "A <a@one.example>", "m1", cid="c1")[0] == intake.Recorded(True, "")
    recorded, calls = record(cfg, "B <b@one.example>", "m2", cid="c2")
    assert recorded == intake.Recorded(True, "ack budget for one.example used up (1 per hour)")
    assert calls == {"DynamoDB.TransactWriteItems": 1, "DynamoDB.UpdateItem": 1}
    assert record(cfg, "C <c@two.example>", "m3", cid="c3")[0] == intake.Recorded(True, "")
    recorded, _ = record(cfg, "D <d@three.example>", "m4", cid="c4")
    assert recorded == intake.Recorded(True, "global ack budget used up (2 per hour)")
    assert conversations.get(cfg, "c4") is not None and budget(cfg)["total"] == 2


def test_another_senders_conversation_is_never_merged(stack: Stack) -> None:
    record(stack.cfg, "Jane <jane@corp.example>", "m1")
    with pytest.raises(conversations.CollisionError):
        record(stack.cfg, "Eve <eve@evil.example>", "m2")
    item = conversations.get(stack.cfg, "c1")
    assert item is not None and item["senderEmail"] == "jane@corp.example"


def test_a_conflicting_transaction_falls_back_to_separate_calls(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    def conflict(actions: list[dict[str, Any]]) -> None:
        raise dynamodb.TransactionCancelledError([("TransactionConflict", None)] * len(actions))

    monkeypatch.setattr(dynamodb, "transact_write", conflict)
    recorded, calls = record(stack.cfg, "Jane <jane@corp.example>", "m1")
    assert recorded == intake.Recorded(True, "")
    assert calls == {"DynamoDB.BatchGetItem": 1, "DynamoDB.UpdateItem": 2}
    senderlists.put(stack.cfg, "@corp.example", senderlists.BLOCK, "cli")
    blocked, _ = record(stack.cfg, "Jane <jane@corp.example>", "m2")
    assert blocked.blocked is not None and budget(stack.cfg)["total"] == 1


@pytest.mark.skipif(not IAM_ENFORCED, reason="IAM=off: the emulator does not enforce IAM")
def test_each_action_of_the_transaction_is_authorized_as_its_own_operation(stack: Stack) -> None:
    # inbound-handler's role may check the sender lists and write the record; reply-handler's may not
    # check the lists, and no role may check a table its policy does not name for ConditionCheckItem.
    cfg = stack.cfg
    actions = [*senderlists.block_checks(cfg, "jane@corp.example")]
    actions.append(
        dynamodb.update_action(
            cfg.conversations_table,
            {"conversationId": "c1"},
            "SET senderEmail = :e",
            values={":e": "jane@corp.example"},
        )
    )
    as_role(stack, "inbound-handler", "dynamodb").transact_write_items(TransactItems=actions)
    denied(lambda: as_role(stack, "reply-handler", "dynamodb").transact_write_items(TransactItems=actions))
    other = dynamodb.condition_check(cfg.quarantine_table, {"id": "q1"}, "attribute_not_exists(id)")
    denied(lambda: as_role(stack, "inbound-handler", "dynamodb").transact_write_items(TransactItems=[other]))
