"""The inbound spam policy (first hit wins) and the owner's keyword lists.

The keyword lists are a sectioned text file in S3 whose key is in an SSM parameter, so the owner
edits them without a deploy. They are cached for ``spam_rules_ttl_s``; a pattern that does not
compile is logged and skipped, and a failed reload keeps the last good lists.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from common.mail import limits
from common.mail.autoreply import automatic
from common.mail.parse import ParsedMail, parse
from common.runtime import addresses
from common.runtime.config import Config
from common.runtime.events import SesReceipt
from common.runtime.log import get_logger
from common.store import spamrules
from common.store.senderlists import ALLOW, BLOCK, Listing

log = get_logger("spam")
SECTIONS = ("blocked_sender_domains", "subject_patterns", "body_patterns")
BODY_SCAN_CHARS = 100_000  # bounds the regex work per mail


class Action(StrEnum):
    """What the policy decides for a mail (the value is what the logs and results say)."""

    DROP = "drop"
    QUARANTINE = "quarantine"
    DSN = "dsn"  # archived under bounces/, never forwarded or acked
    FORWARD = "forward"


@dataclass(frozen=True, slots=True)
class Rules:
    blocked_domains: tuple[str, ...] = ()
    subject_patterns: tuple[re.Pattern[str], ...] = ()
    body_patterns: tuple[re.Pattern[str], ...] = ()


@dataclass(frozen=True, slots=True)
class Decision:
    action: Action
    reason: str = ""
    warnings: tuple[str, ...] = ()  # soft authentication failures, shown as a banner on the forward


def parse_rules(text: str) -> tuple[Rules, list[str]]:
    """Parse the sectioned file; returns the rules and one message per skipped line."""
    found: dict[str, list[str]] = {s: [] for s in SECTIONS}
    errors: list[str] = []
    section = ""
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip().lower()
            if section not in found:
                errors.append(f"line {number}: unknown section [{section}]")
            continue
        if section in found:
            found[section].append(line)
        else:
            errors.append(f"line {number}: entry outside a known section")
    patterns: dict[str, list[re.Pattern[str]]] = {"subject_patterns": [], "body_patterns": []}
    for name, compiled in patterns.items():
        for source in found[name]:
            try:
                compiled.append(re.compile(source, re.IGNORECASE))
            except re.error as exc:
                errors.append(f"[{name}] pattern {source!r} skipped: {exc}")
    domains = tuple(d.lower().lstrip("@.") for d in found["blocked_sender_domains"])
    return Rules(domains, tuple(patterns["subject_patterns"]), tuple(patterns["body_patterns"])), errors


class RulesCache:
    """Process-wide cache of the keyword lists (one per warm Lambda sandbox)."""

    def __init__(self) -> None:
        self._rules: Rules | None = None
        self._loaded_at = float("-inf")
        self._lock = threading.Lock()

    def get(self, cfg: Config) -> Rules:
        with self._lock:
            if time.monotonic() - self._loaded_at < cfg.spam_rules_ttl_s and self._rules is not None:
                return self._rules
            try:
                rules = self._load(cfg)
            except Exception as exc:
                log.error(
                    "spam rules could not be loaded; using the last good lists",
                    extra={
                        "error": f"{type(exc).__name__}: {exc}",
                        "have_last_good": self._rules is not None,
                    },
                )
                # Retry at the next TTL, not on every mail, while the source is broken.
                self._loaded_at = time.monotonic()
                self._rules = self._rules or Rules()
                return self._rules
            self._rules, self._loaded_at = rules, time.monotonic()
            return rules

    @staticmethod
    def _load(cfg: Config) -> Rules:
        key, text = spamrules.fetch(cfg)
        rules, errors = parse_rules(text)
        for error in errors:
            log.warning("spam rule skipped", extra={"detail": error, "rules_key": key})
        return rules

    def clear(self) -> None:
        with self._lock:
            self._rules, self._loaded_at = None, float("-inf")


RULES = RulesCache()


def is_dsn(receipt: SesReceipt) -> bool:
    """Bounces and other delivery status notifications have a null or mailer-daemon envelope sender."""
    source = receipt.source.strip().lower()
    return source in ("", "<>") or source.partition("@")[0] in ("mailer-daemon", "postmaster")


def is_dsn_content(mail: ParsedMail) -> bool:
    """A delivery status report by its content type (RFC 3464), whatever the envelope says."""
    ctype = mail.headers.get("content-type", "").lower()
    main = ctype.split(";")[0].strip()
    return main == "message/delivery-status" or (
        main == "multipart/report" and re.search(r"report-type\s*=\s*\"?delivery-status", ctype) is not None
    )


# Non-RFC 3464 delivery reports, recognised by content (docs/inbound.md#delivery-reports lists the
# formats and the corpora they come from). The subjects and first lines the common MTAs write:
_BOUNCE_SUBJECT = re.compile(
    r"^(undeliver(ed|able)|returned mail|mail delivery (failed|failure)"
    r"|delivery (status notification|failure"
    r"|has failed)|failure notice|mail system error|non[- ]?delivery|message not delivered"
    r"|delivery notification"
    r"|undelivered mail returned to sender|warning: could not send message|rejected:|message delayed)",
    re.I,
)
_BOUNCE_BODY = re.compile(
    "|".join(
        (
            r"this message was created automatically by mail delivery software",  # Exim
            r"this is the qmail-send program at",  # qmail
            r"this is the mail system at host",  # Postfix
            r"delivery to the following recipients? failed",  # Gmail
            r"the following addresses had permanent fatal errors",  # Sendmail
            r"transcript of session follows",  # Sendmail, old postmasters
            r"your message (wasn't|was not|could not be) delivered",  # Gmail, Microsoft 365
            r"delivery has failed to these recipients or groups",  # Exchange
            r"i'm sorry to have to inform you that your message could not",  # Postfix's MAILER-DAEMON
            r"(unable|failed) to deliver (your|the) message",
            r"could not be delivered to (one or more|the following) recipients?",
        )
    ),
    re.I,
)
_ROLE_SENDER = re.compile(
    r"^(mailer[-_.]?daemon|postmaster|mail[-_.]?delivery[-_.]?(subsystem|system)?)([-+._].*)?$", re.I
)
BOUNCE_SCAN_CHARS = 20_000  # the report's own words come first; the returned mail follows


def delivery_report(mail: ParsedMail) -> str:
    """Why ``mail`` is a delivery report ('' when nothing says so): its type (RFC 3464), what only a
    mail system adds (a null return path, X-Failed-Recipients), or a mail system's sender with a
    bounce's subject or words. A person's mail from postmaster@ without those is not one."""
    if is_dsn_content(mail):
        return "delivery status notification (multipart/report; report-type=delivery-status)"
    # RFC 5321 4.5.5: the null reverse-path is for non-delivery notifications and other automatic
    # mail; the receiving MTA records the envelope sender as the first Return-Path (RFC 5321 4.4).
    if mail.headers.get("return-path", "").replace(" ", "") == "<>":
        return "delivery report (null sender: Return-Path <>)"
    if "x-failed-recipients" in mail.headers:  # Exim writes it on every bounce it sends
        return "delivery report (X-Failed-Recipients)"
    if any(
        a.declared_type == "message/delivery-status" for a in mail.attachments
    ):  # RFC 3464 2.1, outside a report
        return "delivery report (message/delivery-status part)"
    role = _ROLE_SENDER.match(mail.from_address.partition("@")[0]) or re.fullmatch(
        r"mail delivery (subsystem|system)", mail.display_name.strip(), re.I
    )
    if role is None:
        return ""
    if _BOUNCE_SUBJECT.search(mail.subject.strip()):
        return "delivery report (mail system sender, bounce subject)"
    if _BOUNCE_BODY.search(mail.body_text[:BOUNCE_SCAN_CHARS]):
        return "delivery report (mail system sender, bounce text)"
    return ""


def assess_envelope(receipt: SesReceipt, cfg: Config) -> Decision | None:
    """The rules that need only SES's receipt (verdicts, envelope, recipients): they run before the
    raw mail is parsed, so nothing a stranger wrote is parsed for mail that is dropped anyway."""
    v = receipt.verdicts
    if v.get("virus") == "FAIL":
        return Decision(Action.DROP, "virus verdict FAIL")
    if is_dsn(receipt):
        return Decision(Action.DSN, "delivery status notification (null or mailer-daemon envelope sender)")
    if v.get("spam") == "FAIL":
        return Decision(Action.QUARANTINE, "spam verdict FAIL")
    if v.get("dmarc") == "FAIL" and receipt.dmarc_policy == "reject":
        return Decision(Action.QUARANTINE, "DMARC FAIL with sender policy reject")
    if addresses.of(cfg).written_to(receipt.recipients) is None:  # SES's recipients: every public address
        return Decision(Action.DROP, "recipient is not the public address")
    return None


@dataclass(frozen=True, slots=True)
class Assessment:
    decision: Decision
    mail: ParsedMail | None  # None: decided before parsing (the envelope's rules or a parsing cap)


def assess(
    receipt: SesReceipt,
    raw: bytes,
    cfg: Config,
    rules: Callable[[], Rules],
    lookup: Callable[[str], Listing | None],
) -> Assessment:
    """Every rule, first hit wins: :func:`assess_envelope`; the parsing caps; then the parsed mail's
    (:func:`assess_mail`). Nothing a stranger wrote is parsed before the envelope rules and the caps
    (docs/security.md). ``rules`` gives the keyword lists and ``lookup`` the owner's block/allow entry
    for an address; each is asked only when a parsed mail needs it: ``lookup`` only for a mail the
    keyword lists would quarantine, which an allow entry releases (a mail to forward is checked
    against the block list in the write that records it, common/store/intake.py)."""
    decision = assess_envelope(receipt, cfg)
    if decision is None and (over := limits.screen(raw)):
        decision = Decision(Action.QUARANTINE, f"not parsed: {over}")
    if decision is not None:
        return Assessment(decision, None)
    mail = parse(raw)
    if mail.problems:
        log.warning("mail has malformed parts", extra={"problems": mail.problems[:10]})
    keywords = rules()
    decision = assess_mail(receipt, mail, keywords, None, cfg.is_own)
    # Only a usable address is looked up (an unusable one is quarantined by assess_mail): a
    # 3,000-character local part is a key DynamoDB refuses even on reads.
    if decision.action == Action.QUARANTINE and mail.from_address and not mail.from_problem:
        decision = assess_mail(receipt, mail, keywords, lookup(mail.from_address), cfg.is_own)
    return Assessment(decision, mail)


def assess_mail(
    receipt: SesReceipt,
    mail: ParsedMail,
    rules: Rules,
    listing: Listing | None = None,
    own: Callable[[str], bool] = lambda address: False,
) -> Decision:
    """``listing``: the owner's block/allow entry for the sender (common/store/senderlists.py): a
    block quarantines, an allow skips the keyword lists (SES's verdicts above still apply).
    ``own``: whether an address is this system's own (Config.is_own)."""
    if report := delivery_report(mail):
        return Decision(Action.DSN, report)
    if not mail.from_address:
        return Decision(Action.QUARANTINE, "From header has no usable address")
    if mail.from_problem:
        return Decision(Action.QUARANTINE, f"sender address unusable: {mail.from_problem}")
    if own(mail.from_address) and (why := automatic(mail)):
        # The owner's out-of-office answering the daily digest (From: PUBLIC_EMAIL) would come back as a
        # forward every day. Archived like a bounce, never forwarded or acked; a forged From only hides
        # the forger's own automatic mail.
        return Decision(Action.DSN, f"automatic mail from the owner's own mailbox ({why})")
    if listing is not None and listing.list == BLOCK:
        return Decision(Action.QUARANTINE, f"blocked by the owner ({listing.entry})")
    if listing is None or listing.list != ALLOW:
        keyword = _keyword_hit(mail, rules)
        if keyword:
            return Decision(Action.QUARANTINE, keyword)
    return Decision(Action.FORWARD, warnings=_warnings(receipt))


def _keyword_hit(mail: ParsedMail, rules: Rules) -> str:
    """The owner's keyword lists: why they quarantine this mail ('' if they do not)."""
    domain = mail.from_address.rpartition("@")[2]
    for blocked in rules.blocked_domains:
        if domain == blocked or domain.endswith("." + blocked):
            return f"blocked sender domain {blocked}"
    for pattern in rules.subject_patterns:
        if pattern.search(mail.subject):
            return f"subject matches {pattern.pattern!r}"
    body = mail.body_text[:BODY_SCAN_CHARS]
    for pattern in rules.body_patterns:
        if pattern.search(body):
            return f"body matches {pattern.pattern!r}"
    return ""


def _warnings(receipt: SesReceipt) -> tuple[str, ...]:
    """Soft authentication failures: forwarded, with a banner."""
    v = receipt.verdicts
    warnings = []
    if v.get("spf") == "FAIL":
        warnings.append("SPF check failed: the sending server is not authorised for the sender's domain.")
    if v.get("dmarc") == "FAIL":
        warnings.append(
            f"DMARC check failed (sender policy: {receipt.dmarc_policy or 'none'}): "
            "the From address may be forged."
        )
    return tuple(warnings)
