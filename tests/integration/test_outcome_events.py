"""Every mail's outcome as an EventBridge event and an EMF count (common/runtime/outcomes.py), through
the path a user takes: the functions under the real RIE, their own roles on the emulator with IAM
enforced, and an EventBridge rule on the bus whose target is a queue, as docs/owner.md's "Events"
routes them. The bus never holds the mail up: a bus that is unreachable or denied leaves the outcome
as it was."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from common.aws import client
from common.runtime.log import pseudonym
from common.runtime.outcomes import NAMESPACE, SOURCE
from common.store.sendqueue import enqueue
from local import fresh
from local.env import function_credentials
from local.rie import RieProcess, free_port
from tests.integration.test_sandbox import CONTACT, OWNER, WAIT, later, outbound, sandbox  # noqa: F401
from tests.integration.test_senders import proxy  # noqa: F401 (the SES fault proxy fixture)
from tests.support import docgen
from tests.support.extraction import FUNCTION_ENV, PREFIX, upload
from tests.support.harness import Stack
from tests.support.mailgen import mail
from tests.support.sesproxy import SesProxy

SES_ID = "0000000000000000000000000000000000000047"
CID = "jane-at-corp.example"  # the conversation id of mailgen's sender, jane@corp.example


@pytest.fixture(scope="module")
def inbound(rie_module: Callable[..., RieProcess]) -> RieProcess:
    return rie_module("inbound-handler")


@pytest.fixture(scope="module")
def ack_sender(rie_module: Callable[..., RieProcess]) -> RieProcess:
    return rie_module("ack-sender", env={"RETRY_DELAYS_SECONDS": "0"})


@pytest.fixture
def bus(stack: Stack) -> Callable[[], list[dict[str, Any]]]:
    """An EventBridge rule on the default bus matching this service's events, whose target is a queue
    (what the owner's rule does with an API destination instead); returns a drain of that queue."""
    sqs = client("sqs")
    url = sqs.create_queue(QueueName="test-outcome-events")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    events = client("events")
    events.put_rule(Name="test-outcomes", EventPattern=json.dumps({"source": [SOURCE]}), State="ENABLED")
    events.put_targets(Rule="test-outcomes", Targets=[{"Id": "queue", "Arn": arn}])

    def drain() -> list[dict[str, Any]]:
        got: list[dict[str, Any]] = []
        while batch := sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10).get("Messages", []):
            got += [json.loads(m["Body"]) for m in batch]
            for m in batch:
                sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])
        return got

    return drain


def receive(stack: Stack, fn: RieProcess, raw: bytes | None = None, **kwargs: Any) -> Any:
    return fn.invoke(stack.receipt(raw or mail(text="Hello, about the invoice."), SES_ID, **kwargs))


def emf(fn: RieProcess) -> list[dict[str, Any]]:
    """The EMF documents a function wrote to stdout (its log: CloudWatch reads the metrics from there)."""
    lines = (json.loads(line) for line in fn.output().splitlines() if line.startswith('{"_aws"'))
    return [d for d in lines if "CloudWatchMetrics" in d["_aws"]]


def logged(fn: RieProcess, message: str) -> list[dict[str, Any]]:
    lines = (json.loads(line) for line in fn.output().splitlines() if line.startswith("{"))
    return [d for d in lines if d.get("message") == message]


def test_a_forwarded_mail_puts_mail_forwarded_on_the_bus_naming_no_contact(
    stack: Stack, inbound: RieProcess, bus: Callable[[], list[dict[str, Any]]]
) -> None:
    raw = mail(text="Hello, about the invoice.")
    assert receive(stack, inbound, raw)["status"] == "forwarded"
    [event] = bus()
    assert (event["source"], event["detail-type"]) == (SOURCE, "Mail forwarded")
    detail = event["detail"]
    assert detail["outcome"] == "forwarded" and detail["function"] == "inbound-handler"
    assert detail["environment"] == stack.cfg.env
    assert detail["sesMessageId"] == SES_ID and detail["correlationId"] == f"forward-{SES_ID}"
    assert detail["publicAddress"] == stack.cfg.public_email
    assert detail["sizes"] == {"bytes": len(raw), "attachments": 0}
    # the conversation id spells the sender's address: the logs' pseudonym stands for it
    assert detail["conversationId"] == pseudonym(CID)
    text = json.dumps(event)
    assert "jane" not in text.lower() and "corp.example" not in text and "invoice" not in text
    assert "Hello" not in text  # mailgen's subject


