"""Local SES receiving: an SMTP ingress (aiosmtpd) and ``email-handler inject``, both doing what SES's
receipt rules do on AWS.

The rules, in the order ``email-handler deploy`` creates them: mail for ``thread.<DOMAIN_NAME>`` is
stored under ``staging/<messageId>`` and handed to reply-handler; mail for every public address
(PUBLIC_EMAIL's list; the whole domain with a catch-all) and for ``thread.<DOMAIN_NAME>`` is stored
the same way and handed to inbound-handler. Any other recipient is
refused at RCPT time, as SES refuses recipients no rule matches. The hand-over is an asynchronous
invocation (SES uses InvocationType=Event): a message on the wiring's invocations queue, which the
wiring delivers one at a time per function and retries like Lambda does.

Verdicts: the ingress cannot check SPF/DKIM/DMARC, so every verdict is PASS (SES's shape, with
``inject --verdict`` to set others). Never expose this port beyond the loopback interface.
"""

from __future__ import annotations

import asyncio
import email
import email.policy
import json
import time
from dataclasses import dataclass
from email.utils import getaddresses
from typing import Any

from common.aws import s3, sqs
from common.runtime.addresses import receiving_function
from common.runtime.log import get_logger
from common.store import layout
from deploy.config import Config
from local import events as localevents
from local.ports import SMTP_PORT
from local.provision import wiring_queue

log = get_logger("ingress")
MAX_MESSAGE_BYTES = 40 * 1024 * 1024  # SES receiving's limit, headers included


def route(cfg: Config, recipient: str) -> str | None:
    """The function SES's receipt rules would hand mail for ``recipient`` to, or None (refused)."""
    return receiving_function(cfg, recipient)  # every public address, the catch-all's too


@dataclass(frozen=True, slots=True)
class Delivery:
    message_id: str
    function: str
    recipients: tuple[str, ...]
    invocation_id: str = ""  # the asynchronous invocation's request id (its message on the wiring's queue)

    @property
    def staging_key(self) -> str:
        return layout.staging(self.message_id)


def deliver(
    cfg: Config,
    raw: bytes,
    envelope_from: str,
    recipients: list[str],
    verdicts: dict[str, str] | None = None,
    dmarc_policy: str = "",
) -> list[Delivery]:
    """Store ``raw`` as SES's S3 action would and queue the receipt rule's Lambda action.

    Every rule that matches a recipient runs, as on SES when no rule stops the rule set: a mail to
    both the public address and a thread address reaches both handlers, each with the recipients
    its rule matched (the public rule matches the thread domain too: a reply reaches inbound-handler
    as well, which leaves it to reply-handler). Recipients no rule matches are ignored here (the SMTP
    ingress refused them).
    """
    matched = [r for r in recipients if route(cfg, r)]
    if not matched:
        return []
    # The thread rule matches thread addresses; the public rule matches every public address and the
    # thread domain too (deploy/receiving.py), so inbound-handler sees every recipient of the mail.
    routed = {"inbound-handler": matched}
    if thread := [r for r in matched if route(cfg, r) == "reply-handler"]:
        routed["reply-handler"] = thread
    mid = localevents.message_id_for(raw)
    s3.put(cfg.bucket, layout.staging(mid), raw, "message/rfc822")
    deliveries = []
    for function in ("reply-handler", "inbound-handler"):  # rule order
        if function in routed:
            event = localevents.receipt_event(
                raw,
                mid,
                routed[function],
                source=envelope_from,
                verdicts=verdicts,
                dmarc_policy=dmarc_policy,
                destination=recipients_of(raw),  # as SES: the To and Cc fields, not the envelope
            )
            request_id = sqs.send(
                wiring_queue(cfg, "invocations"), json.dumps({"function": function, "event": event})
            )
            log.info(
                "mail received",
                extra={
                    "ses_message_id": mid,
                    "function": function,
                    "recipients": routed[function],
                    "size": len(raw),
                },
            )
            deliveries.append(Delivery(mid, function, tuple(routed[function]), request_id))
    return deliveries


def await_handled(cfg: Config, delivery: Delivery, timeout: float) -> dict[str, Any]:
    """Wait for the handler's outcome, as the wiring records it for each asynchronous invocation
    (Lambda's invocation record): its result, or its error as soon as one attempt failed."""

    deadline = time.monotonic() + timeout
    key = layout.local_invocation(delivery.invocation_id)
    while time.monotonic() < deadline:
        obj = s3.get(cfg.bucket, key)
        if obj is not None:
            record = json.loads(obj["Body"].read())
            return outcome(delivery, record)
        time.sleep(0.25)
    staged = s3.get(cfg.bucket, delivery.staging_key)
    if staged is not None:
        staged["Body"].close()
        return {
            "outcome": "not handled yet",
            "hint": f"no invocation of {delivery.function} within {timeout:g}s: is the wiring running "
            "(email-handler dev, or make up's wiring service)?",
        }
    return {"outcome": "handled (no invocation record: a wiring older than this CLI?)"}


