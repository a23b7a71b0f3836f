"""Every mail's outcome, reported twice: as a CloudWatch count (embedded metric format, powertools'
metrics) and as an event on EventBridge (docs/owner.md, "Events").

The code that decides an outcome calls :func:`record` once the outcome is stored (the forward queued,
the mail held, SES's answer kept). Nothing is sent then: the handler (common/runtime/handler.py) sends
the invocation's events with :func:`send_events` and writes its metrics with :func:`write_metrics` when
the invocation ends, whether it succeeded or not. Neither ever raises: a bus that is missing, denied or
unreachable costs at most one short attempt (common/aws/events.py) and a warning, never the mail.

An event names no contact and quotes no mail unless ``EVENTS_INCLUDE_CONTACTS=true``: the conversation
id (which spells the sender's address) is then given as the pseudonym the logs use, and a reason has
every address in it replaced the same way (common/runtime/log.py, ``scrub``). Delivery is at least
once, as EventBridge's own is: a retried invocation can report its outcome again, with the same ids.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import IO, Any

from common.aws import error_code
from common.aws import events as eventbridge
from common.runtime.config import Deployment
from common.runtime.log import get_logger, scrub

log = get_logger("outcomes")

SOURCE = "service-email-handler"  # every event's source; the roles may put no other (deploy/iam.py)
NAMESPACE = "service-email-handler"  # the metrics' namespace
ENVIRONMENT = "Environment"  # the dimension every count has
REASON = "Reason"  # the second dimension of the quarantine count


class Outcome(StrEnum):
    FORWARDED = "forwarded"  # received and its forward queued to the owner (or released from quarantine)
    QUARANTINED = "quarantined"  # held, with its reason
    ACKED = "acked"  # the ack SES accepted
    REPLIED = "replied"  # the owner's reply SES accepted
    HELD = "held"  # a send SES's sandbox refused, first time: it waits for the sandbox
    SEND_FAILED = "send-failed"  # a send that failed for good: alerted and in the DLQ
    TEXT_READY = "text-ready"  # an attachment's text extracted and stored
    EXTRACTION_ERROR = "extraction-error"  # an attachment with no text, and its error record stored


METRICS: dict[Outcome, str] = {
    Outcome.FORWARDED: "MailForwarded",
    Outcome.QUARANTINED: "MailQuarantined",
    Outcome.ACKED: "AcksSent",
    Outcome.REPLIED: "RepliesSent",
    Outcome.HELD: "SendsHeld",
    Outcome.SEND_FAILED: "SendsFailed",
    Outcome.TEXT_READY: "AttachmentTextReady",
    Outcome.EXTRACTION_ERROR: "ExtractionErrors",
}

# A quarantine's reason (common/inbound/policy.py, common/delivery/deliver.py, the address registry) ->
# its Reason dimension. A reason's text can name a sender, a domain or a keyword; the dimension is one
# of these few values, so the count has one series per kind (CloudWatch bills a metric per series).
REASON_KINDS: tuple[tuple[str, str], ...] = (
    ("spam verdict", "spam-verdict"),
    ("DMARC FAIL", "dmarc-reject"),
    ("not parsed", "not-parsed"),
    ("From header has no usable address", "sender-unusable"),
    ("sender address unusable", "sender-unusable"),
    ("blocked by the owner", "blocked-sender"),
    ("blocked sender domain", "blocked-domain"),
    ("subject matches", "keyword"),
    ("body matches", "keyword"),
    ("address disabled", "address-disabled"),
    ("conversation id", "id-collision"),
    ("forward cannot be built", "unbuildable"),
    ("screener", "screener"),
)
OTHER = "other"


def reason_kind(reason: str) -> str:
    return next((kind for head, kind in REASON_KINDS if reason.startswith(head)), OTHER)


@dataclass(frozen=True, slots=True)
class Mail:
    """What an outcome is about. The ids, the public address and the sizes are always in the event;
    ``contact``, ``subject`` and ``attachment`` only when the owner turned EVENTS_INCLUDE_CONTACTS on."""

    ses_message_id: str = ""
    conversation_id: str = ""
    correlation_id: str = ""
    public_address: str = ""  # the public address written to, or that a send goes out from
    sizes: Mapping[str, int] = field(default_factory=dict)
    contact: str = ""
    subject: str = ""
    attachment: str = ""


# An invocation reports a handful (a batch of ten sends, a mail's attachments); code that runs the logic
# without the handler (the benchmarks, in one process) never sends, so what waits is capped.
MAX_PENDING = 1000
_EVENTS: list[dict[str, str]] = []
_COUNTS: Counter[tuple[str, str, str]] = Counter()  # (metric, environment, reason kind or '')


def record(cfg: Deployment, outcome: Outcome, mail: Mail, reason: str = "") -> None:
    """Note an outcome that is now stored: counted and put on the bus when the invocation ends. Never
    raises: it is called inside the mail's own path, whose result must not depend on it."""
    try:
        kind = reason_kind(reason) if outcome is Outcome.QUARANTINED else ""
        _COUNTS[(METRICS[outcome], cfg.env, kind)] += 1
        if len(_EVENTS) < MAX_PENDING:
            entry = eventbridge.entry(
                cfg.event_bus_name, SOURCE, f"Mail {outcome}", detail(cfg, outcome, mail, reason)
            )
            _EVENTS.append(entry)
    except Exception as exc:
        log.warning("outcome not recorded", extra={"reason": type(exc).__name__, "outcome": str(outcome)})


