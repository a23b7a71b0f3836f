"""The six functions: names (also image and folder names), local ports and what each consumes."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Function:
    name: str
    port: int  # RIE endpoint in both local modes (127.0.0.1:port)
    requires: tuple[str, ...]  # Config fields that must be set
    queue_field: str = ""  # senders: the Config field naming the queue they consume

    @property
    def image(self) -> str:
        return f"service-email-handler/{self.name}"


FUNCTIONS: tuple[Function, ...] = (
    Function("inbound-handler", 9001, ("domain_name", "public_email", "private_email", "thread_secret")),
    Function("reply-handler", 9002, ("domain_name", "public_email", "private_email", "thread_secret")),
    Function("attachment-extractor", 9003, ()),
    Function("ack-sender", 9004, ("public_email",), "ack_queue"),
    Function("forward-sender", 9005, ("public_email",), "forward_queue"),
    Function("reply-sender", 9006, ("public_email",), "reply_queue"),
)
BY_NAME = {f.name: f for f in FUNCTIONS}
