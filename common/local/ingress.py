"""Local SES receiving: an SMTP ingress (aiosmtpd) and ``email-handler inject``, both doing what SES's
receipt rules do on AWS.

The rules, in the order ``email-handler deploy`` creates them: mail for ``thread.<DOMAIN_NAME>`` is
stored under ``staging/<messageId>`` and handed to reply-handler (and stops there); mail for
``PUBLIC_EMAIL`` is stored the same way and handed to inbound-handler. Any other recipient is
refused at RCPT time, as SES refuses recipients no rule matches. The hand-over is an asynchronous
invocation (SES uses InvocationType=Event): a message on the wiring's invocations queue, which the
wiring delivers one at a time per function and retries like Lambda does.

Verdicts: the ingress cannot check SPF/DKIM/DMARC, so every verdict is PASS (SES's shape, with
``inject --verdict`` to set others). Never expose this port beyond the loopback interface.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from email.utils import getaddresses
from typing import Any

from common.aws import s3, sqs
from common.local import events as localevents
from common.runtime.config import Config
from common.runtime.log import get_logger
from common.store import layout
from deploy import resources

log = get_logger("ingress")
MAX_MESSAGE_BYTES = 40 * 1024 * 1024  # SES receiving's limit, headers included


def route(cfg: Config, recipient: str) -> str | None:
    """The function SES's receipt rules would hand mail for ``recipient`` to, or None (refused)."""
    address = recipient.strip().strip("<>").lower()
    if address.rpartition("@")[2] == cfg.thread_domain.lower():
        return "reply-handler"
    if address == cfg.public_email.lower():
        return "inbound-handler"
    return None


@dataclass(frozen=True, slots=True)
class Delivery:
    message_id: str
    function: str
    recipients: tuple[str, ...]

    @property
    def staging_key(self) -> str:
        return layout.staging(self.message_id)


def deliver(cfg: Config, raw: bytes, envelope_from: str, recipients: list[str],
            verdicts: dict[str, str] | None = None, dmarc_policy: str = "") -> list[Delivery]:
    """Store ``raw`` as SES's S3 action would and queue the receipt rule's Lambda action.

    Recipients go to the first rule that matches any of them (thread addresses first); recipients
    no rule matches are ignored here (the SMTP ingress refused them already).
    """
    routed: dict[str, list[str]] = {}
    for r in recipients:
        function = route(cfg, r)
        if function:
            routed.setdefault(function, []).append(r)
    for function in ("reply-handler", "inbound-handler"):  # rule order; the first match stops evaluation
        if function in routed:
            mid = localevents.message_id_for(raw)
            s3.put(cfg.bucket, layout.staging(mid), raw, "message/rfc822")
            event = localevents.receipt_event(raw, mid, routed[function], source=envelope_from, verdicts=verdicts,
                                           dmarc_policy=dmarc_policy)
            sqs.send(resources.local_queue(cfg, "invocations"), json.dumps({"function": function, "event": event}))
            log.info("mail received", extra={"ses_message_id": mid, "function": function, "recipients": routed[function],
                                             "size": len(raw)})
            return [Delivery(mid, function, tuple(routed[function]))]
    return []


def await_handled(cfg: Config, delivery: Delivery, raw: bytes, timeout: float) -> dict[str, Any]:
    """Wait until the handler deleted the staged mail (its last step), then say where the mail went."""
    import time
    from datetime import UTC, datetime

    from common.mail.parse import parse
    from common.mail.threads import conversation_id

    deadline = time.monotonic() + timeout
    while (staged := s3.get(cfg.bucket, delivery.staging_key)) is not None:
        staged["Body"].close()
        if time.monotonic() > deadline:
            return {"outcome": "not handled yet",
                    "hint": "is the wiring running? see the function logs (make logs, or the dev log dir)"}
        time.sleep(0.25)
    mail = parse(raw)
    mid, now = delivery.message_id, datetime.now(UTC)
    candidates = {
        "quarantined": layout.quarantined(now, mid), "rejected": layout.rejected(now, mid),
        "delivery status notification": layout.bounce(now, mid),
    }
    if mail.from_address:
        cid = conversation_id(mail.from_address, mail.display_name, cfg.opaque_relay_domains)
        candidates["forwarded"] = layout.archive(cid, mid)
    for outcome, key in candidates.items():
        obj = s3.get(cfg.bucket, key)
        if obj is not None:
            obj["Body"].close()
            reason = obj.get("Metadata", {}).get("reason")
            return {"outcome": outcome, "key": key, **({"reason": reason} if reason else {})}
    return {"outcome": "reply queued" if delivery.function == "reply-handler" else "handled (dropped; see the logs)"}


def recipients_of(raw: bytes) -> list[str]:
    """To and Cc addresses of a message file (``inject`` without ``--to``)."""
    import email
    import email.policy

    msg = email.message_from_bytes(raw, policy=email.policy.compat32)
    return [a for _, a in getaddresses([str(v) for k in ("To", "Cc") for v in msg.get_all(k) or []]) if "@" in a]


class SesHandler:
    """aiosmtpd handler: RCPT filtered by the receipt rules, DATA delivered like SES."""

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg

    async def handle_RCPT(self, server: Any, session: Any, envelope: Any, address: str,  # noqa: N802
                          rcpt_options: list[str]) -> str:
        if route(self.cfg, address) is None:
            log.info("recipient refused", extra={"recipient": address, "reason": "no receipt rule matches"})
            return "550 5.1.1 Mailbox unavailable: no receipt rule matches this recipient"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # noqa: N802
        import asyncio

        raw = envelope.original_content or envelope.content
        if not isinstance(raw, bytes):
            raw = str(raw).encode("utf-8", "surrogateescape")
        try:
            done = await asyncio.get_running_loop().run_in_executor(
                None, deliver, self.cfg, raw, envelope.mail_from or "", list(envelope.rcpt_tos))
        except Exception as exc:
            log.error("mail not stored", extra={"error": f"{type(exc).__name__}: {exc}"})
            return "451 4.3.0 Temporary failure storing the message; try again"
        return f"250 OK {done[0].message_id}" if done else "554 5.7.1 No recipient matched a receipt rule"


class SmtpIngress:
    def __init__(self, cfg: Config, host: str = "127.0.0.1", port: int = 2525) -> None:
        self.cfg, self.host, self.port = cfg, host, port
        self._controller: Any = None

    def start(self) -> SmtpIngress:
        from aiosmtpd.controller import Controller

        self._controller = Controller(SesHandler(self.cfg), hostname=self.host, port=self.port,
                                      data_size_limit=MAX_MESSAGE_BYTES, ident="service-email-handler local SES ingress")
        self._controller.start()
        return self

    def stop(self) -> None:
        if self._controller is not None:
            self._controller.stop()
            self._controller = None
