"""The sender core shared by ack-sender, forward-sender and reply-sender.

Per SQS record: load the queue message (following a claim check) -> exactly once per idempotency
key (aws-lambda-powertools idempotency, DynamoDB) -> skip suppressed recipients -> pace to the
shared SES rate -> SESv2 SendEmail (raw content) with retries at 0/5/30/120 s inside the invocation's time budget.
A failed record is reported in ``batchItemFailures`` (the others are not re-sent); on its last
allowed receive the owner is alerted before SQS moves it to the DLQ with its body intact.
Senders differ only in configuration (queue, attachment prefix), never by message type.
"""

from __future__ import annotations

import functools
import time
from typing import TYPE_CHECKING, Any, cast

from common.aws import error_code, s3, ses, sqs
from common.runtime import events
from common.runtime.config import Config
from common.runtime.errors import EventError
from common.runtime.functions import SENDERS, dlq_name
from common.runtime.log import bind, get_logger
from common.store import layout

if TYPE_CHECKING:  # pragma: no cover
    from aws_lambda_powertools.utilities.idempotency.hook import IdempotentHookFunction
    from aws_lambda_powertools.utilities.typing import LambdaContext
from common.store import alerts, holds, sendstatus
from common.store.sendqueue import OutboundMessage, load

log = get_logger("sender")


class SendFailed(Exception):
    """``permanent``: retrying cannot help (a message that cannot be built, a send SES refuses for
    good), so the message goes to the DLQ at once instead of after every receive (issue 17.2, 18 S8)."""

    def __init__(self, code: str, attempts: int, detail: str = "", permanent: bool = False) -> None:
        super().__init__(f"{code} after {attempts} attempt(s){': ' + detail if detail else ''}")
        self.code, self.attempts, self.detail, self.permanent = code, attempts, detail, permanent


def handle(cfg: Config, event: Any, context: LambdaContext) -> dict[str, Any]:
    from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response

    events.sqs_records(event)  # a clear EventError for anything that is not an SQS batch
    sender = Sender(cfg, context)
    processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
    return dict(process_partial_response(event=event, record_handler=sender.process, processor=processor, context=context))


