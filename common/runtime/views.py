"""Each function's view of the configuration: the settings its code reads, as a typing.Protocol.

One parser (common/runtime/config.py) reads and validates every variable at cold start and builds the
one frozen Config; each function's logic is typed with its view and the store functions it calls with
the shared layer they need (mypy then rejects a read of another function's setting), Config satisfies
every view structurally, and the deploy gives each function only its view's variables (deploy/lambdas.py).
tests/unit/test_config_views.py checks that what each function's modules read is in its view.

The views are layered as the code is: Deployment (every function) <- PublicAddresses <-
OwnerAddresses <- Sending (every path to SES) <- SenderConfig (the three senders) and Delivery (what
both handlers share through common/delivery) <- InboundHandlerConfig, ReplyHandlerConfig; the
extractor's view is Deployment and its limits. A view that lists a derived member (``thread_domain``)
also lists the fields it is derived from (``domain_name``), so a view's fields say what it needs.
"""

from __future__ import annotations

from dataclasses import fields
from functools import cache
from typing import Protocol

from common.runtime.config import Config

__all__ = [
    "VIEWS",
    "Delivery",
    "Deployment",
    "ExtractorConfig",
    "InboundHandlerConfig",
    "OwnerAddresses",
    "PublicAddresses",
    "ReplyHandlerConfig",
    "SenderConfig",
    "Sending",
    "members",
    "view_fields",
]


class Deployment(Protocol):
    """Every function: which deployment it is part of. The parser derives every resource name from
    these (``{project}-{env}-…``), so each function receives them."""

    @property
    def project(self) -> str: ...

    @property
    def env(self) -> str: ...

    @property
    def region(self) -> str: ...

    @property
    def account_id(self) -> str: ...

    @property
    def function(self) -> str: ...

    @property
    def prefix(self) -> str: ...

    def name(self, resource: str) -> str: ...

    # Every function reports the outcomes it decides (common/runtime/outcomes.py): where, and how much.
    @property
    def event_bus_name(self) -> str: ...

    @property
    def events_include_contacts(self) -> bool: ...

    # Config is frozen, so hashable: a cache may key on the view it is given.
    def __hash__(self) -> int: ...


class PublicAddresses(Deployment, Protocol):
    """The public addresses, their acks and the thread domain (common/runtime/addresses.py)."""

    @property
    def domain_name(self) -> str: ...

    @property
    def public_email(self) -> str: ...

    @property
    def public_emails(self) -> tuple[str, ...]: ...

    @property
    def public_addresses(self) -> str: ...

    @property
    def ack_subject(self) -> str: ...

    @property
    def ack_template(self) -> str: ...

    @property
    def thread_domain(self) -> str: ...


class OwnerAddresses(PublicAddresses, Protocol):
    """Who the owner is and whether mail to the owner is encrypted: what decides our own addresses."""

    @property
    def private_email(self) -> str: ...

    @property
    def owner_emails(self) -> tuple[str, ...]: ...

    @property
    def owner_key(self) -> str: ...

    @property
    def owner_key_parameter(self) -> str: ...

    @property
    def owner_addresses(self) -> frozenset[str]: ...

    @property
    def own_addresses(self) -> frozenset[str]: ...

    def is_owner(self, address: str) -> bool: ...

    def is_own(self, address: str) -> bool: ...

    @property
    def encrypts_to_owner(self) -> bool: ...


class Sending(OwnerAddresses, Protocol):
    """What every path to SES shares: the bucket, the send records, suppression and alerts."""

    @property
    def bucket(self) -> str: ...

    @property
    def alert_topic(self) -> str: ...

    @property
    def alert_topic_arn(self) -> str: ...

    @property
    def attachment_deny_types(self) -> tuple[str, ...]: ...

    @property
    def forward_link_days(self) -> int: ...

    @property
    def idempotency_table(self) -> str: ...

    @property
    def owner_hold_probe_s(self) -> int: ...

    @property
    def public_name(self) -> str: ...

    @property
    def send_status_table(self) -> str: ...

    @property
    def suppression_table(self) -> str: ...


