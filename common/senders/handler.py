"""The sender core shared by ack-sender, forward-sender and reply-sender.

Per SQS record: the queue message, parsed once for the whole batch (following a claim check) ->
exactly once per idempotency key (aws-lambda-powertools idempotency, DynamoDB) -> skip suppressed
recipients -> pace to the shared SES rate -> SESv2 SendEmail (raw content) with retries at
0/5/30/120 s inside the invocation's time budget.
A failed record is reported in ``batchItemFailures`` (the others are not re-sent); on its last
allowed receive the owner is alerted before SQS moves it to the DLQ with its body intact.
Senders differ only in configuration (queue, attachment prefix), never by message type.

What a send costs on AWS: the idempotency PutItem, SendEmail and the completion UpdateItem,
which also records the send (common.senders.idempotency); the suppression list is read once per
batch (one BatchGetItem, at the batch's first send) and the rate limit is claimed once per batch
(one conditional write, common.senders.ratelimit). A batch of duplicates reads and claims nothing.
"""

from __future__ import annotations

import functools
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from common.aws import error_code, ses, sqs
from common.errors import EmailHandlerError, EventError
from common.mail import build, encrypt
from common.mail.encrypt import OwnerKeyError
from common.mail.outbound import OutboundMessage
from common.runtime import events, outcomes
from common.runtime.addresses import sending
from common.runtime.config import SenderConfig, dlq_name
from common.runtime.events import SqsRecord
from common.runtime.log import bind, get_logger
from common.senders.idempotency import send_exactly_once
from common.senders.ratelimit import BatchPacer, RateLimiter
from common.senders.status import SendStatus
from common.store import alerts, forgotten, holds, layout, rawmail, sendqueue, sendstatus

if TYPE_CHECKING:  # pragma: no cover
    from email.message import EmailMessage

    from aws_lambda_powertools.utilities.typing import LambdaContext

    from common.mail.encrypt import OwnerKey

log = get_logger("sender")
MAX_DELAY_S = 900
DAILY_QUOTA = "DailyQuotaExceeded"
SANDBOX_HELD = "SandboxHeld"
# The owner's own words to a contact (common/reply/handler.py): kept as sent under sent/<cid>/.
OWNER_WORDS = frozenset({"reply", "new"})


class SendFailedError(EmailHandlerError):
    """``permanent``: retrying cannot help (a message that cannot be built, a send SES refuses for
    good), so the message goes to the DLQ at once instead of after every receive."""

    def __init__(self, code: str, attempts: int, detail: str = "", permanent: bool = False) -> None:
        super().__init__(f"{code} after {attempts} attempt(s){': ' + detail if detail else ''}")
        self.code, self.attempts, self.detail, self.permanent = code, attempts, detail, permanent


class QuotaUsedUpError(SendFailedError):
    """SES's daily quota is used up: the message waits for room instead of being retried (and counted)."""

    def __init__(self, attempts: int, detail: str) -> None:
        super().__init__(DAILY_QUOTA, attempts, detail)


class SandboxHeldError(SendFailedError):
    """SES's sandbox refused the send: a recipient is not verified and the account has no production
    access. The message waits (``SANDBOX_WAIT_SECONDS``) and goes out by itself once the recipient is
    verified or production access is granted; it is never dead-lettered for it."""

    def __init__(self, attempts: int, refused: list[str]) -> None:
        super().__init__(
            SANDBOX_HELD,
            attempts,
            f"SES is in the sandbox and {', '.join(refused)} is not verified: the message waits until "
            "it is, or until production access (email-handler ses request-production-access)",
        )
        self.refused = refused


# What a send SES accepted is, by sender (common/runtime/outcomes.py); a forward's outcome was reported
# when inbound-handler queued it, and the owner's notices and digests are none of a mail's outcomes.
SENT_OUTCOMES = {"ack-sender": outcomes.Outcome.ACKED, "reply-sender": outcomes.Outcome.REPLIED}