def test_the_owner_may_have_the_contact_named(
    stack: Stack, rie_function: Callable[..., RieProcess], bus: Callable[[], list[dict[str, Any]]]
) -> None:
    fn = rie_function("inbound-handler", env={"EVENTS_INCLUDE_CONTACTS": "true"})
    assert receive(stack, fn)["status"] == "forwarded"
    [event] = bus()
    assert event["detail"]["conversationId"] == CID
    assert (event["detail"]["contact"], event["detail"]["subject"]) == ("jane@corp.example", "Hello")


def test_a_quarantined_mail_puts_mail_quarantined_with_its_reason(
    stack: Stack, inbound: RieProcess, bus: Callable[[], list[dict[str, Any]]]
) -> None:
    result = receive(stack, inbound, verdicts={"spam": "FAIL"})
    assert (result["status"], result["reason"]) == ("quarantined", "spam verdict FAIL")
    [event] = bus()
    assert event["detail-type"] == "Mail quarantined"
    detail = event["detail"]
    assert (detail["reason"], detail["reasonKind"]) == ("spam verdict FAIL", "spam-verdict")
    assert detail["sesMessageId"] == SES_ID and detail["publicAddress"] == stack.cfg.public_email
    assert "jane" not in json.dumps(event).lower()
    # the count, by reason too, in the function's log
    [doc] = [d for d in emf(inbound) if "MailQuarantined" in d][-1:]
    [definition] = doc["_aws"]["CloudWatchMetrics"]
    assert definition["Namespace"] == NAMESPACE
    assert definition["Dimensions"] == [["Environment"], ["Environment", "Reason"]]
    assert definition["Metrics"] == [{"Name": "MailQuarantined", "Unit": "Count"}]
    assert (doc["Environment"], doc["Reason"], doc["MailQuarantined"]) == (
        stack.cfg.env,
        "spam-verdict",
        [1.0],
    )


def test_the_count_of_a_forward_is_in_the_functions_log_as_emf(stack: Stack, inbound: RieProcess) -> None:
    before = len(emf(inbound))
    assert receive(stack, inbound)["status"] == "forwarded"
    [doc] = emf(inbound)[before:]
    [definition] = doc["_aws"]["CloudWatchMetrics"]
    assert definition == {
        "Namespace": "service-email-handler",
        "Dimensions": [["Environment"]],
        "Metrics": [{"Name": "MailForwarded", "Unit": "Count"}],
    }
    assert doc["Environment"] == stack.cfg.env and doc["MailForwarded"] == [1.0]
    assert "service" not in doc  # no dimension beyond the contract's


def test_an_ack_sesv_accepted_puts_mail_acked(
    stack: Stack, inbound: RieProcess, ack_sender: RieProcess, bus: Callable[[], list[dict[str, Any]]]
) -> None:
    assert receive(stack, inbound)["status"] == "forwarded"
    bus()  # the forward's
    stack.run_sender(ack_sender, stack.cfg.ack_queue)
    [event] = bus()
    assert event["detail-type"] == "Mail acked" and event["detail"]["function"] == "ack-sender"
    [sent] = stack.sent()
    assert event["detail"]["correlationId"] == f"ack-{SES_ID}" and event["detail"]["sizes"]["bytes"] > 0
    assert event["detail"]["publicAddress"] == stack.cfg.public_email and sent.destinations
    assert "jane" not in json.dumps(event).lower()
    assert [d["AcksSent"] for d in emf(ack_sender) if "AcksSent" in d][-1] == [1.0]


