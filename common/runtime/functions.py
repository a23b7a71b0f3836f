"""The six functions, one declarative table: names (also image and folder names), local ports, what
each consumes, and the Lambda settings `email-handler deploy` applies (memory, timeout, SQS batch
concurrency)."""

from __future__ import annotations

import hashlib
import hmac
import os
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Function:
    name: str
    port: int  # RIE endpoint in both local modes (127.0.0.1:port)
    requires: tuple[str, ...]  # Config fields that must be set
    queue_field: str = ""  # senders: the Config field naming the queue they consume
    timeout_s: int = 60
    memory_mb: int = 256
    # The SQS event source's MaximumConcurrency (senders, and the extractor behind its attachment-events
    # queue); 2 is the minimum (Lambda API, ScalingConfig,
    # https://docs.aws.amazon.com/lambda/latest/dg/API_ScalingConfig.html). It caps them without
    # reserving concurrency, which an account with the new-account limit of 10 cannot grant.
    batch_concurrency: int = 0
    # Reads the owner's key at cold start: forward-sender encrypts mail to the owner with it
    # (common/mail/encrypt.py), reply-handler verifies the owner's opaque-signed replies with it.
    owner_key: bool = False

    @property
    def repository(self) -> str:
        return f"service-email-handler/{self.name}"

    @property
    def image(self) -> str:
        """The local image reference ``make images`` builds (tag from IMAGE_TAG, default latest)."""
        return image_ref(self.name)


def dlq_name(queue: str) -> str:
    """Every queue's dead-letter queue (provisioning creates it; a sender moves a message there itself
    when retrying cannot help)."""
    return f"{queue}-dlq"


def image_ref(name: str) -> str:
    """``service-email-handler/<name>:<IMAGE_TAG or latest>``: the tag lets several trees build side by
    side."""

    return f"service-email-handler/{name}:{os.environ.get('IMAGE_TAG') or 'latest'}"


# 512 MB where a whole mail is in memory: SES receives up to 40 MB and SESv2 sends up to 40 MB. VmHWM
# under the RIE: a 37 MB forward peaks at 264 MB in forward-sender (raw MIME, then botocore's base64
# and JSON copies of it); a 40 MB received mail at 154 MB in inbound-handler (400 MB before the
# cut-body parser), which keeps room for the worst shapes the parsing caps let through.
MAIL_MEMORY_MB = 512

# The local modes' other endpoints (CONTRACT.md "Command line"); the functions' RIE ports are in the
# table below.
EMULATOR_PORT = 4566
# The emulator's switch of the fresh-account model (local/fresh.py): GET says which account it models.
EMULATOR_ACCOUNT_PATH = "/moto-api/service-email-handler/account"


def emulator_token(secret_key: str) -> str:
    """The bearer token the local emulator asks of ``/moto-api/*`` (local/guard.py), derived from
    the local admin's secret key, so a host tool holding the admin's credentials can compute it."""

    return hmac.new(secret_key.encode(), b"service-email-handler moto-api", hashlib.sha256).hexdigest()


SMTP_PORT = 2525

FUNCTIONS: tuple[Function, ...] = (
    Function(
        "inbound-handler",
        9001,
        ("domain_name", "public_email", "private_email", "thread_secret"),
        memory_mb=MAIL_MEMORY_MB,
    ),
    Function(
        "reply-handler",
        9002,
        ("domain_name", "public_email", "private_email", "thread_secret"),
        memory_mb=MAIL_MEMORY_MB,
        owner_key=True,  # verifies an opaque-signed owner reply (common/reply/signed.py)
    ),
    # S3 notifications reach it through a queue (deploy.resources.attachment_queue), so a mail with many
    # attachments uses at most two instances instead of fanning out to the account's whole concurrency.
    Function("attachment-extractor", 9003, (), batch_concurrency=2),
    # Senders: 0+5+30+120 s of backoff plus the sends themselves fit in 180 s (docs/senders.md).
    Function("ack-sender", 9004, ("public_email",), "ack_queue", 180, batch_concurrency=2),
    Function(
        "forward-sender",
        9005,
        ("public_email",),
        "forward_queue",
        180,
        MAIL_MEMORY_MB,
        batch_concurrency=2,
        owner_key=True,
    ),
    Function(
        "reply-sender", 9006, ("public_email",), "reply_queue", 180, MAIL_MEMORY_MB, batch_concurrency=2
    ),
)
SENDERS = tuple(f for f in FUNCTIONS if f.queue_field)
# AWS guidance for SQS event sources: visibility timeout at least six times the function timeout.
QUEUE_VISIBILITY_S = 6 * max(f.timeout_s for f in SENDERS)
BY_NAME = {f.name: f for f in FUNCTIONS}