def detail(cfg: Deployment, outcome: Outcome, mail: Mail, reason: str = "") -> dict[str, Any]:
    """The event's detail (docs/owner.md, "Events"); empty fields left out."""
    named = cfg.events_include_contacts
    found: dict[str, Any] = {
        "outcome": str(outcome),
        "environment": cfg.env,
        "function": cfg.function,
        "sesMessageId": mail.ses_message_id,
        "conversationId": mail.conversation_id if named else scrub(mail.conversation_id, "conversationId"),
        "correlationId": mail.correlation_id if named else scrub(mail.correlation_id, "correlation_id"),
        "publicAddress": mail.public_address,
        "reason": reason if named else scrub(reason),
        "reasonKind": reason_kind(reason) if outcome is Outcome.QUARANTINED else "",
        "sizes": dict(mail.sizes),
    }
    if named:
        found |= {"contact": mail.contact, "subject": mail.subject, "attachment": mail.attachment}
    return {k: v for k, v in found.items() if v not in ("", None, {})}


def discard() -> None:
    """Forget what is pending (an invocation starts with nothing to report)."""
    _EVENTS.clear()
    _COUNTS.clear()


def send_events() -> None:
    """Put the invocation's events on the bus. Never raises: a failure is logged with its AWS error
    code (or the exception's type), never its message, and the events are dropped."""
    pending = list(_EVENTS)
    _EVENTS.clear()
    if not pending:
        return
    try:
        refused = eventbridge.put(pending)
    except Exception as exc:
        log.warning(
            "outcome events not sent",
            extra={"reason": error_code(exc) or type(exc).__name__, "events": len(pending)},
        )
        return
    if refused:
        log.warning("outcome events refused", extra={"reason": sorted(set(refused)), "events": len(refused)})


def write_metrics(stream: IO[str] | None = None) -> None:
    """Write the invocation's counts as EMF documents, one line each, to stdout (Lambda sends it to the
    function's log group, where CloudWatch reads the metrics). Called after the log queue is drained
    (common/runtime/handler.py), in one write per line, so no log line splits a document. Never raises."""
    counts = dict(_COUNTS)
    _COUNTS.clear()
    if not counts:
        return
    try:
        out = stream or sys.stdout
        for document in metric_documents(counts):
            out.write(json.dumps(document, separators=(",", ":")) + "\n")
        out.flush()
    except Exception as exc:
        log.warning("outcome metrics not written", extra={"reason": type(exc).__name__})


def metric_documents(counts: Mapping[tuple[str, str, str], int]) -> list[dict[str, Any]]:
    """One EMF document per environment for the plain counts ({Environment}), and one per quarantine
    reason kind, whose count is in both {Environment} and {Environment, Reason}. An EMF document's
    dimension sets apply to every metric in it and a key has one value, so each Reason needs its own."""
    from aws_lambda_powertools.metrics import EphemeralMetrics, MetricUnit

    groups: dict[tuple[str, str], dict[str, int]] = {}
    for (metric, env, kind), count in counts.items():
        groups.setdefault((env, kind), {})[metric] = count
    documents = []
    for (env, kind), metrics in sorted(groups.items()):
        # service '': no "service" dimension (powertools adds one when it knows a service name).
        emf = EphemeralMetrics(namespace=NAMESPACE, service="")
        emf.add_dimension(ENVIRONMENT, env)
        for name, count in sorted(metrics.items()):
            emf.add_metric(name=name, unit=MetricUnit.Count, value=count)
        if kind:
            emf.add_dimensions(**{ENVIRONMENT: env, REASON: kind})
        documents.append(dict(emf.serialize_metric_set()))
    return documents