def test_a_send_that_fails_for_good_puts_mail_send_failed(
    stack: Stack,
    inbound: RieProcess,
    rie_function: Callable[..., RieProcess],
    proxy: Callable[..., SesProxy],  # noqa: F811 (the fixture imported above)
    bus: Callable[[], list[dict[str, Any]]],
) -> None:
    assert receive(stack, inbound)["status"] == "forwarded"
    bus()
    refusing = proxy(lambda n, p: ("error", "MessageRejected"))  # SES refuses the send for good
    sender = rie_function("forward-sender", env={"RETRY_DELAYS_SECONDS": "0", **refusing.env})
    [result] = stack.run_sender(sender, stack.cfg.forward_queue, visibility_s=0)
    assert result.failed == [] and stack.receive(stack.cfg.forward_queue + "-dlq")
    [event] = bus()
    assert event["detail-type"] == "Mail send-failed"
    detail = event["detail"]
    assert (detail["reason"], detail["correlationId"]) == ("MessageRejected", f"forward-{SES_ID}")
    assert detail["function"] == "forward-sender" and detail["publicAddress"] == stack.cfg.public_email
    assert stack.cfg.private_email not in json.dumps(event)  # the forward's recipient is not named either
    assert [d["SendsFailed"] for d in emf(sender) if "SendsFailed" in d] == [[1.0]]


def test_an_attachments_text_puts_text_ready_and_a_refused_one_extraction_error(
    stack: Stack, rie_function: Callable[..., RieProcess], bus: Callable[[], list[dict[str, Any]]]
) -> None:
    assert stack.cfg.bucket == "service-email-handler-local-mail"  # where upload() puts them
    files = {"Invoice 0047.pdf": docgen.make_pdf(["Invoice 0047", "Total due"]), "not really.pdf": b"text"}
    extractor = rie_function("attachment-extractor", env=FUNCTION_ENV)
    result = extractor.invoke(upload(client("s3"), files))
    assert sorted(r["status"] for r in result["results"]) == ["extracted", "rejected"]
    events = {e["detail-type"]: e["detail"] for e in bus()}
    assert set(events) == {"Mail text-ready", "Mail extraction-error"}
    ready, error = events["Mail text-ready"], events["Mail extraction-error"]
    _, cid, mid, _ = PREFIX.split("/")
    assert ready["sesMessageId"] == error["sesMessageId"] == mid
    assert ready["conversationId"] == pseudonym(cid)
    assert ready["sizes"]["pages"] == 2 and ready["sizes"]["bytes"] == len(files["Invoice 0047.pdf"])
    assert ready["sizes"]["characters"] > 0 and error["sizes"] == {"bytes": 4}
    assert error["reason"] and "Invoice" not in json.dumps(events) and "attachment" not in ready
    counts = [d for d in emf(extractor) if "AttachmentTextReady" in d]
    assert [(d["AttachmentTextReady"], d["ExtractionErrors"]) for d in counts] == [([1.0], [1.0])]


def test_a_reply_the_sandbox_holds_is_held_once_then_replied(
    sandbox: Stack,  # noqa: F811 (the fixture imported above)
    rie_function: Callable[..., RieProcess],
    bus: Callable[[], list[dict[str, Any]]],
) -> None:
    stack, cfg = sandbox, sandbox.cfg
    assert fresh.click(OWNER)
    fn = rie_function("reply-sender", env=WAIT)
    enqueue(cfg.reply_queue, outbound("reply", CONTACT), cfg.bucket, cfg.claim_check_bytes)
    stack.run_sender(fn, cfg.reply_queue)
    later(stack, fn, cfg.reply_queue)  # held again: reported once
    fresh.grant_production()
    later(stack, fn, cfg.reply_queue)
    assert [m.destinations for m in stack.sent()] == [[CONTACT]]
    events = bus()
    assert [e["detail-type"] for e in events] == ["Mail held", "Mail replied"]
    held, replied = (e["detail"] for e in events)
    assert (
        held["reason"] == "SandboxHeld" and held["correlationId"] == replied["correlationId"] == "reply-mid1"
    )
    assert replied["function"] == "reply-sender" and replied["sesMessageId"]
    assert CONTACT not in json.dumps(events)
    counts = [d for d in emf(fn) if "SendsHeld" in d or "RepliesSent" in d]
    assert [(d.get("SendsHeld"), d.get("RepliesSent")) for d in counts] == [([1.0], None), (None, [1.0])]