class Sender:
    def __init__(self, cfg: Config, context: LambdaContext) -> None:
        self.cfg, self.context = cfg, context
        function = next((f.name for f in SENDERS if getattr(cfg, f.queue_field) == cfg.send_queue), "")
        self.prefix = layout.SENDER_ATTACHMENTS.get(function, "")

    def remaining_s(self) -> float:
        get = getattr(self.context, "get_remaining_time_in_millis", None)
        return get() / 1000 if callable(get) else float("inf")

    def process(self, record: Any) -> dict[str, Any]:
        """Powertools calls this per record; raising marks the record failed."""
        from aws_lambda_powertools.utilities.idempotency.exceptions import IdempotencyAlreadyInProgressError

        receive_count = int(record.attributes.approximate_receive_count or 1)
        bind(sqs_message_id=record.message_id, receive_count=receive_count)
        msg: OutboundMessage | None = None
        try:
            msg = load(record.body, self.cfg.bucket)
            bind(correlation_id=msg.correlation_id, idempotency_key=msg.idempotency_key, kind=msg.kind)
            return self.deliver(msg)
        except IdempotencyAlreadyInProgressError:
            # Another copy is sending this key right now: not a failure of the send, so no alert even
            # on the last receive (a DLQ copy of a key that then completes is skipped on redrive).
            raise
        except Exception as exc:
            failure = exc if isinstance(exc, SendFailed) else SendFailed(
                "InvalidMessage" if isinstance(exc, EventError) else (error_code(exc) or type(exc).__name__),
                0, str(exc), permanent=isinstance(exc, EventError))
            if failure.permanent:
                sqs.send(dlq_name(self.cfg.send_queue), record.body, {"errorCode": failure.code[:256],
                                                                      "detail": failure.detail[:1024] or "-"})
                self._final_failure_check(receive_count, msg, failure)
                return {"status": "dead-lettered", "errorCode": failure.code}  # done with: deleted from the queue
            self._final_failure_check(receive_count, msg, failure)
            raise

    def deliver(self, msg: OutboundMessage) -> dict[str, Any]:
        from aws_lambda_powertools.utilities.idempotency.exceptions import IdempotencyAlreadyInProgressError

        send_once = _idempotent(self.cfg)
        send_once.idempotency_config.register_lambda_context(self.context)
        try:
            result: dict[str, Any] = send_once(message=_as_doc(msg), sender=self)
        except IdempotencyAlreadyInProgressError:
            # Another delivery of this key is sending right now: fail this copy; when SQS returns
            # it, the key is either completed (skipped) or its in-progress window expired (resumed).
            log.warning("send deferred", extra={"reason": "same idempotency key in progress elsewhere"})
            raise
        return result

    def send_unless_suppressed(self, msg: OutboundMessage) -> dict[str, Any]:
        """Inside the idempotent section, so a duplicate delivery costs one conditional write and no lookups."""
        allowed = []
        for addr in msg.to:
            entry = sendstatus.recipient_entry(self.cfg, addr)
            if holds.is_held(entry):  # the owner's mailbox bounced: keep the message queued, never drop it
                if not holds.claim_probe(self.cfg, addr):
                    raise SendFailed(holds.HELD, 0, f"mail to {addr} is held ({entry.get('heldReason')}) "
                                                    "until a delivery or `email-handler suppression remove`")
                log.warning("held recipient probed", extra={"recipient": addr, "reason": entry.get("heldReason")})
            if entry and sendstatus.is_suppressed(self.cfg, entry):
                log.warning("recipient skipped", extra={"recipient": addr, "reason": f"suppressed: {entry.get('reason')}"})
            else:
                allowed.append(addr)
        if not allowed:
            sendstatus.record_attempts(self.cfg, msg.correlation_id, 0, "suppressed", recipient=msg.to[0], kind=msg.kind)
            return {"status": "suppressed"}
        msg.to = allowed
        return self.send_with_retries(msg)

    def send_with_retries(self, msg: OutboundMessage) -> dict[str, Any]:
        from common.mail.build import build

        raw = build(msg, self.cfg.public_email, self.cfg.domain_name, self.prefix, self._fetch).as_bytes()
        limiter = _limiter(self.cfg.send_status_table, self.cfg.max_send_rate)
        ses.prepare()  # a cold client costs ~100 ms: pay it before claiming a rate slot, not inside it
        attempts, code = 0, ""
        for delay in self.cfg.retry_delays:
            if delay and self.remaining_s() - delay < self.cfg.attempt_reserve_s:
                raise SendFailed(code, attempts, f"no time left for a retry in {delay:g}s "
                                                 f"({self.remaining_s():.1f}s remaining); SQS will redeliver")
            time.sleep(delay)
            start = limiter.reserve()
            if start - time.time() > self.remaining_s() - self.cfg.attempt_reserve_s:
                raise SendFailed(code or "RateLimited", attempts, "rate-limit slot is beyond the time budget")
            limiter.wait_until(start)
            attempts += 1
            try:
                ses_id = ses.send_raw(raw, self.cfg.public_email, msg.to, self.cfg.ses_configuration_set)
            except Exception as exc:
                code = error_code(exc) or type(exc).__name__
                retryable = code in ses.RETRYABLE or not error_code(exc)  # no code: connection-level error
                log.warning("send attempt failed", extra={"attempt": attempts, "error_code": code, "retryable": retryable})
                if not retryable:
                    raise SendFailed(code, attempts, "not retryable", permanent=True) from None
                continue
            log.info("mail sent", extra={"attempt": attempts, "ses_message_id": ses_id, "recipient": msg.to,
                                         "subject": msg.subject, "rate_slot": round(start, 6)})
            sendstatus.record_attempts(self.cfg, msg.correlation_id, attempts, "sent", recipient=msg.to[0],
                                        kind=msg.kind, sesMessageId=ses_id, sentAt=sendstatus.now_iso())
            return {"status": "sent", "sesMessageId": ses_id, "attempts": attempts}
        raise SendFailed(code, attempts, "retries exhausted")

    def _fetch(self, key: str) -> bytes:
        obj = s3.get(self.cfg.bucket, key)
        if obj is None:
            raise EventError(f"attachment {key} is missing from the bucket")
        return bytes(obj["Body"].read())

    def _final_failure_check(self, receive_count: int, msg: OutboundMessage | None, exc: SendFailed) -> None:
        recipient = msg.to[0] if msg else "(unreadable message)"
        total = exc.attempts
        if msg is not None:
            try:
                total = int(sendstatus.record_attempts(self.cfg, msg.correlation_id, exc.attempts, "failed",
                                                        recipient=recipient, kind=msg.kind,
                                                        lastError=exc.code).get("attempts", 0))
            except Exception as record_error:  # the alert below matters more than the record
                log.error("send record not updated", extra={"error": f"{type(record_error).__name__}: {record_error}"})
        final = exc.permanent or receive_count >= self.cfg.max_receive_count
        log.error("send failed", extra={"error_code": exc.code, "detail": exc.detail, "attempts": exc.attempts,
                                        "total_attempts": total, "recipient": recipient, "receive_count": receive_count,
                                        "final": final, "permanent": exc.permanent})
        if final:
            subject = f"Send failed permanently ({self.cfg.send_queue})"
            alert = {"alert": "send-failed", "queue": self.cfg.send_queue, "recipient": recipient,
                     "errorCode": exc.code, "totalAttempts": total, "detail": exc.detail,
                     "correlationId": msg.correlation_id if msg else "", "dlq": dlq_name(self.cfg.send_queue),
                     "original": f"s3://{self.cfg.bucket}/{msg.original_key}" if msg and msg.original_key else ""}
            # One alert per queue and error code an hour: a flood of held forwards or of messages that can
            # never be sent costs the owner one mail, and the DLQ keeps every message (issue 18 S8).
            alerts.publish_throttled(self.cfg, f"send-failed#{self.cfg.send_queue}#{exc.code}", subject, alert)