def handle(cfg: SenderConfig, event: Any, context: LambdaContext) -> dict[str, Any]:
    """An SQS batch with partial failures: the records that raised are reported in
    ``batchItemFailures`` and come back; the others are deleted ("Handling errors for an SQS event
    source in Lambda", https://docs.aws.amazon.com/lambda/latest/dg/services-sqs-errorhandling.html).
    The loop is ours rather than powertools' BatchProcessor, whose import (asyncio, every event data
    class) was a fifth of a sender's cold start (docs/decisions.md, "Sender cold start")."""
    records = events.sqs_records(event)  # a clear EventError for anything that is not an SQS batch
    sender = Sender(cfg, context, records)
    failures = []
    for record in records:
        try:
            sender.process(record)
        except Exception:
            failures.append({"itemIdentifier": record.message_id})
    sender.finish()
    return {"batchItemFailures": failures}


def _recipients(doc: Any) -> list[str]:
    """The recipients a parsed queue body names ([] for a claim check or anything unreadable: load()
    judges it)."""
    to = doc.get("to") if isinstance(doc, dict) else None
    return [a for a in to if isinstance(a, str)] if isinstance(to, list) else []


def _checked_keys(doc: Any) -> list[str]:
    """The suppression-table keys a parsed queue body is checked against: its recipients and the
    forget items of its recipients and conversation (common/store/forgotten.py)."""
    to = _recipients(doc)
    cid = doc.get("conversation_id") if isinstance(doc, dict) else ""
    return [*to, *forgotten.keys(to, cid if isinstance(cid, str) else "")]


def _parsed(body: str) -> Any:
    """A body's JSON, or the EventError that says why it has none (raised when its record is processed)."""
    try:
        return sendqueue.parse(body)
    except EventError as exc:
        return exc


