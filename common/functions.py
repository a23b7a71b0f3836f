"""The six functions: names (also image and folder names), local ports and what each consumes."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Function:
    name: str
    port: int  # RIE endpoint in both local modes (127.0.0.1:port)
    requires: tuple[str, ...]  # Config fields that must be set
    queue_field: str = ""  # senders: the Config field naming the queue they consume
    attachment_prefix: str = ""  # senders: the only S3 prefix their messages may attach from
    timeout_s: int = 60
    memory_mb: int = 256

    @property
    def image(self) -> str:
        return f"service-email-handler/{self.name}"


FUNCTIONS: tuple[Function, ...] = (
    Function("inbound-handler", 9001, ("domain_name", "public_email", "private_email", "thread_secret")),
    Function("reply-handler", 9002, ("domain_name", "public_email", "private_email", "thread_secret")),
    Function("attachment-extractor", 9003, ()),
    # Senders: 0+5+30+120 s of backoff plus the sends themselves fit in 180 s (FR-2).
    Function("ack-sender", 9004, ("public_email",), "ack_queue", "", 180),
    Function("forward-sender", 9005, ("public_email",), "forward_queue", "attachments/", 180),
    Function("reply-sender", 9006, ("public_email",), "reply_queue", "reply-attachments/", 180),
)
SENDERS = tuple(f for f in FUNCTIONS if f.queue_field)
# AWS guidance for SQS event sources: visibility timeout at least six times the function timeout.
QUEUE_VISIBILITY_S = 6 * max(f.timeout_s for f in SENDERS)
BY_NAME = {f.name: f for f in FUNCTIONS}
