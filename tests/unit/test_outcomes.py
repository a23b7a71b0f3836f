"""The outcome vocabulary, its counts and its events (common/runtime/outcomes.py): the names the
dashboard reads, the Reason dimension's few values, what an event may say, the two settings and the
roles' grant. tests/integration/test_outcome_events.py sends them through the emulator."""

from __future__ import annotations

import io
import json
from dataclasses import replace

import pytest

from common.errors import ConfigError
from common.runtime import outcomes
from common.runtime.log import pseudonym
from common.runtime.outcomes import Mail, Outcome
from deploy import config
from deploy.functions import FUNCTIONS
from deploy.iam import policy
from local.iam import Request, evaluate

GOOD = {
    "DOMAIN_NAME": "example.com",
    "PUBLIC_EMAIL": "hello@example.com",
    "PRIVATE_EMAIL": "owner@example.net",
    "THREAD_SECRET": "x" * 32,
}
CFG = replace(config.load(GOOD), function="inbound-handler")
ACCOUNT = "123456789012"
ABOUT = Mail(
    "0000000000000000000000000000000000000001",
    "jane-at-corp.example",
    "forward-0000000000000000000000000000000000000001",
    "hello@example.com",
    {"bytes": 1234, "attachments": 1},
    contact="jane@corp.example",
    subject="The invoice",
)


def test_the_vocabulary_and_metric_names_are_the_contracts() -> None:
    assert [str(o) for o in Outcome] == [
        "forwarded",
        "quarantined",
        "acked",
        "replied",
        "held",
        "send-failed",
        "text-ready",
        "extraction-error",
    ]
    assert outcomes.METRICS == {
        Outcome.FORWARDED: "MailForwarded",
        Outcome.QUARANTINED: "MailQuarantined",
        Outcome.ACKED: "AcksSent",
        Outcome.REPLIED: "RepliesSent",
        Outcome.HELD: "SendsHeld",
        Outcome.SEND_FAILED: "SendsFailed",
        Outcome.TEXT_READY: "AttachmentTextReady",
        Outcome.EXTRACTION_ERROR: "ExtractionErrors",
    }
    assert outcomes.SOURCE == outcomes.NAMESPACE == "service-email-handler"


@pytest.mark.parametrize(
    ("reason", "kind"),
    [
        ("spam verdict FAIL", "spam-verdict"),
        ("DMARC FAIL with sender policy reject", "dmarc-reject"),
        ("not parsed: over 1000 MIME parts", "not-parsed"),
        ("From header has no usable address", "sender-unusable"),
        ("sender address unusable: local part too long", "sender-unusable"),
        ("blocked by the owner (jane@corp.example)", "blocked-sender"),
        ("blocked sender domain spam.example", "blocked-domain"),
        ("subject matches 'viagra'", "keyword"),
        ("body matches 'crypto'", "keyword"),
        ("address disabled (shop@example.com)", "address-disabled"),
        (
            "conversation id jane-at-corp.example already belongs to another sender (not merged)",
            "id-collision",
        ),
        ("forward cannot be built: header too long", "unbuildable"),
        ("something new", "other"),
    ],
)
def test_a_reason_is_counted_under_one_of_a_few_kinds(reason: str, kind: str) -> None:
    assert outcomes.reason_kind(reason) == kind


def test_an_event_names_no_contact_and_quotes_no_mail_by_default() -> None:
    detail = outcomes.detail(CFG, Outcome.QUARANTINED, ABOUT, "blocked by the owner (jane@corp.example)")
    assert detail == {
        "outcome": "quarantined",
        "environment": "prd",
        "function": "inbound-handler",
        "sesMessageId": ABOUT.ses_message_id,
        "conversationId": pseudonym("jane-at-corp.example"),
        "correlationId": ABOUT.correlation_id,
        "publicAddress": "hello@example.com",
        "reason": f"blocked by the owner ({pseudonym('jane@corp.example')})",
        "reasonKind": "blocked-sender",
        "sizes": {"bytes": 1234, "attachments": 1},
    }
    assert "jane" not in json.dumps(detail) and "invoice" not in json.dumps(detail)


def test_the_owner_may_turn_contacts_on() -> None:
    named = replace(CFG, events_include_contacts=True)
    detail = outcomes.detail(named, Outcome.FORWARDED, ABOUT)
    assert detail["conversationId"] == "jane-at-corp.example"
    assert (detail["contact"], detail["subject"]) == ("jane@corp.example", "The invoice")
    assert "reasonKind" not in detail and "reason" not in detail  # empty fields are left out


def test_a_reply_correlation_id_that_spells_a_conversation_is_pseudonymised() -> None:
    about = replace(ABOUT, correlation_id="reply:jane-at-corp.example:abc")
    assert "jane" not in outcomes.detail(CFG, Outcome.REPLIED, about)["correlationId"]