class Sender:
    """One invocation's batch: its records share one suppression read and one rate-limit window."""

    def __init__(
        self, cfg: SenderConfig, context: LambdaContext, records: list[SqsRecord] | None = None
    ) -> None:
        self.cfg, self.context = cfg, context
        self.prefix = layout.SENDER_ATTACHMENTS.get(cfg.function, "")
        # Each body is parsed here, once: the batch's recipients come from it, and process() loads it.
        docs = [_parsed(r.body) for r in records or []]
        self._docs = {id(r): doc for r, doc in zip(records or [], docs, strict=True)}
        self.batch = [_checked_keys(doc) for doc in docs]
        self.records_left = len(self.batch)
        self._entries: dict[str, dict[str, Any]] = {}
        self._checked: set[str] = set()  # lowercased addresses whose suppression-table item was read
        self.limiter = _limiter(cfg.send_status_table, cfg.max_send_rate)
        self.quota_used_up = False
        self.pacer = BatchPacer(self.limiter)
        self.sent_ms = 0  # the record in hand's SQS SentTimestamp (0: unknown)

    def finish(self) -> None:
        """After the batch: give back the rate-limit time it claimed and did not use, if still ahead."""
        self.pacer.finish()

    def remaining_s(self) -> float:
        get = getattr(self.context, "get_remaining_time_in_millis", None)
        return get() / 1000 if callable(get) else float("inf")

    def process(self, record: SqsRecord) -> dict[str, Any]:
        """One record; raising marks it failed (:func:`handle` reports it in ``batchItemFailures``)."""
        from aws_lambda_powertools.utilities.idempotency.exceptions import IdempotencyAlreadyInProgressError

        receive_count = record.receive_count or 1
        bind(sqs_message_id=record.message_id, receive_count=receive_count)
        self.records_left = max(0, self.records_left - 1)  # the records after this one
        msg: OutboundMessage | None = None
        try:
            doc = self._docs.pop(id(record)) if id(record) in self._docs else _parsed(record.body)
            if isinstance(doc, EventError):
                raise doc
            msg = sendqueue.load(doc, self.cfg.bucket)
            bind(correlation_id=msg.correlation_id, idempotency_key=msg.idempotency_key, kind=msg.kind)
            self.sent_ms = int(str(record.attributes.get("SentTimestamp") or 0) or 0)
            result = self.deliver(msg)
            if result.get("status") == SendStatus.SENT and self.cfg.function in SENT_OUTCOMES:
                self._report(SENT_OUTCOMES[self.cfg.function], msg, result)
            return result
        except IdempotencyAlreadyInProgressError:
            # Another copy is sending this key right now: not a failure of the send, so no alert even
            # on the last receive (a DLQ copy of a key that then completes is skipped on redrive).
            raise
        except QuotaUsedUpError as exc:
            return self._wait(
                record, receive_count, exc, self.cfg.quota_wait_s, "send waiting for daily quota"
            )
        except SandboxHeldError as exc:
            if msg is not None:
                self._held_in_sandbox(msg, exc)
            sandbox_s = self.cfg.sandbox_wait_s
            return self._wait(record, receive_count, exc, sandbox_s, "send waiting for the sandbox")
        except Exception as exc:
            failure = (
                exc
                if isinstance(exc, SendFailedError)
                else SendFailedError(
                    "InvalidMessage"
                    if isinstance(exc, EventError)
                    else (error_code(exc) or type(exc).__name__),
                    0,
                    str(exc),
                    permanent=isinstance(exc, EventError),
                )
            )
            if failure.permanent:
                sqs.send(
                    dlq_name(self.cfg.send_queue),
                    record.body,
                    {"errorCode": failure.code[:256], "detail": failure.detail[:1024] or "-"},
                )
                self._final_failure_check(receive_count, msg, failure)
                return {
                    "status": SendStatus.DEAD_LETTERED,
                    "errorCode": failure.code,
                }  # done with: deleted from the queue
            self._final_failure_check(receive_count, msg, failure)
            raise

    def forgotten(self, msg: OutboundMessage) -> bool:
        """Whether `email-handler forget` cancelled this message: it was enqueued (SQS SentTimestamp)
        before its recipient or its conversation was forgotten (common/store/forgotten.py). Read with
        the batch's suppression entries; the result, which names no one, completes the idempotency key,
        so a later copy is skipped as a duplicate."""
        checked = forgotten.keys(msg.to, msg.conversation_id)
        entries = self.recipient_entries([*msg.to, *checked])
        if not any(forgotten.cancels(entries.get(k), self.sent_ms) for k in checked):
            return False
        log.warning("send cancelled", extra={"reason": "its contact was forgotten (email-handler forget)"})
        return True

    def _wait(
        self, record: SqsRecord, receive_count: int, exc: SendFailedError, wait_s: int, what: str
    ) -> dict[str, Any]:
        """Keep the message out of sight for ``wait_s`` (ChangeMessageVisibility) and report it failed, so
        it comes back when the rolling 24-hour window may have room (``QUOTA_WAIT_SECONDS``) or the sandbox
        may let it through (``SANDBOX_WAIT_SECONDS``). On its last allowed receive a fresh copy (receive
        count 1, SQS's longest delay) replaces it: waiting never sends a message to the DLQ. The
        idempotency key makes the copy send once."""
        queue = self.cfg.send_queue
        if receive_count >= self.cfg.max_receive_count:
            # DelaySeconds is at most 15 minutes (SQS API reference, SendMessage,
            # https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessage.html).
            attributes = {
                k: str(v["stringValue"])
                for k, v in record.message_attributes.items()
                if isinstance(v, dict) and v.get("stringValue") is not None
            }  # correlation id, kind
            sqs.send(queue, record.body, attributes, delay_s=MAX_DELAY_S)
            log.warning(
                what,
                extra={
                    "detail": exc.detail,
                    "wait_s": MAX_DELAY_S,
                    "receive_count": receive_count,
                    "requeued": True,
                },
            )
            return {
                "status": SendStatus.REQUEUED,
                "errorCode": exc.code,
            }  # this copy is deleted; the new one waits
        sqs.hide(queue, record.receipt_handle, wait_s)
        log.warning(
            what,
            extra={
                "detail": exc.detail,
                "wait_s": wait_s,
                "receive_count": receive_count,
                "requeued": False,
            },
        )
        raise exc

    def _report(
        self, outcome: outcomes.Outcome, msg: OutboundMessage | None, result: dict[str, Any], reason: str = ""
    ) -> None:
        """A send's outcome, once stored (SES's answer in the idempotency record, the hold or the failure
        in the send record): from the public address it goes out from, to the contact."""
        about = outcomes.Mail(
            str(result.get("sesMessageId") or ""),
            msg.conversation_id if msg else "",
            msg.correlation_id if msg else "",
            (msg.from_address or self.cfg.public_email) if msg else "",
            {"bytes": int(result["bytes"])} if "bytes" in result else {},
            contact=msg.to[0] if msg else "",
            subject=msg.subject if msg else "",
        )
        outcomes.record(self.cfg, outcome, about, reason)

    def _held_in_sandbox(self, msg: OutboundMessage, exc: SandboxHeldError) -> None:
        """The send record says why the message waits; the first time a message is held it is reported
        (common/runtime/outcomes.py) and, when it is to someone other than the owner, the owner is told
        at once (a notice on the forward queue, sent once by its idempotency key). A held forward to the
        owner tells no one: it could not reach them either."""
        sendstatus.record_attempts(
            self.cfg,
            msg.correlation_id,
            exc.attempts,
            "held",
            recipient=msg.to[0],
            kind=msg.kind,
            lastError=SANDBOX_HELD,
            heldReason=exc.detail,
        )
        first = sendstatus.first_hold(self.cfg, msg.correlation_id)
        if first:
            self._report(outcomes.Outcome.HELD, msg, {}, SANDBOX_HELD)
        if {a.lower() for a in exc.refused} <= self.cfg.owner_addresses or not self.cfg.private_email:
            log.warning("send held by the sandbox", extra={"recipient": exc.refused, "notice": False})
            return
        if not first:
            return
        notice = sandbox_notice(self.cfg, msg, exc.refused)  # a few hundred bytes: never a claim check
        # Through forward-sender, the one sender that holds the owner's key: every mail to the owner is
        # encrypted to it when one is configured (docs/owner.md), and this sender may not have it.
        sqs.send(
            self.cfg.forward_queue,
            notice.to_json(),
            {"correlation_id": notice.correlation_id, "kind": "notice"},
        )
        log.warning("send held by the sandbox", extra={"recipient": exc.refused, "notice": True})

    def deliver(self, msg: OutboundMessage) -> dict[str, Any]:
        from aws_lambda_powertools.utilities.idempotency.exceptions import IdempotencyAlreadyInProgressError

        send_once = _idempotent(self.cfg)
        send_once.idempotency_config.register_lambda_context(self.context)
        try:
            # The message itself: powertools' idempotent_function takes a dataclass and reads the key
            # from its dict form (powertools docs, Idempotency, "Output serialization" and
            # "idempotent_function decorator"), so it is neither serialised nor parsed again here.
            result: dict[str, Any] = send_once(message=msg, sender=self)
        except IdempotencyAlreadyInProgressError:
            # Another delivery of this key is sending right now: fail this copy; when SQS returns
            # it, the key is either completed (skipped) or its in-progress window expired (resumed).
            log.warning("send deferred", extra={"reason": "same idempotency key in progress elsewhere"})
            raise
        return result

    def recipient_entries(self, addresses: list[str]) -> dict[str, dict[str, Any]]:
        """Suppression-table items of ``addresses`` (suppressions, holds), by lowercased address. The
        first call reads them for every recipient of the batch in one BatchGetItem; a later one reads
        only what that missed (a claim check's recipients)."""
        asked = {a.lower() for a in addresses}
        if not asked <= self._checked:
            wanted = asked | ({a.lower() for to in self.batch for a in to} if not self._checked else set())
            missing = wanted - self._checked
            self._entries |= sendstatus.recipient_entries(self.cfg, missing)
            self._checked |= missing
        return {a: self._entries[a] for a in asked if a in self._entries}

    def send_unless_suppressed(self, msg: OutboundMessage) -> dict[str, Any]:
        """Inside the idempotent section, so a duplicate delivery costs one conditional write and no
        lookups."""
        if self.forgotten(msg):
            return {"status": SendStatus.CANCELLED, "correlationId": msg.correlation_id, "kind": msg.kind}
        entries = self.recipient_entries(msg.to)
        allowed = []
        for addr in msg.to:
            entry = entries.get(addr.lower())
            if holds.is_held(entry):  # the owner's mailbox bounced: keep the message queued, never drop it
                if not holds.claim_probe(self.cfg, addr):
                    raise SendFailedError(
                        holds.HELD,
                        0,
                        f"mail to {addr} is held ({entry.get('heldReason')}) "
                        "until a delivery or `email-handler suppression remove`",
                    )
                log.warning(
                    "held recipient probed", extra={"recipient": addr, "reason": entry.get("heldReason")}
                )
            if entry and sendstatus.is_suppressed(self.cfg, entry):
                log.warning(
                    "recipient skipped",
                    extra={"recipient": addr, "reason": f"suppressed: {entry.get('reason')}"},
                )
            else:
                allowed.append(addr)
        record = {"correlationId": msg.correlation_id, "kind": msg.kind, "recipients": msg.to}
        # SES feedback about this send finds which conversation and public address it was for from
        # this record alone (the owner's complaint about a forward: common/inbound/spamblock.py).
        record |= {"conversationId": msg.conversation_id, "fromAddress": msg.from_address}
        if not allowed:
            return {"status": SendStatus.SUPPRESSED, **record}
        return {**self.send_with_retries(replace(msg, to=allowed)), **record}

    def send_with_retries(self, msg: OutboundMessage) -> dict[str, Any]:

        sender = sending(self.cfg, msg.from_address)  # a public address this deployment serves, or refused
        built = build.build(msg, sender, self.cfg.domain_name, self.prefix, self._fetch)
        raw = self._encrypted_for_owner(msg, built).as_bytes()
        ses.prepare()  # a cold client costs ~100 ms: pay it before taking a rate slot, not inside it
        attempts, code = 0, ""
        if self.quota_used_up:  # an earlier record of this batch met the daily quota: no call can succeed now
            raise QuotaUsedUpError(0, "SES's daily quota was used up earlier in this batch")
        for delay in self.cfg.retry_delays:
            if delay and self.remaining_s() - delay < self.cfg.attempt_reserve_s:
                raise SendFailedError(
                    code,
                    attempts,
                    f"no time left for a retry in {delay:g}s "
                    f"({self.remaining_s():.1f}s remaining); SQS will redeliver",
                )
            if delay:  # sleep(0) still yields the CPU: on a busy host that costs a scheduler slice
                time.sleep(delay)
            slot, start = self.pacer.next_start(1 + self.records_left, after_pause=attempts > 0)
            if start - time.time() > self.remaining_s() - self.cfg.attempt_reserve_s:
                raise SendFailedError(
                    code or "RateLimited", attempts, "rate-limit slot is beyond the time budget"
                )
            self.limiter.wait_until(start)
            self.pacer.started(time.time())
            attempts += 1
            try:
                ses_id = ses.send_raw(raw, sender, msg.to, self.cfg.ses_configuration_set)
            except Exception as exc:
                if ses.daily_quota_exceeded(exc):
                    self.quota_used_up = True
                    log.warning(
                        "send attempt failed",
                        extra={"attempt": attempts, "error_code": DAILY_QUOTA, "retryable": False},
                    )
                    raise QuotaUsedUpError(attempts, str(exc)) from None
                code = error_code(exc) or type(exc).__name__
                if code == "MessageRejected" and (refused := _sandbox_refused(msg.to)):
                    # SES says so: the sandbox, an unverified recipient (asked only after a refusal)
                    raise SandboxHeldError(attempts, refused) from None
                retryable = code in ses.RETRYABLE or not error_code(exc)  # no code: connection-level error
                log.warning(
                    "send attempt failed",
                    extra={"attempt": attempts, "error_code": code, "retryable": retryable},
                )
                if not retryable:
                    raise SendFailedError(code, attempts, "not retryable", permanent=True) from None
                continue
            log.info(
                "mail sent",
                extra={
                    "attempt": attempts,
                    "ses_message_id": ses_id,
                    "recipient": msg.to,
                    "subject": msg.subject,
                    "rate_slot": round(slot, 6),
                },
            )
            self._keep_sent(msg, ses_id, raw)
            # Recorded by the idempotency completion that follows (common.senders.idempotency).
            return {
                "status": SendStatus.SENT,
                "sesMessageId": ses_id,
                "attempts": attempts,
                "sentAt": sendstatus.now_iso(),
                "bytes": len(raw),
            }
        raise SendFailedError(code, attempts, "retries exhausted")

    def _keep_sent(self, msg: OutboundMessage, ses_id: str, raw: bytes) -> None:
        """The owner's reply as SES took it, beside the contact's mails (``email-handler export`` gives
        both). After the send, never before: an archived reply was sent. A failed write is logged and
        the send stands: raising here would send the reply again (the idempotency key is released)."""
        if (
            self.cfg.function not in layout.KEEPS_SENT
            or msg.kind not in OWNER_WORDS
            or not msg.conversation_id
        ):
            return

        try:
            rawmail.keep_sent(self.cfg.bucket, msg.conversation_id, ses_id, raw)
        except Exception as exc:
            log.error(
                "sent reply not archived",
                extra={"ses_message_id": ses_id, "error": f"{type(exc).__name__}: {exc}"},
            )

    def _encrypted_for_owner(self, msg: OutboundMessage, built: EmailMessage) -> EmailMessage:
        """Mail to our own mailboxes, each encrypted to its recipient's own key: the owner's mailboxes to
        the owner's key, an address's own mailbox (``forward_to``) to the key MAILBOX_KEYS gave it, never
        one mailbox's mail to another's key (a message to several mailboxes is encrypted only when they
        are all the owner's). Here, inside the idempotent send, so a retry re-encrypts the same message
        and the queue and S3 never hold a second copy; a forward cut to the size budget
        (common/delivery/compose.py) fits once encrypted. A forward that hides its correspondent is
        never sent in clear: without a key it fails for good (dead-lettered, the owner alerted) instead
        of showing the provider who wrote."""
        to = {a.lower() for a in msg.to}
        whose = ""  # the owner's key
        if not (self.cfg.encrypts_to_owner and to <= self.cfg.owner_addresses):
            whose = next(iter(to)) if len(to) == 1 and self.cfg.has_key(next(iter(to))) else ""
            if not whose or whose in self.cfg.owner_addresses:
                if msg.hide_correspondent:
                    raise SendFailedError(
                        "HideNeedsEncryption",
                        0,
                        "hide_correspondent needs the mail encrypted to its mailbox's key, and "
                        + ("a recipient has no key" if len(to) == 1 else "it has several mailboxes"),
                        permanent=True,
                    )
                return built
        text = self.cfg.mailbox_key(whose) if whose else self.cfg.owner_key
        if not text:  # never send a keyed mailbox's mail in clear
            raise SendFailedError(
                "OwnerKeyMissing",
                0,
                f"this sender has no key for {'mailbox ' + whose if whose else 'the owner'} ("
                f"{self.cfg.mailbox_key_parameter(whose) if whose else self.cfg.owner_key_parameter})",
            )
        try:
            key = _owner_key(text, whose)
            key.check()  # a key may expire while a sandbox is warm
        except OwnerKeyError as exc:
            raise SendFailedError("OwnerKeyUnusable", 0, str(exc)) from None
        encrypted = encrypt.encrypt(built, key, self.cfg.encrypted_subject, msg.hide_correspondent)
        log.info(
            "mail encrypted to the owner" if not whose else "mail encrypted to the mailbox's key",
            extra={
                "key_kind": key.kind,
                "fingerprint": key.fingerprint,
                "hide_correspondent": msg.hide_correspondent,
                "key_of": "mailbox" if whose else "owner",
            },
        )
        return encrypted

    def _fetch(self, key: str) -> bytes:
        data = sendqueue.attachment(self.cfg.bucket, key)
        if data is None:
            raise EventError(f"attachment {key} is missing from the bucket")
        return data

    def _final_failure_check(
        self, receive_count: int, msg: OutboundMessage | None, exc: SendFailedError
    ) -> None:
        recipient = msg.to[0] if msg else "(unreadable message)"
        total = exc.attempts
        final = exc.permanent or receive_count >= self.cfg.max_receive_count
        if msg is not None:
            try:
                total = int(
                    sendstatus.record_attempts(
                        self.cfg,
                        msg.correlation_id,
                        exc.attempts,
                        "failed",
                        recipient=recipient,
                        kind=msg.kind,
                        lastError=exc.code,
                        finalFailure=final,  # in the DLQ: what `email-handler stats` counts as send-failed
                    ).get("attempts", 0)
                )
            except Exception as record_error:  # the alert below matters more than the record
                log.error(
                    "send record not updated",
                    extra={"error": f"{type(record_error).__name__}: {record_error}"},
                )
        log.error(
            "send failed",
            extra={
                "error_code": exc.code,
                "detail": exc.detail,
                "attempts": exc.attempts,
                "total_attempts": total,
                "recipient": recipient,
                "receive_count": receive_count,
                "final": final,
                "permanent": exc.permanent,
            },
        )
        if final:
            subject = f"Send failed permanently ({self.cfg.send_queue})"
            alert = {
                "alert": "send-failed",
                "queue": self.cfg.send_queue,
                "recipient": recipient,
                "errorCode": exc.code,
                "totalAttempts": total,
                "detail": exc.detail,
                "correlationId": msg.correlation_id if msg else "",
                "dlq": dlq_name(self.cfg.send_queue),
                "original": f"s3://{self.cfg.bucket}/{msg.original_key}" if msg and msg.original_key else "",
            }
            # One alert per queue and error code an hour: a flood of held forwards or of messages that can
            # never be sent costs the owner one mail, and the DLQ keeps every message.
            alerts.publish_throttled(
                self.cfg, f"send-failed#{self.cfg.send_queue}#{exc.code}", subject, alert
            )
            self._report(outcomes.Outcome.SEND_FAILED, msg, {}, exc.code)


