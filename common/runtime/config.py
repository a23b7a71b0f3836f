"""One typed configuration object, read from the environment and validated at start.

Every function calls :func:`load` at import time (cold start) with the variables
it cannot work without; a missing or malformed value raises :class:`ConfigError`
naming the variable, which the runtime reports as the init error.

Resource names follow ``{project}-{env}-{name}`` and are derived from
``PROJECT_NAME`` / ``ENVIRONMENT`` unless a variable overrides one.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace

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

# 7-bit ASCII only: "Amazon SES does not support the SMTPUTF8 extension ... the email address string must be
# 7-bit ASCII" (SES API, Destination), domains in punycode. A Unicode owner address would never match
# SES's envelope, so every owner reply would be refused; say so at start instead.
_EMAIL = re.compile(r"^[!-;=?A-~]+@[A-Za-z0-9.-]+\.[A-Za-z0-9-]+$")
EMAIL_ADDRESS = _EMAIL  # the same rule for an address a host command is given (ses verify-address)
_DOMAIN = re.compile(r"^(?=.{1,253}$)([A-Za-z0-9-]{1,63}\.)+[A-Za-z0-9-]{2,63}$")
# PutEventsRequestEntry's EventBusName: "The name or ARN of the event bus", 1-256 characters of
# [/\.\-_A-Za-z0-9]+ for a name (EventBridge API reference, EventBus, Name).
_EVENT_BUS = re.compile(
    r"(?=.{1,256}$)(?:[/.\-_A-Za-z0-9]+|arn:aws[a-z-]*:events:[a-z0-9-]+:[0-9]{12}:event-bus/[/.\-_A-Za-z0-9]+)"
)


def _csv(value: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in value.split(",") if part.strip())


@dataclass(frozen=True, slots=True)
class Config:
    project: str = PROJECT
    env: str = DEFAULT_ENV
    region: str = "us-east-1"
    domain_name: str = ""
    public_email: str = ""  # the default public address (PUBLIC_EMAIL's first; common/runtime/addresses.py)
    public_emails: tuple[str, ...] = ()  # every address PUBLIC_EMAIL and PUBLIC_ADDRESSES list, *@DOMAIN too
    public_addresses: str = ""  # PUBLIC_ADDRESSES: each address's settings, as inline JSON
    private_email: str = ""
    owner_emails: tuple[str, ...] = ()
    owner_names: tuple[str, ...] = ()  # the owner's names (comma-separated): hidden in all a contact receives
    thread_secret: str = ""
    thread_secret_parameter: str = ""  # SSM SecureString holding THREAD_SECRET on AWS (read at cold start)
    bucket: str = ""
    conversations_table: str = ""
    idempotency_table: str = ""
    send_status_table: str = ""
    suppression_table: str = ""
    sender_lists_table: str = ""  # the owner's block/allow lists (common/store/senderlists.py)
    quarantine_table: str = (
        ""  # one record per quarantined mail: digest and release (common/store/quarantine.py)
    )
    ack_queue: str = ""
    forward_queue: str = ""
    reply_queue: str = ""
    send_queue: str = ""  # the queue a sender function consumes
    # The function this process runs (common.runtime.functions): make_handler sets it, never the environment.
    function: str = ""
    alert_topic: str = ""  # SNS topic name for owner alerts (final send failures, rejected replies)
    alert_topic_arn: str = ""  # resolved from alert_topic and the account when empty
    # The account the functions run in, set by the deploy: queue URLs and topic ARNs are built from it
    # without an sts:GetCallerIdentity call at cold start (common/aws/sts.py). Empty: asked of STS.
    account_id: str = ""
    feedback_topic: str = ""  # SNS topic SES publishes Delivery/Bounce/Complaint to
    ses_configuration_set: str = ""  # every send names it, so SES publishes its events to feedback_topic
    spam_rules_parameter: str = ""
    spam_log_group: str = ""
    opaque_relay_domains: tuple[str, ...] = ("bounce.linkedin.com",)
    # Executables and scripts: withheld (stored under withheld/, named in the forward), also inside zips.
    attachment_deny_types: tuple[str, ...] = (
        "exe",
        "scr",
        "com",
        "bat",
        "cmd",
        "js",
        "vbs",
        "jse",
        "wsf",
        "ps1",
        "msi",
        "jar",
        "lnk",
        "hta",
    )
    ack_subject: str = "Thanks for your message"
    ack_template: str = (
        "Hello{name},\n\nThanks for getting in touch. This is an automatic acknowledgement: "
        "your message has arrived and I will reply personally soon.\n\nBest regards\n"
    )
    max_send_rate: float = 14.0  # SES MaxSendRate shared by all senders (messages/second)
    retry_delays: tuple[float, ...] = (0.0, 5.0, 30.0, 120.0)  # in-Lambda SES retries (docs/senders.md)
    attempt_reserve_s: float = 10.0  # time kept free after the last retry's sleep for the send itself
    max_receive_count: int = 5  # queue redrive; the last receive raises the alert
    # How long a message waits (its visibility timeout) when SES says the daily quota is used up. The
    # quota is a rolling 24 h window, so room comes back as the oldest sends age out; SQS caps a
    # visibility timeout at 12 h (common/senders/handler.py).
    quota_wait_s: int = 3600
    # How long a send SES's sandbox refused waits before it is tried again (its recipient may have been
    # verified, or production access granted, meanwhile): common/senders/handler.py.
    sandbox_wait_s: int = 900
    # A send's record must outlive every copy of its message: main queue (1 d) + DLQ (14 d) from the
    # first enqueue, and a DLQ redrive starts that clock again ("redriven messages are treated as new
    # messages", SQS DG), so two full cycles: a copy redriven once, late, is still recognised as sent
    # (tests/unit/test_config.py).
    idempotency_ttl_s: int = 30 * 24 * 3600
    claim_check_bytes: int = 200 * 1024  # queue messages above this go to S3 (claim check)
    max_forward_bytes: int = 40_000_000  # SESv2 SendEmail's message limit (common.aws.ses.MAX_MESSAGE_BYTES)
    # How long the download links of a shortened forward work (S3 allows 7 days at most;
    # common.aws.s3.presign_get)
    forward_link_days: int = 7
    spam_rules_ttl_s: float = 300.0
    transient_bounce_limit: int = 5
    # --- security (docs/security.md): who is acked, what a contact sees, how the owner's mail is protected
    public_name: str = ""  # display name on replies and acks; the owner's own name never goes out
    ack_limit_per_hour: int = 20  # acks per rolling clock hour, all senders (backscatter budget); 0 = no acks
    ack_limit_per_domain_per_hour: int = 5  # acks per hour to one sender domain
    transient_suppression_s: int = 3 * 24 * 3600  # a suppression from transient bounces expires after this
    owner_hold_probe_s: int = 6 * 3600  # while forwards are held, one forward per interval probes the mailbox
    reply_max_age_s: int = 30 * 24 * 3600  # an owner message with an older Date is treated as a replay
    max_input_bytes: int = 25 * 1024 * 1024
    max_pages: int = 500
    max_output_chars: int = 2_000_000
    extract_time_budget_s: float = 50.0
    # --- the owner's key (docs/owner.md): mail to the owner is encrypted to it when one is configured
    owner_smime_cert: str = ""  # host tools: path of a PEM X.509 certificate (S/MIME, RFC 8551)
    owner_pgp_key: str = ""  # host tools: path of an ASCII-armored OpenPGP public key (PGP/MIME, RFC 3156)
    owner_key: str = ""  # the key's text; functions read it from owner_key_parameter at cold start
    owner_key_parameter: str = (
        ""  # SSM parameter holding the key; set = encryption on (common/mail/encrypt.py)
    )
    # --- retention (docs/owner.md "What is stored, for how long"): days; 0 keeps for ever
    retention_archive_days: int = 730  # conversations/ and the conversation records (DynamoDB TTL)
    retention_attachments_days: int = 730  # attachments/, withheld/, reply-attachments/
    retention_text_days: int = 730  # extracted-text/
    retention_quarantine_days: int = (
        30  # spam/ and the quarantine records: digests offer a week, release after
    )
    retention_rejected_days: int = 90  # rejected/ and bounces/: evidence for the owner's alerts
    remove_trackers: str = (
        "on"  # "off" forwards HTML with its tracking pixels and redirects (common/mail/trackers.py)
    )
    encrypted_subject: str = "[...]"  # outer Subject of encrypted mail ("original" keeps the real one)
    # --- outcome events (docs/owner.md, "Events"): the bus every mail's outcome is put on, and whether
    # an event may name the contact and the mail's subject (never by default)
    event_bus_name: str = "default"
    events_include_contacts: bool = False
    _env_names: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)

    @property
    def prefix(self) -> str:
        return f"{self.project}-{self.env}"

    def name(self, resource: str) -> str:
        """``{project}-{env}-{resource}``: the name of every AWS resource of this deployment
        (docs/CONTRACT.md)."""
        return f"{self.prefix}-{resource}"

    @property
    def thread_domain(self) -> str:
        return f"thread.{self.domain_name}"

    @property
    def owner_addresses(self) -> frozenset[str]:
        """The owner's mailboxes (OWNER_EMAILS and PRIVATE_EMAIL), lowercase: who may reply and command."""
        return frozenset(a.strip().lower() for a in (*self.owner_emails, self.private_email) if a.strip())

    @property
    def own_addresses(self) -> frozenset[str]:
        """The owner's mailboxes and every public address: never acked, suppressed, blocked or written
        to as a contact (a catch-all's addresses are all at DOMAIN_NAME, which is_own covers)."""
        public = {a for a in (self.public_email, *self.public_emails) if a.strip() and "*" not in a}
        return self.owner_addresses | {a.strip().lower() for a in public}

    def is_owner(self, address: str) -> bool:
        """One of the owner's own mailboxes (owner_addresses), in any case and with any ``+tag``: a
        contact with such an address is the owner writing to the public address, whose answer would
        mail the owner back (a loop)."""
        local, _, domain = address.strip().strip("<>").strip().lower().rpartition("@")
        domain = domain.rstrip(".")
        return bool(local) and bool(
            {f"{local}@{domain}", f"{local.partition('+')[0]}@{domain}"} & self.owner_addresses
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

    @property
    def encrypts_to_owner(self) -> bool:
        """Whether mail to the owner is encrypted (a key configured: its text, its file or its parameter)."""
        return bool(self.owner_key_parameter or self.owner_key)

    @property
    def forward_budget(self) -> int:
        """The size a forward may have before the sender encrypts it: encryption base64-encodes the whole
        message once more (S/MIME's DER, OpenPGP's armor: 4/3 plus line breaks), so the budget shrinks
        until the encrypted message still fits SES's limit (tests/unit/test_encrypt.py measures it)."""
        return (
            int(self.max_forward_bytes / ENCRYPTION_GROWTH)
            if self.encrypts_to_owner
            else self.max_forward_bytes
        )

    def require(self, *names: str) -> Config:
        """Raise ConfigError naming every required field that is empty."""
        missing = [self._env_names.get(n, n.upper()) for n in names if not getattr(self, n)]
        if missing:
            raise ConfigError(
                f"missing required environment variable(s): {', '.join(missing)} "
                "(see the configuration table in README.md)"
            )
        return self


# field name -> environment variable (only where the two differ by more than case)
_ENV = {
    "project": "PROJECT_NAME",
    "env": "ENVIRONMENT",
    "bucket": "EMAIL_BUCKET",
    "ack_queue": "ACK_QUEUE_NAME",
    "forward_queue": "FORWARD_QUEUE_NAME",
    "reply_queue": "REPLY_QUEUE_NAME",
    "send_queue": "SEND_QUEUE_NAME",
    "max_input_bytes": "EXTRACT_MAX_INPUT_BYTES",
    "max_pages": "EXTRACT_MAX_PAGES",
    "max_output_chars": "EXTRACT_MAX_OUTPUT_CHARS",
    "extract_time_budget_s": "EXTRACT_TIME_BUDGET_SECONDS",
    "alert_topic": "ALERT_TOPIC_NAME",
    "feedback_topic": "FEEDBACK_TOPIC_NAME",
    "retry_delays": "RETRY_DELAYS_SECONDS",
    "attempt_reserve_s": "ATTEMPT_RESERVE_SECONDS",
    "quota_wait_s": "QUOTA_WAIT_SECONDS",
    "sandbox_wait_s": "SANDBOX_WAIT_SECONDS",
    "idempotency_ttl_s": "IDEMPOTENCY_TTL_SECONDS",
    "spam_rules_ttl_s": "SPAM_RULES_TTL_SECONDS",
    "transient_suppression_s": "TRANSIENT_SUPPRESSION_SECONDS",
    "owner_hold_probe_s": "OWNER_HOLD_PROBE_SECONDS",
    "reply_max_age_s": "REPLY_MAX_AGE_SECONDS",
}


# Fields the code sets, not the environment.
_NOT_FROM_ENV = frozenset({"function", "public_emails"})


def env_name(field_name: str) -> str:
    return _ENV.get(field_name, field_name.upper())


# "The maximum [visibility timeout] is 12 hours" (SQS Developer Guide, "Amazon SQS visibility timeout",
# https://docs.aws.amazon.com/AWSSimpleQueueService/latest/SQSDeveloperGuide/sqs-visibility-timeout.html).
MAX_VISIBILITY_S = 12 * 3600


def load(environ: Mapping[str, str] | None = None, require: Iterable[str] = ()) -> Config:
    """Read and validate the configuration; ``require`` names fields that must be non-empty."""
    env = os.environ if environ is None else environ
    values: dict[str, object] = {}
    for f in fields(Config):
        if f.name.startswith("_") or f.name in _NOT_FROM_ENV:
            continue
        raw = env.get(env_name(f.name))
        if raw is None or raw == "":
            continue
        values[f.name] = _parse(f.name, f.type, raw)
    region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
    if region:
        values["region"] = region
    if "public_email" in values or "public_addresses" in values:  # several addresses, a catch-all
        listed, inline = addresses.split(
            str(values.get("public_email", "")), str(values.get("public_addresses", ""))
        )
        values["public_emails"], values["public_addresses"] = listed, inline
        values["public_email"] = next((a for a in listed if not a.startswith("*@")), "")

    cfg = Config(**values, _env_names={f.name: env_name(f.name) for f in fields(Config)})  # type: ignore[arg-type]
    cfg = _with_defaults(cfg)
    _validate(cfg)
    return cfg.require(*require)


def _parse(name: str, typ: object, raw: str) -> object:
    typ = str(typ)
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
        raise ConfigError(f"{env_name(name)}={raw!r} is not {kind}") from None
    return raw.strip()


def _with_defaults(cfg: Config) -> Config:

    derived = {
        "bucket": cfg.name("mail"),
        "conversations_table": cfg.name("conversations"),
        "idempotency_table": cfg.name("idempotency"),
        "send_status_table": cfg.name("send-status"),
        "suppression_table": cfg.name("suppression"),
        "sender_lists_table": cfg.name("sender-lists"),
        "quarantine_table": cfg.name("quarantine"),
        "ack_queue": cfg.name("ack"),
        "forward_queue": cfg.name("forward"),
        "reply_queue": cfg.name("reply"),
        "spam_rules_parameter": f"/{cfg.project}/{cfg.env}/spam-rules-key",
        "thread_secret_parameter": f"/{cfg.project}/{cfg.env}/thread-secret",
        "spam_log_group": f"/{cfg.project}/{cfg.env}/spam",
        "alert_topic": cfg.name("alerts"),
        "feedback_topic": cfg.name("ses-feedback"),
        "ses_configuration_set": cfg.prefix,
    }
    if cfg.owner_smime_cert or cfg.owner_pgp_key or cfg.owner_key:
        derived["owner_key_parameter"] = f"/{cfg.project}/{cfg.env}/owner-key"
    changes: dict[str, object] = {k: v for k, v in derived.items() if not getattr(cfg, k)}
    if not cfg.owner_emails and cfg.private_email:
        changes["owner_emails"] = (cfg.private_email,)
    return replace(cfg, **changes) if changes else cfg  # type: ignore[arg-type]


# One flat list of independent checks, one `if` per rule: a split would only add names.
def _validate(cfg: Config) -> None:  # noqa: C901, PLR0912
    for name in ("public_email", "private_email"):
        value = getattr(cfg, name)
        if value and not _EMAIL.match(value):
            raise ConfigError(
                f"{env_name(name)}={value!r} is not an ASCII email address (use the domain's punycode form)"
            )
    for value in cfg.owner_emails:
        if not _EMAIL.match(value):
            raise ConfigError(f"OWNER_EMAILS contains {value!r}, which is not an ASCII email address")
    if cfg.domain_name and not _DOMAIN.match(cfg.domain_name):
        raise ConfigError(f"DOMAIN_NAME={cfg.domain_name!r} is not a domain name")
    if (
        cfg.domain_name
        and cfg.public_email
        and not cfg.public_email.lower().endswith("@" + cfg.domain_name.lower())
    ):
        raise ConfigError(f"PUBLIC_EMAIL must be an address at DOMAIN_NAME ({cfg.domain_name})")
    if cfg.public_emails and (
        why := addresses.problem(cfg.public_emails, cfg.domain_name, cfg.public_addresses)
    ):
        raise ConfigError(why)
    if cfg.account_id and not re.fullmatch(r"[0-9]{12}", cfg.account_id):
        raise ConfigError(f"ACCOUNT_ID={cfg.account_id!r} is not an AWS account id (12 digits)")
    if cfg.thread_secret and len(cfg.thread_secret) < 16:
        raise ConfigError("THREAD_SECRET must be at least 16 characters")
    for name in (
        "retention_archive_days",
        "retention_attachments_days",
        "retention_text_days",
        "retention_quarantine_days",
        "retention_rejected_days",
    ):
        if getattr(cfg, name) < 0:
            raise ConfigError(f"{env_name(name)} must be a number of days (0 keeps for ever)")
    if cfg.remove_trackers not in ("on", "off"):
        raise ConfigError(f"REMOVE_TRACKERS={cfg.remove_trackers!r} must be on or off")
    if cfg.owner_smime_cert and cfg.owner_pgp_key:
        raise ConfigError(
            "set OWNER_SMIME_CERT or OWNER_PGP_KEY, not both: mail to the owner is encrypted to one key"
        )
    if cfg.max_send_rate <= 0:
        raise ConfigError("MAX_SEND_RATE must be positive")
    if not cfg.retry_delays or any(d < 0 for d in cfg.retry_delays):
        raise ConfigError("RETRY_DELAYS_SECONDS must be a comma-separated list of non-negative seconds")
    if cfg.max_receive_count < 1:
        raise ConfigError("MAX_RECEIVE_COUNT must be at least 1")
    if not 1 <= cfg.forward_link_days <= 7:  # SigV4 presigned URLs last seven days at most (common.aws.s3)
        raise ConfigError("FORWARD_LINK_DAYS must be 1 to 7")
    for name, value in (
        ("QUOTA_WAIT_SECONDS", cfg.quota_wait_s),
        ("SANDBOX_WAIT_SECONDS", cfg.sandbox_wait_s),
    ):
        if not 1 <= value <= MAX_VISIBILITY_S:
            raise ConfigError(
                f"{name} must be between 1 and {MAX_VISIBILITY_S} (SQS's 12-hour visibility maximum)"
            )
    if re.search(r"[@\x00-\x1f\x7f<>\"]", cfg.public_name) or len(cfg.public_name) > 64:
        raise ConfigError(
            "PUBLIC_NAME must be at most 64 characters without '@', quotes, angle brackets or "
            "control characters"
        )
    for name in (
        "ack_limit_per_hour",
        "ack_limit_per_domain_per_hour",
        "transient_suppression_s",
        "owner_hold_probe_s",
        "reply_max_age_s",
    ):
        if getattr(cfg, name) < 0:
            raise ConfigError(f"{env_name(name)} must not be negative")
    if not _EVENT_BUS.fullmatch(cfg.event_bus_name):
        raise ConfigError(
            f"EVENT_BUS_NAME={cfg.event_bus_name!r} is not an event bus name (letters, digits, . - _ /) "
            "or an event bus ARN"
        )
    if not re.fullmatch(r"[a-z0-9-]+", cfg.env):
        raise ConfigError(f"ENVIRONMENT={cfg.env!r} must be lowercase letters, digits or hyphens")


# Secrets kept out of every function's configuration, each in an SSM SecureString: the field -> the field
# naming its parameter. Provisioning (local) and the deploy store them (deploy/resources.py); a function
# reads those it requires at cold start (with_secrets), locally as on AWS.
SECRET_PARAMETERS: dict[str, str] = {"thread_secret": "thread_secret_parameter"}


def with_secrets(cfg: Config, require: Iterable[str] = ()) -> Config:
    """Each required secret of SECRET_PARAMETERS from its SSM SecureString when the environment does not
    carry it (neither on AWS nor in the local modes: the functions get no secret in their variables).
    Called once, at cold start."""

    wanted = [
        (s, p)
        for s, p in SECRET_PARAMETERS.items()
        if s in require and not getattr(cfg, s) and getattr(cfg, p)
    ]
    if wanted:
        for secret, parameter in wanted:
            try:
                found: dict[str, object] = {secret: ssm.get_parameter(getattr(cfg, parameter), decrypt=True)}
                cfg = replace(cfg, **found)  # type: ignore[arg-type]
            except Exception as exc:
                if error_code(exc) != "ParameterNotFound":
                    raise
        _validate(cfg)
    return cfg.require(*require)
