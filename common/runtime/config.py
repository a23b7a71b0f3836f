"""Each function's configuration: one frozen dataclass per function, each setting declared once.

The classes are layered as the code is: :class:`Deployment` (every function) <- :class:`PublicAddresses`
<- :class:`OwnerAddresses` <- :class:`Sending` (every path to SES) <- :class:`SenderConfig` (the three
senders, one class each for the queue it consumes) and :class:`Delivery` (what both handlers share
through common/delivery) <- :class:`InboundHandlerConfig`, :class:`ReplyHandlerConfig`; the extractor's
:class:`ExtractorConfig` is Deployment and its limits. A field is declared in the layer where it first
belongs, with its environment variable, its check and its derived default (:func:`setting`); logic is
typed with the layer it needs, so mypy rejects a read of another function's setting.

``cls.load(environ)`` reads exactly that class's variables at cold start (common/runtime/handler.py):
a missing required or malformed value raises :class:`ConfigError` naming the variable, which the runtime
reports as the init error. The deploy and the local modes give each function only the variables of its
class (:func:`variables`). Resource names follow ``{project}-{env}-{name}`` and are derived from
``PROJECT_NAME`` / ``ENVIRONMENT`` unless a variable overrides one.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import Field, dataclass, field, fields, replace
from typing import Any, ClassVar, Self

from common.aws import error_code, ssm
from common.errors import ConfigError
from common.runtime import addresses

PROJECT = "service-email-handler"
DEFAULT_ENV = "prd"
# Used by both local modes; `email-handler deploy` refuses to ship it.
DEV_THREAD_SECRET = "dev-only-thread-secret-do-not-deploy"
# Size of an encrypted message over its plaintext: base64 (4/3), line breaks every 64-76 characters,
# and the envelope's own few hundred bytes, rounded up.
ENCRYPTION_GROWTH = 1.4

# 7-bit ASCII only (common/runtime/addresses.py): a Unicode owner address would never match SES's
# envelope, so every owner reply would be refused; say so at start instead.
_EMAIL = addresses.EMAIL
EMAIL_ADDRESS = _EMAIL  # the same rule for an address a host command is given (ses verify-address)
_DOMAIN = re.compile(r"^(?=.{1,253}$)([A-Za-z0-9-]{1,63}\.)+[A-Za-z0-9-]{2,63}$")
# PutEventsRequestEntry's EventBusName: "The name or ARN of the event bus", 1-256 characters of
# [/\.\-_A-Za-z0-9]+ for a name (EventBridge API reference, EventBus, Name).
_EVENT_BUS = re.compile(
    r"(?=.{1,256}$)(?:[/.\-_A-Za-z0-9]+|arn:aws[a-z-]*:events:[a-z0-9-]+:[0-9]{12}:event-bus/[/.\-_A-Za-z0-9]+)"
)
_ACCOUNT_ID = re.compile(r"[0-9]{12}")
_ENVIRONMENT = re.compile(r"[a-z0-9-]+")
_PUBLIC_NAME_FORBIDDEN = re.compile(r"[@\x00-\x1f\x7f<>\"]")

# "The maximum [visibility timeout] is 12 hours" (SQS Developer Guide, "Amazon SQS visibility timeout",
# https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-visibility-timeout.html).
MAX_VISIBILITY_S = 12 * 3600

# A check is given the variable's name and the parsed value; it returns what is wrong, or None.
Check = Callable[[str, Any], "str | None"]


@dataclass(frozen=True)
class Setting:
    """What a field's metadata says about its variable."""

    env: str = ""  # the variable; "" = the field's name in upper case
    check: Check | None = None
    derive: Callable[[Any], object] | None = None  # the default when the variable is empty, from the others
    required: bool = False  # the function does not start without it
    from_env: bool = True  # False: the code sets it (make_handler), never the environment
    # A secret: never in a function's variables, read at cold start from the SSM SecureString that the
    # named field holds (with_secrets); the deploy and the local provisioning store it there.
    parameter: str = ""
    fallbacks: tuple[str, ...] = ()  # further variables read, in order, when ``env`` is unset


def setting[T](
    default: T,
    env: str = "",
    *,
    check: Check | None = None,
    derive: Callable[[Any], object] | None = None,
    required: bool = False,
    from_env: bool = True,
    parameter: str = "",
    fallbacks: tuple[str, ...] = (),
) -> T:
    """A configuration field: its default and what :class:`Setting` says (typed as its value)."""
    meta = Setting(env, check, derive, required, from_env, parameter, fallbacks)
    return field(default=default, metadata={"setting": meta})