def _sandbox_refused(recipients: list[str]) -> list[str]:
    """The recipients SES's sandbox refuses; [] (the refusal stands as it is) when SES cannot say."""
    try:
        return ses.sandbox_refused(recipients)
    except Exception as exc:
        log.warning("sandbox not checked", extra={"error": f"{type(exc).__name__}: {exc}"})
        return []


def sandbox_notice(cfg: SenderConfig, held: OutboundMessage, refused: list[str]) -> OutboundMessage:
    """The owner's notice that a message waits for the sandbox: what, to whom, why, and what happens next."""
    who = ", ".join(refused)
    return OutboundMessage(
        kind="notice",
        idempotency_key=f"sandbox-notice:{held.idempotency_key}",
        correlation_id=f"sandbox-notice-{held.correlation_id}",
        to=[cfg.private_email],
        subject=f"Not sent yet: {held.subject}"[:200],
        text=(
            f"Your {held.kind} to {who} (subject: {held.subject}) has not gone out yet.\n\n"
            f"Amazon SES is in the sandbox for this account: it sends only to verified addresses, and {who} "
            "is not one. The message is kept. It goes out by itself, once, when AWS grants production "
            "access (email-handler ses request-production-access) or when that address is verified.\n"
        ),
        headers={"Auto-Submitted": "auto-generated"},
        conversation_id=held.conversation_id,
        from_name=cfg.public_name,
    )


@functools.cache
def _owner_key(text: str, whose: str = "") -> OwnerKey:
    """Parsed once per sandbox (with_owner_key and with_mailbox_keys checked it at cold start)."""

    return encrypt.parse(text, whose=whose)


@functools.cache
def _limiter(table: str, rate: float) -> RateLimiter:
    """One per sandbox: it remembers the last TAT it saw and how fast this instance sends."""
    return RateLimiter(table, rate)


@functools.cache
def _idempotent(cfg: SenderConfig) -> Any:
    """The idempotent send for this configuration (built once per sandbox)."""

    def send_once(message: OutboundMessage, sender: Sender) -> dict[str, Any]:
        return sender.send_unless_suppressed(message)

    return send_exactly_once(cfg, send_once)