@pytest.mark.parametrize("fault", ["unreachable", "denied"])
def test_an_unreachable_or_denied_bus_changes_nothing_of_the_mail(
    stack: Stack,
    rie_function: Callable[..., RieProcess],
    bus: Callable[[], list[dict[str, Any]]],
    fault: str,
) -> None:
    """Nothing listens on the events endpoint, or the role may not put on the bus the function names:
    the mail is forwarded as ever, the warning gives the reason, and it costs no retry."""
    if fault == "unreachable":
        env = {"AWS_ENDPOINT_URL_EVENTBRIDGE": f"http://127.0.0.1:{free_port()}"}
    else:  # the role may put on the bus of the deployment's configuration only (deploy/iam.py)
        client("events").create_event_bus(Name="somebody-elses")
        env = {"EVENT_BUS_NAME": "somebody-elses"}
    fn = rie_function("inbound-handler", env=env)
    started = time.perf_counter()
    result = receive(stack, fn)
    took = time.perf_counter() - started
    assert result["status"] == "forwarded" and stack.peek(stack.cfg.forward_queue)
    assert stack.s3_keys("staging/") == []  # the receipt's last step ran
    [warning] = logged(fn, "outcome events not sent")
    reason = "EndpointConnectionError" if fault == "unreachable" else "AccessDeniedException"
    assert warning["reason"] == reason and warning["events"] == 1
    assert bus() == []
    assert took < 10  # one attempt of at most 1 s to connect, 2 s to read; the mail itself is the rest
    assert [d["MailForwarded"] for d in emf(fn)] == [[1.0]]  # the count does not depend on the bus


def test_a_denied_bus_leaves_a_send_as_it_was(
    stack: Stack,
    inbound: RieProcess,
    rie_function: Callable[..., RieProcess],
    bus: Callable[[], list[dict[str, Any]]],
) -> None:
    assert receive(stack, inbound)["status"] == "forwarded"
    bus()
    client("events").create_event_bus(Name="somebody-elses")
    sender = rie_function("ack-sender", env={"RETRY_DELAYS_SECONDS": "0", "EVENT_BUS_NAME": "somebody-elses"})
    [result] = stack.run_sender(sender, stack.cfg.ack_queue)
    assert result.failed == [] and len(stack.sent()) == 1 and stack.depth(stack.cfg.ack_queue) == 0
    [record] = [r for r in stack.send_records() if r["data"].get("correlationId") == f"ack-{SES_ID}"]
    assert record["data"]["status"] == "sent"
    assert [w["reason"] for w in logged(sender, "outcome events not sent")] == ["AccessDeniedException"]
    assert bus() == []


def test_the_emulator_lets_a_role_put_only_this_services_events_on_its_bus(stack: Stack) -> None:
    """As AWS evaluates the events:source condition key and the bus each entry names."""
    import boto3

    creds = function_credentials(stack.cfg, "inbound-handler", ensure_role=False)
    api = boto3.session.Session(
        aws_access_key_id=creds["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=creds["AWS_SECRET_ACCESS_KEY"],
        aws_session_token=creds.get("AWS_SESSION_TOKEN"),
        region_name=stack.cfg.region,
    ).client("events")
    entry = {"Source": SOURCE, "DetailType": "Mail forwarded", "Detail": "{}"}
    assert api.put_events(Entries=[entry])["FailedEntryCount"] == 0
    client("events").create_event_bus(Name="other")
    for refused in ({**entry, "Source": "someone.else"}, {**entry, "EventBusName": "other"}):
        with pytest.raises(api.exceptions.ClientError) as denied:
            api.put_events(Entries=[entry, refused])
        assert denied.value.response["Error"]["Code"] == "AccessDeniedException"
