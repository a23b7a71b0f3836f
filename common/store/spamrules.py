"""The owner's keyword lists as stored: a text file under ``config/`` in the bucket, whose key is in
an SSM parameter so the owner edits the lists without a deploy (docs/inbound.md). Read only here;
common/inbound/policy.py parses and caches them."""

from __future__ import annotations

from common.aws import s3, ssm
from common.errors import EmailHandlerError
from common.runtime.config import InboundHandlerConfig
from common.store import layout


class SpamRulesError(EmailHandlerError, ValueError):
    """The parameter names a key outside ``config/``, which the function may not read."""


class SpamRulesMissingError(EmailHandlerError, FileNotFoundError):
    """The parameter names a rules file the bucket does not hold."""


def fetch(cfg: InboundHandlerConfig) -> tuple[str, str]:
    """The rules file's key and text; SpamRulesError (a ValueError) when the parameter names a key
    outside ``config/`` (the role may read nothing else: deploy/iam.py), SpamRulesMissingError (a
    FileNotFoundError) when the object is missing."""
    key = ssm.get_parameter(cfg.spam_rules_parameter)
    if not key.startswith(layout.CONFIG):
        raise SpamRulesError(
            f"{cfg.spam_rules_parameter} names {key!r}: the rules file must be under {layout.CONFIG}"
        )
    obj = s3.get(cfg.bucket, key)
    if obj is None:
        raise SpamRulesMissingError(f"s3://{cfg.bucket}/{key} named by {cfg.spam_rules_parameter}")
    return key, obj["Body"].read().decode("utf-8", "replace")