def outcome(delivery: Delivery, record: dict[str, Any]) -> dict[str, Any]:
    """What ``inject`` prints for an invocation record."""
    context, payload = record.get("requestContext", {}), record.get("responsePayload")
    if context.get("condition") != "Success":
        attempt, attempts = context.get("approximateInvokeCount"), context.get("maximumAttempts")
        error = payload if isinstance(payload, dict) else {}
        retry = (
            "Lambda retries it"
            if context.get("condition") == "RetryPending"
            else "no retry left: the event is in the wiring's dead-letter queue (email-handler replay)"
        )
        return {
            "outcome": "handler failed",
            "errorType": error.get("errorType", ""),
            "errorMessage": str(error.get("errorMessage", ""))[:2000],
            "attempt": f"{attempt} of {attempts}",
            "hint": f"{retry}; the staged mail stays at {delivery.staging_key} until an attempt succeeds. "
            "See the function's log (make logs, or the dev log dir).",
        }
    result = payload if isinstance(payload, dict) else {}
    status = str(result.get("status", "handled"))
    names = {
        "forwarded": "forwarded",
        "quarantined": "quarantined",
        "dsn": "delivery status notification",
        "complaint": "abuse complaint (the owner is told)",
        "dropped": "dropped",
        "rejected": "rejected",
        "queued": "reply queued",
    }
    out: dict[str, Any] = {"outcome": names.get(status, status)}
    for field in ("key", "reason", "conversationId", "ack", "firstContact"):
        if field in result:
            out[field] = result[field]
    if status == "forwarded" and "conversationId" in result:
        out["key"] = layout.archive(str(result["conversationId"]), delivery.message_id)
    return out


def recipients_of(raw: bytes) -> list[str]:
    """To and Cc addresses of a message file (``inject`` without ``--to``)."""

    msg = email.message_from_bytes(raw, policy=email.policy.compat32)
    return [
        a for _, a in getaddresses([str(v) for k in ("To", "Cc") for v in msg.get_all(k) or []]) if "@" in a
    ]


class SesHandler:
    """aiosmtpd handler: RCPT filtered by the receipt rules, DATA delivered like SES."""

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg

    async def handle_RCPT(  # noqa: N802 (aiosmtpd's hook name)
        self,
        server: Any,
        session: Any,
        envelope: Any,
        address: str,
        rcpt_options: list[str],
    ) -> str:
        if route(self.cfg, address) is None:
            log.info("recipient refused", extra={"recipient": address, "reason": "no receipt rule matches"})
            return "550 5.1.1 Mailbox unavailable: no receipt rule matches this recipient"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802

        raw = envelope.original_content or envelope.content
        if not isinstance(raw, bytes):
            raw = str(raw).encode("utf-8", "surrogateescape")
        try:
            done = await asyncio.get_running_loop().run_in_executor(
                None, deliver, self.cfg, raw, envelope.mail_from or "", list(envelope.rcpt_tos)
            )
        except Exception as exc:
            log.error("mail not stored", extra={"error": f"{type(exc).__name__}: {exc}"})
            return "451 4.3.0 Temporary failure storing the message; try again"
        return f"250 OK {done[0].message_id}" if done else "554 5.7.1 No recipient matched a receipt rule"


class BareLfNormalizer:
    """Bare LF line ends become CRLF, as Postfix's ``smtpd_forbid_bare_newline = normalize`` does.

    Saved ``.eml`` files usually end their lines in LF alone, and ``smtplib.sendmail(frm, to, bytes)``
    sends bytes as they are: without this, aiosmtpd (which splits SMTP lines at CRLF only) sees one
    line as long as the message and answers ``500 Line too long``. As with Postfix, only
    ``<CR><LF>.<CR><LF>`` ends DATA: a lone dot with a bare LF on either side of it stays content
    (it reaches aiosmtpd dot-stuffed), so no bare-LF sequence can end a message early (the SMTP
    smuggling trick). Fed the stream in arbitrary chunks; returns what can be passed on now.
    """

    def __init__(self) -> None:
        self._held = b""  # an unfinished line's start that may still be a lone dot, or a trailing CR
        self._line_start = True  # the held bytes (or the next ones) begin a line
        self._after_bare_lf = False  # the previous line ended in a bare LF

    def feed(self, data: bytes) -> bytes:
        buffer, out, pos = self._held + data, bytearray(), 0
        while (lf := buffer.find(b"\n", pos)) >= 0:
            line, bare = buffer[pos:lf], True
            if line.endswith(b"\r"):
                line, bare = line[:-1], False
            if self._line_start and line == b"." and (bare or self._after_bare_lf):
                line = b".."  # content, not the end of DATA; aiosmtpd removes the stuffed dot
            out += line + b"\r\n"
            self._line_start, self._after_bare_lf, pos = True, bare, lf + 1
        rest = buffer[pos:]
        keep = len(rest) if self._line_start and rest in (b".", b".\r") else int(rest.endswith(b"\r"))
        if len(rest) > keep:
            self._line_start = False
        out += rest[: len(rest) - keep]
        self._held = rest[len(rest) - keep :]
        return bytes(out)


def _smtp_class() -> type:
    from aiosmtpd.smtp import SMTP

    class NormalizingSMTP(SMTP):
        """aiosmtpd's SMTP session with bare LF line ends normalised (:class:`BareLfNormalizer`)."""

        def connection_made(self, transport: Any) -> None:
            self._line_ends = BareLfNormalizer()
            super().connection_made(transport)

        def data_received(self, data: bytes) -> None:
            super().data_received(self._line_ends.feed(data))

    return NormalizingSMTP


class SmtpIngress:
    def __init__(self, cfg: Config, host: str = "127.0.0.1", port: int = SMTP_PORT) -> None:
        self.cfg, self.host, self.port = cfg, host, port
        self._controller: Any = None

    def start(self) -> SmtpIngress:
        from aiosmtpd.controller import Controller

        smtp = _smtp_class()

        class NormalizingController(Controller):
            def factory(self) -> Any:
                return smtp(self.handler, **self.SMTP_kwargs)

        self._controller = NormalizingController(
            SesHandler(self.cfg),
            hostname=self.host,
            port=self.port,
            data_size_limit=MAX_MESSAGE_BYTES,
            ident="service-email-handler local SES ingress",
        )
        self._controller.start()
        return self

    def stop(self) -> None:
        if self._controller is not None:
            self._controller.stop()
            self._controller = None