def test_each_reason_has_its_own_emf_document_and_the_rest_share_one() -> None:
    outcomes.discard()
    for reason in ("spam verdict FAIL", "spam verdict FAIL", "subject matches 'x'"):
        outcomes.record(CFG, Outcome.QUARANTINED, ABOUT, reason)
    outcomes.record(CFG, Outcome.FORWARDED, ABOUT)
    outcomes.record(CFG, Outcome.FORWARDED, ABOUT)
    outcomes._EVENTS.clear()  # this test reads the counts only
    out = io.StringIO()
    outcomes.write_metrics(out)
    docs = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(d["_aws"]["CloudWatchMetrics"][0]["Dimensions"], d.get("Reason")) for d in docs] == [
        ([["Environment"]], None),
        ([["Environment"], ["Environment", "Reason"]], "keyword"),
        ([["Environment"], ["Environment", "Reason"]], "spam-verdict"),
    ]
    assert docs[0]["MailForwarded"] == [2.0] and docs[2]["MailQuarantined"] == [2.0]
    assert {d["_aws"]["CloudWatchMetrics"][0]["Namespace"] for d in docs} == {"service-email-handler"}
    assert all(d["Environment"] == "prd" and "service" not in d for d in docs)
    out = io.StringIO()
    outcomes.write_metrics(out)  # flushed per invocation: nothing twice
    assert out.getvalue() == ""


def test_an_event_entry_goes_to_the_configured_bus_as_mail_outcome() -> None:
    outcomes.discard()
    outcomes.record(replace(CFG, event_bus_name="mail-events"), Outcome.TEXT_READY, ABOUT)
    [entry] = outcomes._EVENTS
    outcomes.discard()
    assert (entry["EventBusName"], entry["Source"], entry["DetailType"]) == (
        "mail-events",
        "service-email-handler",
        "Mail text-ready",
    )
    assert json.loads(entry["Detail"])["outcome"] == "text-ready"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({}, ("default", False)),
        ({"EVENT_BUS_NAME": "mail-events", "EVENTS_INCLUDE_CONTACTS": "true"}, ("mail-events", True)),
        ({"EVENTS_INCLUDE_CONTACTS": "FALSE"}, ("default", False)),
        (
            {"EVENT_BUS_NAME": "arn:aws:events:eu-west-1:123456789012:event-bus/central"},
            ("arn:aws:events:eu-west-1:123456789012:event-bus/central", False),
        ),
    ],
)
def test_the_two_settings(value: dict[str, str], expected: tuple[str, bool]) -> None:
    cfg = config.load({**GOOD, **value})
    assert (cfg.event_bus_name, cfg.events_include_contacts) == expected


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ({"EVENTS_INCLUDE_CONTACTS": "yes"}, "EVENTS_INCLUDE_CONTACTS='yes' is not true or false"),
        ({"EVENT_BUS_NAME": "my bus"}, "EVENT_BUS_NAME"),
        ({"EVENT_BUS_NAME": "x" * 257}, "EVENT_BUS_NAME"),
        ({"EVENT_BUS_NAME": "arn:aws:sqs:us-east-1:123456789012:queue"}, "EVENT_BUS_NAME"),
    ],
)
def test_a_bad_setting_stops_the_start_with_its_name(value: dict[str, str], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        config.load({**GOOD, **value})


@pytest.mark.parametrize("function", [f.name for f in FUNCTIONS])
def test_each_role_may_put_this_services_events_on_its_bus_only(function: str) -> None:
    doc = policy(config.load({**GOOD, "EVENT_BUS_NAME": "mail-events"}), ACCOUNT, function)
    bus = f"arn:aws:events:us-east-1:{ACCOUNT}:event-bus/mail-events"

    def put(bus: str, source: str) -> bool:
        return evaluate([doc], Request("events:PutEvents", [bus], {"events:source": [source]}))

    assert put(bus, "service-email-handler")
    assert not put(bus, "aws.ec2") and not put(bus.replace("mail-events", "default"), "service-email-handler")
    # The key is multivalued: without the Null guard ForAllValues would allow a request lacking it.
    assert not evaluate([doc], Request("events:PutEvents", [bus], {}))


def test_what_waits_without_a_handler_is_capped() -> None:
    """The logic run in one process without the handler (the benchmarks) never sends: no growth."""
    outcomes.discard()
    for _ in range(outcomes.MAX_PENDING + 5):
        outcomes.record(CFG, Outcome.ACKED, ABOUT)
    assert len(outcomes._EVENTS) == outcomes.MAX_PENDING
    outcomes.discard()
    assert outcomes._EVENTS == [] and not outcomes._COUNTS


def test_recording_never_raises_into_the_mails_path() -> None:
    outcomes.discard()
    outcomes.record(CFG, Outcome.ACKED, Mail(sizes=5))  # type: ignore[arg-type]  # not a mapping
    assert outcomes._EVENTS == []  # dropped, and said so in the log