def _as_doc(msg: OutboundMessage) -> dict[str, Any]:
    import json

    return dict(json.loads(msg.to_json()))


@functools.cache
def _limiter(table: str, rate: float) -> Any:
    from common.senders.ratelimit import RateLimiter

    return RateLimiter(table, rate)


@functools.cache
def _idempotent(cfg: Config) -> Any:
    """The idempotent send for this configuration (built once per sandbox)."""
    from aws_lambda_powertools.utilities.idempotency import (
        DynamoDBPersistenceLayer,
        IdempotencyConfig,
        idempotent_function,
    )

    from common.aws import client

    persistence = DynamoDBPersistenceLayer(table_name=cfg.idempotency_table, boto3_client=client("dynamodb"))

    def replayed(response: Any, record: Any) -> Any:
        log.info("send skipped", extra={"reason": "idempotency key already completed", "previous": response})
        return {**response, "status": "duplicate"} if isinstance(response, dict) else response

    config = IdempotencyConfig(event_key_jmespath="idempotency_key", raise_on_no_idempotency_key=True,
                               expires_after_seconds=cfg.idempotency_ttl_s,
                               response_hook=cast("IdempotentHookFunction", replayed))

    @idempotent_function(data_keyword_argument="message", persistence_store=persistence, config=config,
                         key_prefix="send")
    def send_once(message: dict[str, Any], sender: Sender) -> dict[str, Any]:
        return sender.send_unless_suppressed(OutboundMessage.from_dict(message))

    send_once.idempotency_config = config
    return send_once
