"""The sender's batch: each body parsed once, partial failures reported by message id, and the
function's identity (its attachment prefix) taken from make_handler's configuration."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from common.senders import handler as sender
from common.senders.status import SendStatus
from common.store import layout
from deploy.config import Config

EVENT = json.loads((Path(__file__).parents[1] / "fixtures" / "events" / "sqs-send.json").read_text())


def batch(*bodies: str) -> dict[str, Any]:
    template = EVENT["Records"][0]
    records = []
    for i, body in enumerate(bodies):
        record = copy.deepcopy(template)
        record["messageId"], record["body"] = f"m{i}", body
        records.append(record)
    return {"Records": records}


@pytest.fixture
def world(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[Any]]:
    """The sender with no AWS behind it: what reached the idempotent send, the DLQ and the alerts."""
    seen: dict[str, list[Any]] = {"sent": [], "dlq": [], "alerts": []}

    def deliver(self: sender.Sender, msg: Any) -> dict[str, Any]:
        if msg.subject == "transient":
            raise RuntimeError("connection reset")
        seen["sent"].append((self.prefix, msg.idempotency_key))
        return {"status": SendStatus.SENT}

    monkeypatch.setattr(sender.Sender, "deliver", deliver)
    monkeypatch.setattr(sender, "_limiter", lambda table, rate: None)
    monkeypatch.setattr(sender.sqs, "send", lambda queue, body, attributes: seen["dlq"].append(queue))
    monkeypatch.setattr(sender.alerts, "publish_throttled", lambda *a: seen["alerts"].append(a[1]))
    monkeypatch.setattr(sender.sendstatus, "record_attempts", lambda *a, **k: {"attempts": 1})
    return seen


def test_each_body_is_parsed_once_and_only_the_failing_record_comes_back(
    monkeypatch: pytest.MonkeyPatch, world: dict[str, list[Any]]
) -> None:
    parsed: list[str] = []
    real = sender.sendqueue.parse

    def parse(body: str) -> Any:
        parsed.append(body)
        return real(body)

    monkeypatch.setattr(sender.sendqueue, "parse", parse)
    good = EVENT["Records"][0]["body"]
    transient = json.dumps({**json.loads(good), "idempotency_key": "ack:t", "subject": "transient"})
    event = batch(good, "not json", transient)
    cfg = replace(Config(), function="forward-sender", send_queue="q")

    result = sender.handle(cfg, event, None)

    assert parsed == [r["body"] for r in event["Records"]]  # once each, when the batch arrives
    assert result == {"batchItemFailures": [{"itemIdentifier": "m2"}]}  # the unreadable one is dead-lettered
    assert world["dlq"] == ["q-dlq"] and len(world["alerts"]) == 1
    assert world["sent"] == [
        (layout.SENDER_ATTACHMENTS["forward-sender"], json.loads(good)["idempotency_key"])
    ]
