"""The owner's notice about a reply: what happened to it and what to do, one short mail per reply.

No owner reply ends in silence (docs/reply.md): a reply with nothing to send, one that cannot be
read (encrypted, an opaque signature that does not verify, an unknown structure), and one whose
command lines could not be told apart from the quote each get this notice, on the forward queue
(forward-sender encrypts it to the owner's key when one is configured). The idempotency key is the
reply's SES message id, so Lambda's retry of the same event sends it once.
"""

from __future__ import annotations

from common.mail.outbound import OutboundMessage
from common.mail.sanitize import clean_header_text
from common.runtime.config import ReplyHandlerConfig
from common.runtime.log import get_logger
from common.store.sendqueue import enqueue

log = get_logger("reply-handler")


def send(
    cfg: ReplyHandlerConfig,
    mid: str,
    kind: str,
    subject: str,
    what: str,
    how: str,
    cid: str = "",
    to: str = "",
) -> None:
    """Queue the notice ``kind`` (a short word for logs and the idempotency key) about reply ``mid``, to
    ``to`` (the mailbox that wrote it: ReplyHandlerConfig.notice_to), PRIVATE_EMAIL by default."""
    shown = clean_header_text(subject, 200) or "(no subject)"
    text = (
        f'Your reply "{shown}"{f" in conversation {cid}" if cid else ""}: {what}\n\n{how}\n\n'
        f"(reply-handler, SES message {mid})\n"
    )
    message = OutboundMessage(
        kind="notice",
        idempotency_key=f"notice:{kind}:{mid}",
        correlation_id=f"notice-{mid}",
        to=[to or cfg.private_email],
        subject=f"About your reply: {shown}",
        text=text,
        from_name=f"Replies {cfg.domain_name}",
        headers={"Auto-Submitted": "auto-generated", "X-Auto-Response-Suppress": "All"},
        conversation_id=cid,
    )
    enqueue(cfg.forward_queue, message, cfg.bucket, cfg.claim_check_bytes)
    log.info("owner notified about a reply", extra={"notice": kind, "conversation_id": cid})