def _csv(value: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in value.split(",") if part.strip())


# --- checks (one rule each; the messages name the variable)
def _email(name: str, value: str) -> str | None:
    if value and not _EMAIL.match(value):
        return f"{name}={value!r} is not an ASCII email address (use the domain's punycode form)"
    return None


def _emails(name: str, value: tuple[str, ...]) -> str | None:
    bad = next((v for v in value if not _EMAIL.match(v)), None)
    return None if bad is None else f"{name} contains {bad!r}, which is not an ASCII email address"


def _domain(name: str, value: str) -> str | None:
    return f"{name}={value!r} is not a domain name" if value and not _DOMAIN.match(value) else None


def _not_negative(name: str, value: float) -> str | None:
    return f"{name} must not be negative" if value < 0 else None


def retention_days(name: str, value: int) -> str | None:
    return f"{name} must be a number of days (0 keeps for ever)" if value < 0 else None


def _visibility(name: str, value: int) -> str | None:
    if not 1 <= value <= MAX_VISIBILITY_S:
        return f"{name} must be between 1 and {MAX_VISIBILITY_S} (SQS's 12-hour visibility maximum)"
    return None


def _one_of(*allowed: str) -> Check:
    def check(name: str, value: str) -> str | None:
        return None if value in allowed else f"{name}={value!r} must be {' or '.join(allowed)}"

    return check


def _rule(test: Callable[[Any], bool], message: str) -> Check:
    """A check whose message is fixed (it names its variable itself)."""

    def check(name: str, value: Any) -> str | None:
        return None if test(value) else message

    return check