class SenderConfig(Sending, Protocol):
    """ack-sender, forward-sender and reply-sender (one logic, common/senders): the queue they consume,
    backoff, rate, quota and idempotency."""

    @property
    def send_queue(self) -> str: ...

    @property
    def forward_queue(self) -> str: ...  # every notice to the owner goes through forward-sender

    @property
    def attempt_reserve_s(self) -> float: ...

    @property
    def encrypted_subject(self) -> str: ...

    @property
    def idempotency_ttl_s(self) -> int: ...

    @property
    def max_receive_count(self) -> int: ...

    @property
    def max_send_rate(self) -> float: ...

    @property
    def quota_wait_s(self) -> int: ...

    @property
    def retry_delays(self) -> tuple[float, ...]: ...

    @property
    def sandbox_wait_s(self) -> int: ...

    @property
    def ses_configuration_set(self) -> str: ...


class Delivery(Sending, Protocol):
    """What inbound-handler and reply-handler share through common/delivery: the tables, the queues they
    fill, the thread secret, acks, quarantine, withholding and retention of what they record."""

    @property
    def thread_secret(self) -> str: ...

    @property
    def thread_secret_parameter(self) -> str: ...

    @property
    def ack_limit_per_domain_per_hour(self) -> int: ...

    @property
    def ack_limit_per_hour(self) -> int: ...

    @property
    def ack_queue(self) -> str: ...

    @property
    def claim_check_bytes(self) -> int: ...

    @property
    def conversations_table(self) -> str: ...

    @property
    def forward_queue(self) -> str: ...

    @property
    def max_forward_bytes(self) -> int: ...

    @property
    def opaque_relay_domains(self) -> tuple[str, ...]: ...

    @property
    def quarantine_table(self) -> str: ...

    @property
    def remove_trackers(self) -> str: ...

    @property
    def retention_archive_days(self) -> int: ...

    @property
    def retention_quarantine_days(self) -> int: ...

    @property
    def sender_lists_table(self) -> str: ...

    @property
    def spam_log_group(self) -> str: ...

    @property
    def forward_budget(self) -> int: ...


class InboundHandlerConfig(Delivery, Protocol):
    """inbound-handler: the spam rules and SES feedback besides delivery."""

    @property
    def spam_rules_parameter(self) -> str: ...

    @property
    def spam_rules_ttl_s(self) -> float: ...

    @property
    def transient_bounce_limit(self) -> int: ...

    @property
    def transient_suppression_s(self) -> int: ...


class ReplyHandlerConfig(Delivery, Protocol):
    """reply-handler: the owner's names it removes, how old a reply may be, the queue it fills."""

    @property
    def owner_names(self) -> tuple[str, ...]: ...

    @property
    def reply_max_age_s(self) -> int: ...

    @property
    def reply_queue(self) -> str: ...


class ExtractorConfig(Deployment, Protocol):
    """attachment-extractor: its limits, and nothing of mail, owner or sending."""

    @property
    def max_input_bytes(self) -> int: ...

    @property
    def max_pages(self) -> int: ...

    @property
    def max_output_chars(self) -> int: ...

    @property
    def extract_time_budget_s(self) -> float: ...


# The function -> its view (the three senders run one logic: common/senders/handler.py).
VIEWS: dict[str, type] = {
    "inbound-handler": InboundHandlerConfig,
    "reply-handler": ReplyHandlerConfig,
    "attachment-extractor": ExtractorConfig,
    "ack-sender": SenderConfig,
    "forward-sender": SenderConfig,
    "reply-sender": SenderConfig,
}


@cache
def members(view: type) -> frozenset[str]:
    """Every name a view declares, its bases' too (properties and methods)."""
    return frozenset(
        name
        for klass in view.__mro__
        if klass not in (object, Protocol) and klass.__module__ == __name__
        for name, value in vars(klass).items()
        if not name.startswith("_") and (isinstance(value, property) or callable(value))
    )


@cache
def view_fields(view: type) -> frozenset[str]:
    """The Config fields a view declares: the variables the function needs."""
    return members(view) & {f.name for f in fields(Config)}
