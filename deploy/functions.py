"""The six functions as the deploy makes them: each one's configuration class (common/runtime/config.py,
which also says what it requires and, for a sender, the queue it consumes), its Lambda settings (memory,
timeout, SQS batch concurrency, whether it reads the owner's key) and its image repository; and the one
rule that gives a function only its own variables, used by the deploy, the CloudFormation export and
both local modes."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from common.runtime.config import CONFIGS, Deployment, SenderConfig, secret_parameters, variables
from deploy.config import Config, env_name


@dataclass(frozen=True, slots=True)
class Function:
    name: str
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
    # Reads each mailbox's own key at cold start (MAILBOX_KEYS): forward-sender encrypts to it.
    mailbox_keys: bool = False

    @property
    def config(self) -> type[Deployment]:
        """The function's configuration class: what it reads at cold start."""
        return CONFIGS[self.name]

    @property
    def queue_field(self) -> str:
        """A sender: the field of the host's configuration naming the queue it consumes; else ''."""
        klass = self.config
        return klass.queue_field if issubclass(klass, SenderConfig) else ""

    @property
    def reads_thread_secret(self) -> bool:
        """Whether it reads the HMAC secret at cold start (only the two handlers may)."""
        return "thread_secret" in secret_parameters(self.config)

    @property
    def repository(self) -> str:
        return f"service-email-handler/{self.name}"

    @property
    def image(self) -> str:
        """The local image reference ``make images`` builds (tag from IMAGE_TAG, default latest)."""
        return image_ref(self.name)


def image_ref(name: str) -> str:
    """``service-email-handler/<name>:<IMAGE_TAG or latest>``: the tag lets several trees build side by
    side."""

    return f"service-email-handler/{name}:{os.environ.get('IMAGE_TAG') or 'latest'}"


# Whoever must know that mail to the owner (or to a keyed mailbox) is encrypted: the sender that
# encrypts (and reads the keys), inbound-handler, which sizes forwards so that they fit SES's limit once
# encrypted, and reply-handler, which verifies the owner's opaque-signed replies against the
# certificate. The deploy (deploy/lambdas.py) and the local modes (narrowed) give the keys' parameters
# to these alone.
KNOW_KEYS = frozenset({"inbound-handler", "forward-sender", "reply-handler"})
_KEY_VARIABLES = frozenset({env_name("owner_key_parameter"), env_name("keyed_mailboxes")})


def narrowed(function: str, env: Mapping[str, str]) -> dict[str, str]:
    """``env`` without any configuration variable that ``function``'s class does not read: the deploy's
    Lambda environment, the export's and each local function process's (AWS clients, credentials and
    other process variables pass; a sender gets no extractor limit, no retention and no spam setting,
    the extractor no address)."""
    every = variables(Config) | {env_name(s) for s in secret_parameters(Config)}
    others = every - variables(CONFIGS[function])
    if function not in KNOW_KEYS:
        others |= _KEY_VARIABLES
    return {k: v for k, v in env.items() if k not in others}


# 512 MB where a whole mail is in memory: SES receives up to 40 MB and SESv2 sends up to 40 MB. VmHWM
# under the RIE: a 37 MB forward peaks at 264 MB in forward-sender (raw MIME, then botocore's base64
# and JSON copies of it); a 40 MB received mail at 154 MB in inbound-handler (400 MB before the
# cut-body parser), which keeps room for the worst shapes the parsing caps let through.
MAIL_MEMORY_MB = 512

FUNCTIONS: tuple[Function, ...] = (
    Function("inbound-handler", memory_mb=MAIL_MEMORY_MB),
    # verifies an opaque-signed owner reply (common/reply/signed.py)
    Function("reply-handler", memory_mb=MAIL_MEMORY_MB, owner_key=True),
    # S3 notifications reach it through a queue (deploy.resources.attachment_queue), so a mail with many
    # attachments uses at most two instances instead of fanning out to the account's whole concurrency.
    Function("attachment-extractor", batch_concurrency=2),
    # Senders: 0+5+30+120 s of backoff plus the sends themselves fit in 180 s (docs/senders.md).
    Function("ack-sender", 180, batch_concurrency=2),
    Function("forward-sender", 180, MAIL_MEMORY_MB, batch_concurrency=2, owner_key=True, mailbox_keys=True),
    Function("reply-sender", 180, MAIL_MEMORY_MB, batch_concurrency=2),
)
SENDERS = tuple(f for f in FUNCTIONS if f.queue_field)
# AWS guidance for SQS event sources: visibility timeout at least six times the function timeout.
QUEUE_VISIBILITY_S = 6 * max(f.timeout_s for f in SENDERS)
BY_NAME = {f.name: f for f in FUNCTIONS}