# A layer only gathers fields for the classes a function loads: no methods of its own are generated
# (dataclasses writes __init__, __repr__ and __eq__ by exec for each decorated class, over every inherited
# field; doing it for each layer was most of this module's import time).
@dataclass(frozen=True, init=False, repr=False, eq=False)
class Deployment:
    """Every function: which deployment it is part of. Every resource name derives from these
    (``{project}-{env}-…``), and every function reports the outcomes it decides
    (common/runtime/outcomes.py): where, and how much."""

    project: str = setting(PROJECT, "PROJECT_NAME")
    env: str = setting(
        DEFAULT_ENV,
        "ENVIRONMENT",
        check=lambda n, v: (
            None if _ENVIRONMENT.fullmatch(v) else f"{n}={v!r} must be lowercase letters, digits or hyphens"
        ),
    )
    region: str = setting("us-east-1", "AWS_REGION", fallbacks=("AWS_DEFAULT_REGION",))
    # The account the functions run in, set by the deploy: queue URLs and topic ARNs are built from it
    # without an sts:GetCallerIdentity call at cold start (common/aws/sts.py). Empty: asked of STS.
    account_id: str = setting(
        "",
        check=lambda n, v: (
            f"{n}={v!r} is not an AWS account id (12 digits)" if v and not _ACCOUNT_ID.fullmatch(v) else None
        ),
    )
    # The function this process runs: make_handler sets it, never the environment.
    function: str = setting("", from_env=False)
    # --- outcome events (docs/owner.md, "Events"): the bus every mail's outcome is put on, and whether
    # an event may name the contact and the mail's subject (never by default)
    event_bus_name: str = setting(
        "default",
        check=lambda n, v: (
            None
            if _EVENT_BUS.fullmatch(v)
            else f"{n}={v!r} is not an event bus name (letters, digits, . - _ /) or an event bus ARN"
        ),
    )
    events_include_contacts: bool = setting(False)

    @property
    def prefix(self) -> str:
        return f"{self.project}-{self.env}"

    def name(self, resource: str) -> str:
        """``{project}-{env}-{resource}``: the name of every AWS resource of this deployment
        (docs/CONTRACT.md)."""
        return f"{self.prefix}-{resource}"

    # --- reading
    @classmethod
    def load(cls, environ: Mapping[str, str] | None = None) -> Self:
        """This class's variables from ``environ`` (os.environ by default), checked; every required
        one but the secrets (with_secrets) must be set."""
        return cls.parse(environ).require(*(n for n in required(cls) if n not in secret_parameters(cls)))

    @classmethod
    def parse(cls, environ: Mapping[str, str] | None = None) -> Self:
        """This class's variables, parsed, completed with the derived defaults and checked (nothing
        required)."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f, s in settings(cls):
            raw = next((env[v] for v in (env_name(cls, f.name), *s.fallbacks) if env.get(v)), "")
            if s.from_env and raw:
                values[f.name] = _parse(env_name(cls, f.name), str(f.type), raw)
        cls._read(values)
        cfg = cls(**values)
        derived: dict[str, Any] = {
            f.name: s.derive(cfg) for f, s in settings(cls) if s.derive and not values.get(f.name)
        }
        cfg = replace(cfg, **derived) if derived else cfg
        cfg.check()
        return cfg

    @classmethod
    def _read(cls, values: dict[str, Any]) -> None:
        """Adjust the parsed values before the class is made (a layer overrides it, calling super())."""

    def check(self) -> None:
        """Every field's check, then each layer's checks across fields (``_check`` of each class)."""
        for f, s in settings(type(self)):
            if s.check is not None and (why := s.check(env_name(type(self), f.name), getattr(self, f.name))):
                raise ConfigError(why)
        for klass in reversed(type(self).__mro__):
            across = vars(klass).get("_check")
            if across is not None:
                across(self)

    def require(self, *names: str) -> Self:
        """Raise ConfigError naming the variable of every field of ``names`` that is empty."""
        missing = [env_name(type(self), n) for n in names if not getattr(self, n)]
        if missing:
            raise ConfigError(
                f"missing required environment variable(s): {', '.join(missing)} "
                "(see the configuration table in README.md)"
            )
        return self


@dataclass(frozen=True, init=False, repr=False, eq=False)
class PublicAddresses(Deployment):
    """The public addresses, their acks and the thread domain (common/runtime/addresses.py)."""

    domain_name: str = setting("", check=_domain, required=True)
    # The default public address (PUBLIC_EMAIL's first; common/runtime/addresses.py)
    public_email: str = setting("", check=_email, required=True)
    # Every address PUBLIC_EMAIL and PUBLIC_ADDRESSES list, *@DOMAIN too (set from those two).
    public_emails: tuple[str, ...] = setting((), from_env=False)
    public_addresses: str = setting("")  # PUBLIC_ADDRESSES: each address's settings, as inline JSON
    ack_subject: str = setting("Thanks for your message")
    ack_template: str = setting(
        "Hello{name},\n\nThanks for getting in touch. This is an automatic acknowledgement: "
        "your message has arrived and I will reply personally soon.\n\nBest regards\n"
    )

    @property
    def thread_domain(self) -> str:
        return f"thread.{self.domain_name}"

    @classmethod
    def _read(cls, values: dict[str, Any]) -> None:
        super()._read(values)
        if "public_email" in values or "public_addresses" in values:  # several addresses, a catch-all
            listed, inline = addresses.split(
                str(values.get("public_email", "")), str(values.get("public_addresses", ""))
            )
            values["public_emails"], values["public_addresses"] = listed, inline
            values["public_email"] = next((a for a in listed if not a.startswith("*@")), "")

    def _check(self) -> None:
        if (
            self.domain_name
            and self.public_email
            and not self.public_email.lower().endswith("@" + self.domain_name.lower())
        ):
            raise ConfigError(f"PUBLIC_EMAIL must be an address at DOMAIN_NAME ({self.domain_name})")
        if self.public_emails and (
            why := addresses.problem(self.public_emails, self.domain_name, self.public_addresses)
        ):
            raise ConfigError(why)


@dataclass(frozen=True, init=False, repr=False, eq=False)
class OwnerAddresses(PublicAddresses):
    """Who the owner is and whether mail to the owner is encrypted: what decides our own addresses."""

    private_email: str = setting("", check=_email, required=True)
    owner_emails: tuple[str, ...] = setting(
        (), check=_emails, derive=lambda c: (c.private_email,) if c.private_email else ()
    )
    # --- the owner's key (docs/owner.md): mail to the owner is encrypted to it when one is configured
    owner_key: str = setting("")  # the key's text; functions read it from owner_key_parameter at cold start
    # SSM parameter holding the key; set = encryption on (common/mail/encrypt.py)
    owner_key_parameter: str = setting(
        "", derive=lambda c: f"/{c.project}/{c.env}/owner-key" if c.has_owner_key_source else ""
    )

    # --- each mailbox's own key (docs/owner.md, "Several mailboxes"): the ``forward_to`` mailboxes whose
    # mail is encrypted to their own key (the host's MAILBOX_KEYS names the files), each key in its own SSM
    # parameter (mailbox_key_parameter): a key is 1-4 KB, the environment holds 4 KB in all.
    keyed_mailboxes: tuple[str, ...] = setting((), check=_emails, derive=lambda c: c.mailbox_key_sources)
    # (mailbox, key text) pairs: forward-sender reads them at cold start (encrypt.with_mailbox_keys), the
    # host from the files (deploy.preflight.with_mailbox_key_files); never in the environment
    mailbox_key_texts: tuple[tuple[str, str], ...] = setting((), from_env=False)

    @property
    def has_owner_key_source(self) -> bool:
        """A key is configured here (its text; the host's configuration adds its files)."""
        return bool(self.owner_key)

    @property
    def mailbox_key_sources(self) -> tuple[str, ...]:
        """The mailboxes given a key here (their texts; the host's configuration adds MAILBOX_KEYS)."""
        return tuple(box.lower() for box, _ in self.mailbox_key_texts)

    def mailbox_key_parameter(self, mailbox: str) -> str:
        """The SSM parameter of ``mailbox``'s key. A parameter name allows only ``a-zA-Z0-9_.-/`` (SSM
        API Reference, PutParameter, Name), so the mailbox is named by a digest of its address; the
        parameter list shows no mailbox either."""
        digest = hashlib.sha256(mailbox.strip().lower().encode()).hexdigest()[:32]
        return f"/{self.project}/{self.env}/mailbox-key/{digest}"

    def mailbox_key(self, mailbox: str) -> str:
        """``mailbox``'s own key text ('' when it has none or it is not loaded)."""
        who = mailbox.strip().lower()
        return next((text for box, text in self.mailbox_key_texts if box.lower() == who), "")

    def has_key(self, mailbox: str) -> bool:
        """Whether mail to ``mailbox`` is encrypted: the owner's mailboxes to the owner's key, an address's
        own mailbox (``forward_to``) to its own (KEYED_MAILBOXES)."""
        who = mailbox.strip().lower()
        if who in self.owner_addresses:
            return self.encrypts_to_owner
        return who in {b.lower() for b in self.keyed_mailboxes}

    @property
    def owner_addresses(self) -> frozenset[str]:
        """The owner's mailboxes (OWNER_EMAILS and PRIVATE_EMAIL), lowercase: who may reply and command."""
        return frozenset(a.strip().lower() for a in (*self.owner_emails, self.private_email) if a.strip())

    @property
    def own_addresses(self) -> frozenset[str]:
        """The owner's mailboxes, every address's own mailboxes (``forward_to``) and every public
        address: never acked, suppressed, blocked or written to as a contact (a catch-all's addresses
        are all at DOMAIN_NAME, which is_own covers)."""
        public = {a for a in (self.public_email, *self.public_emails) if a.strip() and "*" not in a}
        return self.senders | {a.strip().lower() for a in public}

    # --- several mailboxes per public address (docs/owner.md, "Several mailboxes")
    def mailboxes(self, public: str | addresses.PublicAddress) -> tuple[str, ...]:
        """The mailboxes a public address's mail is forwarded to: its ``forward_to``, else PRIVATE_EMAIL
        (an address no longer served, or '': PRIVATE_EMAIL)."""
        found = public if isinstance(public, addresses.PublicAddress) else self._served(public)
        if found is not None and found.forward_to:
            return found.forward_to
        return (self.private_email,) if self.private_email else ()

    def _served(self, public: str) -> addresses.PublicAddress | None:
        return addresses.served(self, public) if public.strip() else None

    @property
    def mailbox_addresses(self) -> frozenset[str]:
        """Every address's own mailboxes (``forward_to`` of the listed addresses and the catch-all),
        lowercase."""
        if not (self.public_email or self.public_emails):
            return frozenset()
        table = addresses.of(self)
        every = (*table.listed, *((table.catch_all,) if table.catch_all else ()))
        return frozenset(b.lower() for a in every for b in a.forward_to)

    @property
    def senders(self) -> frozenset[str]:
        """Who may write to the thread domain at all (authenticated like the owner): the owner's
        mailboxes and every address's own mailboxes. What each may act on is :meth:`may_act_for`."""
        return self.owner_addresses | self.mailbox_addresses

    def may_act_for(self, sender: str, public: str) -> bool:
        """Whether ``sender`` may reply on, and command for, conversations of public address ``public``:
        the owner (PRIVATE_EMAIL, OWNER_EMAILS) for every address; an address's own mailbox
        (``forward_to``) for that address only, never for another's (docs/owner.md, "Several
        mailboxes")."""
        who = sender.strip().strip("<>").strip().lower()
        if who in self.owner_addresses:
            return True
        found = self._served(public)
        return found is not None and who in {b.lower() for b in found.forward_to}

    def notice_to(self, sender: str) -> str:
        """Where a notice about ``sender``'s own mail goes: PRIVATE_EMAIL for the owner (as before), the
        mailbox itself for an address's mailbox (it wrote; the owner may not read its mail)."""
        who = sender.strip().lower()
        return sender.strip() if who and who not in self.owner_addresses else self.private_email

    def is_owner(self, address: str) -> bool:
        """One of our own mailboxes (:attr:`senders`: the owner's and every address's ``forward_to``), in
        any case and with any ``+tag``: a contact with such an address is a mailbox writing to the public
        address, whose answer would mail that mailbox back (a loop)."""
        local, _, domain = address.strip().strip("<>").strip().lower().rpartition("@")
        domain = domain.rstrip(".")
        return bool(local) and bool(
            {f"{local}@{domain}", f"{local.partition('+')[0]}@{domain}"} & self.senders
        )

    def is_own(self, address: str) -> bool:
        """The one reading of "our own address" (acks, loops, suppression and list protection use it):
        an address of own_addresses in any case, with any ``+tag`` (RFC 5233 sub-addressing) and with
        or without the root's trailing dot on its domain, or any address at DOMAIN_NAME or one of its
        subdomains (thread.DOMAIN_NAME's thread addresses included)."""
        local, _, domain = address.strip().strip("<>").strip().lower().rpartition("@")
        domain = domain.rstrip(".")
        if not local:
            return False
        ours = self.domain_name.strip().lower().rstrip(".")
        if ours and (domain == ours or domain.endswith("." + ours)):
            return True
        return (
            f"{local.partition('+')[0]}@{domain}" in self.own_addresses
            or f"{local}@{domain}" in self.own_addresses
        )

    def _check(self) -> None:
        # A key for a mailbox that gets no mail is a typo; one for the owner's would be a second owner key.
        mine = self.mailbox_addresses if self.keyed_mailboxes else frozenset()
        for box in self.keyed_mailboxes:
            if box.lower() in self.owner_addresses:
                raise ConfigError(
                    f"MAILBOX_KEYS: {box} is the owner's mailbox: mail to it is encrypted to the owner's "
                    "key (OWNER_SMIME_CERT or OWNER_PGP_KEY); remove it from MAILBOX_KEYS"
                )
            if box.lower() not in mine:
                raise ConfigError(
                    f"MAILBOX_KEYS: {box} is not a mailbox of any public address (PUBLIC_ADDRESSES "
                    '"forward_to"): give keys only for the mailboxes mail is forwarded to'
                )

    @property
    def encrypts_to_owner(self) -> bool:
        """Whether mail to the owner is encrypted (a key configured: its text, its file or its parameter)."""
        return bool(self.owner_key_parameter or self.owner_key)


@dataclass(frozen=True, init=False, repr=False, eq=False)
class Sending(OwnerAddresses):
    """What every path to SES shares: the bucket, the send records, suppression and alerts."""

    bucket: str = setting("", "EMAIL_BUCKET", derive=lambda c: c.name("mail"))
    # SNS topic name for owner alerts (final send failures, rejected replies)
    alert_topic: str = setting("", "ALERT_TOPIC_NAME", derive=lambda c: c.name("alerts"))
    alert_topic_arn: str = setting("")  # resolved from alert_topic and the account when empty
    # Executables and scripts: withheld (stored under withheld/, named in the forward), also inside zips.
    attachment_deny_types: tuple[str, ...] = setting(
        ("exe", "scr", "com", "bat", "cmd", "js", "vbs", "jse", "wsf", "ps1", "msi", "jar", "lnk", "hta")
    )
    # How long the download links of a shortened forward work (S3 allows 7 days at most;
    # common.aws.s3.presign_get)
    forward_link_days: int = setting(
        7, check=_rule(lambda v: 1 <= v <= 7, "FORWARD_LINK_DAYS must be 1 to 7")
    )
    forward_queue: str = setting(
        "", "FORWARD_QUEUE_NAME", derive=lambda c: c.name("forward")
    )  # owner notices
    idempotency_table: str = setting("", derive=lambda c: c.name("idempotency"))
    # While forwards are held, one forward per interval probes the mailbox
    owner_hold_probe_s: int = setting(6 * 3600, "OWNER_HOLD_PROBE_SECONDS", check=_not_negative)
    # --- security (docs/security.md): display name on replies and acks; the owner's own name never goes out
    public_name: str = setting(
        "",
        check=_rule(
            lambda v: not _PUBLIC_NAME_FORBIDDEN.search(v) and len(v) <= 64,
            "PUBLIC_NAME must be at most 64 characters without '@', quotes, angle brackets or "
            "control characters",
        ),
    )
    send_status_table: str = setting("", derive=lambda c: c.name("send-status"))
    suppression_table: str = setting("", derive=lambda c: c.name("suppression"))


@dataclass(frozen=True)
class SenderConfig(Sending):
    """ack-sender, forward-sender and reply-sender (one logic, common/senders): the queue they consume,
    backoff, rate, quota and idempotency. Each sender's class names the queue it consumes."""

    # The host configuration's field naming the queue this sender consumes (deploy/functions.py).
    queue_field: ClassVar[str] = ""
    queue: ClassVar[str] = ""  # that queue's default resource name

    send_queue: str = setting(
        "", "SEND_QUEUE_NAME", derive=lambda c: c.name(c.queue) if c.queue else ""
    )  # the queue this sender consumes
    attempt_reserve_s: float = setting(10.0, "ATTEMPT_RESERVE_SECONDS")  # kept after the last retry's sleep
    encrypted_subject: str = setting(
        "[...]"
    )  # outer Subject of encrypted mail ("original" keeps the real one)
    # A send's record must outlive every copy of its message: main queue (1 d) + DLQ (14 d) from the
    # first enqueue, and a DLQ redrive starts that clock again ("redriven messages are treated as new
    # messages", SQS DG), so two full cycles: a copy redriven once, late, is still recognised as sent
    # (tests/unit/test_config.py).
    idempotency_ttl_s: int = setting(30 * 24 * 3600, "IDEMPOTENCY_TTL_SECONDS")
    # Queue redrive; the last receive raises the alert
    max_receive_count: int = setting(5, check=_rule(lambda v: v >= 1, "MAX_RECEIVE_COUNT must be at least 1"))
    # SES MaxSendRate shared by all senders (messages/second)
    max_send_rate: float = setting(14.0, check=_rule(lambda v: v > 0, "MAX_SEND_RATE must be positive"))
    # How long a message waits (its visibility timeout) when SES says the daily quota is used up. The
    # quota is a rolling 24 h window, so room comes back as the oldest sends age out; SQS caps a
    # visibility timeout at 12 h (common/senders/handler.py).
    quota_wait_s: int = setting(3600, "QUOTA_WAIT_SECONDS", check=_visibility)
    # In-Lambda SES retries (docs/senders.md)
    retry_delays: tuple[float, ...] = setting(
        (0.0, 5.0, 30.0, 120.0),
        "RETRY_DELAYS_SECONDS",
        check=_rule(
            lambda v: bool(v) and all(d >= 0 for d in v),
            "RETRY_DELAYS_SECONDS must be a comma-separated list of non-negative seconds",
        ),
    )
    # How long a send SES's sandbox refused waits before it is tried again (its recipient may have been
    # verified, or production access granted, meanwhile): common/senders/handler.py.
    sandbox_wait_s: int = setting(900, "SANDBOX_WAIT_SECONDS", check=_visibility)
    # Every send names it, so SES publishes its events to the feedback topic
    ses_configuration_set: str = setting("", derive=lambda c: c.prefix)


class AckSenderConfig(SenderConfig):  # a queue of its own, no field: SenderConfig's methods serve
    queue_field: ClassVar[str] = "ack_queue"
    queue: ClassVar[str] = "ack"


class ForwardSenderConfig(SenderConfig):  # a queue of its own, no field: SenderConfig's methods serve
    queue_field: ClassVar[str] = "forward_queue"
    queue: ClassVar[str] = "forward"


class ReplySenderConfig(SenderConfig):  # a queue of its own, no field: SenderConfig's methods serve
    queue_field: ClassVar[str] = "reply_queue"
    queue: ClassVar[str] = "reply"


@dataclass(frozen=True, init=False, repr=False, eq=False)
class Delivery(Sending):
    """What inbound-handler and reply-handler share through common/delivery: the tables, the queues they
    fill, the thread secret, acks, quarantine, withholding and retention of what they record."""

    # The HMAC secret of the thread addresses: from its SSM SecureString at cold start (with_secrets).
    thread_secret: str = setting(
        "",
        check=_rule(lambda v: not v or len(v) >= 16, "THREAD_SECRET must be at least 16 characters"),
        required=True,
        parameter="thread_secret_parameter",
    )
    thread_secret_parameter: str = setting("", derive=lambda c: f"/{c.project}/{c.env}/thread-secret")
    # --- security (docs/security.md): who is acked
    # Acks per rolling clock hour, all senders (backscatter budget); 0 = no acks
    ack_limit_per_hour: int = setting(20, check=_not_negative)
    ack_limit_per_domain_per_hour: int = setting(5, check=_not_negative)  # acks per hour to one sender domain
    ack_queue: str = setting("", "ACK_QUEUE_NAME", derive=lambda c: c.name("ack"))
    claim_check_bytes: int = setting(200 * 1024)  # queue messages above this go to S3 (claim check)
    conversations_table: str = setting("", derive=lambda c: c.name("conversations"))
    # SESv2 SendEmail's message limit (common.aws.ses.MAX_MESSAGE_BYTES)
    max_forward_bytes: int = setting(40_000_000)
    opaque_relay_domains: tuple[str, ...] = setting(("bounce.linkedin.com",))
    # One record per quarantined mail: digest and release (common/store/quarantine.py)
    quarantine_table: str = setting("", derive=lambda c: c.name("quarantine"))
    # "off" forwards HTML with its tracking pixels and redirects (common/mail/trackers.py)
    remove_trackers: str = setting("on", check=_one_of("on", "off"))
    # --- retention (docs/owner.md "What is stored, for how long"): days; 0 keeps for ever
    retention_archive_days: int = setting(
        730, check=retention_days
    )  # conversations/ and the records (DynamoDB TTL)
    # spam/ and the quarantine records: digests offer a week, release after
    retention_quarantine_days: int = setting(30, check=retention_days)
    sender_lists_table: str = setting(
        "", derive=lambda c: c.name("sender-lists")
    )  # common/store/senderlists.py
    spam_log_group: str = setting("", derive=lambda c: f"/{c.project}/{c.env}/spam")

    def _check(self) -> None:
        # Without a key a forward goes out in clear: the setting could hide nothing, and it is refused
        # here (the deploy, `email-handler dev`, and the handlers' start) rather than ignored. Each
        # mailbox of a hidden address needs its own: the owner's, or the mailbox's (MAILBOX_KEYS).
        if not (self.public_email or self.public_emails):
            return
        table = addresses.of(self)
        hidden = [a for a in (*table.listed, table.catch_all) if a is not None and a.hide_correspondent]
        owners = [a.address for a in hidden if any(self._owner_unkeyed(b) for b in self.mailboxes(a))]
        if owners:
            raise ConfigError(
                f"PUBLIC_ADDRESSES: {', '.join(owners)}: hide_correspondent needs the owner's key "
                "(OWNER_SMIME_CERT or OWNER_PGP_KEY): only an encrypted forward can hide who wrote from the "
                "mailbox provider (docs/owner.md)"
            )
        for a in hidden:
            if lacking := [b for b in self.mailboxes(a) if not self.has_key(b)]:
                raise ConfigError(
                    f"PUBLIC_ADDRESSES: {a.address}: hide_correspondent needs a key for each of its "
                    f"mailboxes, and {', '.join(lacking)} has none: give it one in MAILBOX_KEYS (only an "
                    "encrypted forward can hide who wrote from the mailbox provider; docs/owner.md)"
                )

    def _owner_unkeyed(self, mailbox: str) -> bool:
        return mailbox.strip().lower() in self.owner_addresses and not self.encrypts_to_owner

    @property
    def forward_budget(self) -> int:
        """The size a forward may have before the sender encrypts it: encryption base64-encodes the whole
        message once more (S/MIME's DER, OpenPGP's armor: 4/3 plus line breaks), so the budget shrinks
        until the encrypted message still fits SES's limit (tests/unit/test_encrypt.py measures it)."""
        return (
            int(self.max_forward_bytes / ENCRYPTION_GROWTH)
            if self.encrypts_to_owner or self.keyed_mailboxes
            else self.max_forward_bytes
        )


@dataclass(frozen=True)
class InboundHandlerConfig(Delivery):
    """inbound-handler: the spam rules and SES feedback besides delivery."""

    spam_rules_parameter: str = setting("", derive=lambda c: f"/{c.project}/{c.env}/spam-rules-key")
    spam_rules_ttl_s: float = setting(300.0, "SPAM_RULES_TTL_SECONDS")
    transient_bounce_limit: int = setting(5)
    # A suppression from transient bounces expires after this
    transient_suppression_s: int = setting(
        3 * 24 * 3600, "TRANSIENT_SUPPRESSION_SECONDS", check=_not_negative
    )


@dataclass(frozen=True)
class ReplyHandlerConfig(Delivery):
    """reply-handler: the owner's names it removes, how old a reply may be, the queue it fills."""

    owner_names: tuple[str, ...] = setting(
        ()
    )  # the owner's names (comma-separated): hidden in all a contact receives
    # An owner message with an older Date is treated as a replay
    reply_max_age_s: int = setting(30 * 24 * 3600, "REPLY_MAX_AGE_SECONDS", check=_not_negative)
    reply_queue: str = setting("", "REPLY_QUEUE_NAME", derive=lambda c: c.name("reply"))


@dataclass(frozen=True)
class ExtractorConfig(Deployment):
    """attachment-extractor: its limits, and nothing of mail, owner or sending."""

    max_input_bytes: int = setting(25 * 1024 * 1024, "EXTRACT_MAX_INPUT_BYTES")
    max_pages: int = setting(500, "EXTRACT_MAX_PAGES")
    max_output_chars: int = setting(2_000_000, "EXTRACT_MAX_OUTPUT_CHARS")
    extract_time_budget_s: float = setting(50.0, "EXTRACT_TIME_BUDGET_SECONDS")


# The function -> its class: what make_handler loads at cold start and what the deploy and the local modes
# give each function (its class's variables, deploy/functions.py).
CONFIGS: dict[str, type[Deployment]] = {
    "inbound-handler": InboundHandlerConfig,
    "reply-handler": ReplyHandlerConfig,
    "attachment-extractor": ExtractorConfig,
    "ack-sender": AckSenderConfig,
    "forward-sender": ForwardSenderConfig,
    "reply-sender": ReplySenderConfig,
}


def dlq_name(queue: str) -> str:
    """Every queue's dead-letter queue (provisioning creates it; a sender moves a message there itself
    when retrying cannot help)."""
    return f"{queue}-dlq"


def settings(cls: type) -> tuple[tuple[Field[Any], Setting], ...]:
    """The class's fields with what they say about their variables."""
    return tuple((f, f.metadata["setting"]) for f in fields(cls) if "setting" in f.metadata)


def required(cls: type) -> tuple[str, ...]:
    """The fields the class's function does not start without (its secrets included)."""
    return tuple(f.name for f, s in settings(cls) if s.required)


def env_name(cls: type, field_name: str) -> str:
    """The variable of one of the class's fields."""
    found = next((s for f, s in settings(cls) if f.name == field_name), None)
    if found is None:
        raise ConfigError(f"{cls.__name__} has no setting {field_name}")
    return found.env or field_name.upper()


def variables(cls: type) -> frozenset[str]:
    """Every variable the class reads: what the deploy and the local modes give the function whose class
    it is, and nothing of another function (deploy/functions.py)."""
    return frozenset(
        name
        for f, s in settings(cls)
        if s.from_env and not s.parameter
        for name in (env_name(cls, f.name), *s.fallbacks)
    )


def _parse(name: str, typ: str, raw: str) -> object:
    try:
        if typ.startswith("tuple[float"):
            return tuple(float(v) for v in _csv(raw))
        if typ.startswith("tuple"):
            return _csv(raw)
        if typ == "int":
            return int(raw)
        if typ == "float":
            return float(raw)
        if typ == "bool":
            return {"true": True, "false": False}[raw.strip().lower()]
    except (ValueError, KeyError):
        kind = "true or false" if typ == "bool" else f"a valid {typ}"
        raise ConfigError(f"{name}={raw!r} is not {kind}") from None
    return raw.strip()


def with_secrets[C: Deployment](cfg: C) -> C:
    """Each required secret of the class from its SSM SecureString when the environment does not carry it
    (neither on AWS nor in the local modes: the functions get no secret in their variables), then every
    required setting of the class checked. Called once, at cold start."""

    secrets = [(f.name, s) for f, s in settings(type(cfg)) if s.parameter and s.required]
    wanted = [(n, s.parameter) for n, s in secrets if not getattr(cfg, n) and getattr(cfg, s.parameter)]
    for secret, parameter in wanted:
        try:
            found: dict[str, Any] = {secret: ssm.get_parameter(getattr(cfg, parameter), decrypt=True)}
            cfg = replace(cfg, **found)
        except Exception as exc:
            if error_code(exc) != "ParameterNotFound":
                raise
    if wanted:
        cfg.check()
    return cfg.require(*required(type(cfg)))  # one message naming every missing one, secrets too


# The secrets kept out of every function's configuration (each field -> the field naming its SSM
# parameter): provisioning (local) and the deploy store them (deploy/resources.py).
def secret_parameters(cls: type) -> dict[str, str]:
    return {f.name: s.parameter for f, s in settings(cls) if s.parameter}
