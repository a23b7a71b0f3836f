"""The whole deployment's configuration, as the host tools read it (deploy, local modes, owner and
operator commands): every function's class of common/runtime/config.py at once, plus what only the host
holds (the owner's key files, the retention of what no function writes). Nothing here ships in an image.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import ClassVar

from common.errors import ConfigError
from common.runtime import config as runtime
from common.runtime.config import (
    EMAIL_ADDRESS,
    AckSenderConfig,
    ExtractorConfig,
    ForwardSenderConfig,
    InboundHandlerConfig,
    ReplyHandlerConfig,
    ReplySenderConfig,
    retention_days,
    setting,
)


@dataclass(frozen=True)
class Config(
    InboundHandlerConfig,
    ReplyHandlerConfig,
    AckSenderConfig,
    ForwardSenderConfig,
    ReplySenderConfig,
    ExtractorConfig,
):
    """Every setting of every function, and the host's own."""

    # The host consumes no queue: a sender's own class says which one it does.
    queue_field: ClassVar[str] = ""
    queue: ClassVar[str] = ""

    # SNS topic SES publishes Delivery/Bounce/Complaint to (the deploy subscribes inbound-handler to it)
    feedback_topic: str = setting("", "FEEDBACK_TOPIC_NAME", derive=lambda c: c.name("ses-feedback"))
    # --- the owner's key files (docs/owner.md): the deploy stores the key's text in SSM
    owner_smime_cert: str = setting("")  # path of a PEM X.509 certificate (S/MIME, RFC 8551)
    owner_pgp_key: str = setting("")  # path of an ASCII-armored OpenPGP public key (PGP/MIME, RFC 3156)
    # Each forward_to mailbox's own key (docs/owner.md, "Several mailboxes"): a JSON object, mailbox ->
    # path of its PEM certificate or armored OpenPGP public key; the deploy stores each text in SSM
    mailbox_key_files: str = setting("", "MAILBOX_KEYS")
    # --- retention of what the functions write but never read again (lifecycle rules, deploy/resources.py)
    retention_attachments_days: int = setting(
        730, check=retention_days
    )  # attachments/, withheld/, reply-attachments/
    retention_text_days: int = setting(730, check=retention_days)  # extracted-text/
    retention_rejected_days: int = setting(
        90, check=retention_days
    )  # rejected/ and bounces/: evidence for alerts

    @property
    def has_owner_key_source(self) -> bool:
        return bool(self.owner_smime_cert or self.owner_pgp_key or self.owner_key)

    @property
    def mailbox_key_sources(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((*super().mailbox_key_sources, *key_files(self.mailbox_key_files))))

    def _check(self) -> None:
        if self.owner_smime_cert and self.owner_pgp_key:
            raise ConfigError(
                "set OWNER_SMIME_CERT or OWNER_PGP_KEY, not both: mail to the owner is encrypted to one key"
            )


def key_files(text: str) -> dict[str, str]:
    """MAILBOX_KEYS read: mailbox (lowercase) -> the path of its key file. ConfigError says what is wrong."""
    if not text.strip():
        return {}
    try:
        found = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"MAILBOX_KEYS is not JSON ({exc})") from None
    if not isinstance(found, dict):
        raise ConfigError('MAILBOX_KEYS must be a JSON object: {"mailbox@example.net": "/path/to/key"}')
    files: dict[str, str] = {}
    for box, path in found.items():
        if not EMAIL_ADDRESS.match(box):
            raise ConfigError(f"MAILBOX_KEYS: {box!r} is not an ASCII email address")
        if not isinstance(path, str) or not path.strip():
            raise ConfigError(f"MAILBOX_KEYS: {box}: give the path of its key file (a string)")
        if box.lower() in files:
            raise ConfigError(f"MAILBOX_KEYS: {box} is given twice")
        files[box.lower()] = path.strip()
    return files


def load(environ: Mapping[str, str] | None = None, require: Iterable[str] = ()) -> Config:
    """The host's configuration; ``require`` names fields that must be non-empty."""
    return Config.parse(environ).require(*require)


def env_name(field_name: str) -> str:
    """The variable of a setting."""
    return runtime.env_name(Config, field_name)
