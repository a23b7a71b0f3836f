"""The inbound spam policy (first hit wins) and the owner's keyword lists.

The keyword lists are a sectioned text file in S3 whose key is in an SSM parameter, so the owner
edits them without a deploy. They are cached for ``spam_rules_ttl_s``; a pattern that does not
compile is logged and skipped, and a failed reload keeps the last good lists.

The owner's patterns run on a stranger's subject and body, so they are compiled with RE2 (google-re2),
whose matching is linear in the text by construction: no pattern the owner writes can make one mail
cost more than a scan. RE2 has no lookaround and no backreferences; a pattern that uses them is
skipped with a message that says so.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

import re2

from common.errors import EmailHandlerError
from common.mail import limits, parse, reports
from common.mail.autoreply import automatic
from common.mail.parse import ParsedMail
from common.runtime import addresses
from common.runtime.config import InboundHandlerConfig
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
    COMPLAINT = "complaint"  # an abuse complaint (ARF): archived under bounces/, the owner told as such
    FORWARD = "forward"


class Pattern(Protocol):
    """What the policy uses of a compiled RE2 pattern (the binding ships no type information)."""

    @property
    def pattern(self) -> str: ...

    def search(self, text: str) -> object | None: ...


@dataclass(frozen=True, slots=True)
class Rules:
    blocked_domains: tuple[str, ...] = ()
    subject_patterns: tuple[Pattern, ...] = ()
    body_patterns: tuple[Pattern, ...] = ()


@dataclass(frozen=True, slots=True)
class Decision:
    action: Action
    reason: str = ""
    warnings: tuple[str, ...] = ()  # soft authentication failures, shown as a banner on the forward


# RE2's messages for what Python's engine has and RE2 refuses so that matching stays linear:
# lookaround and named backreferences ("invalid perl operator: (?=", "(?<!", "(?P="), numbered
# backreferences and \Z ("invalid escape sequence: \1"), repeats over {1000}.
_UNSUPPORTED = ("invalid perl operator", "invalid escape sequence", "invalid repetition size")
_WHY_UNSUPPORTED = (
    "rules run on a linear-time engine (RE2), which does not support lookaround ((?=...), (?!...), "
    "(?<=...), (?<!...)), backreferences (\\1, (?P=name)) or repeats over {1000}"
)


def _options() -> re2.Options:
    options = re2.Options()
    options.case_sensitive = False
    options.log_errors = False  # RE2 would also print each refused pattern to stderr, unstructured
    return options


class RuleError(EmailHandlerError, ValueError):
    """An owner's pattern that is not kept; the message is the reason, written for the owner."""


def compile_rule(source: str) -> Pattern:
    """``source`` compiled case-insensitively with RE2; raises :class:`RuleError` with the reason."""
    try:
        return re2.compile(source, _options())
    except re2.error as exc:
        detail = exc.args[0] if exc.args else ""
        detail = detail.decode("utf-8", "replace") if isinstance(detail, bytes) else str(detail)
        if detail.startswith(_UNSUPPORTED):
            raise RuleError(f"{detail}: not supported: {_WHY_UNSUPPORTED}") from None
        raise RuleError(detail) from None


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
    patterns: dict[str, list[Pattern]] = {"subject_patterns": [], "body_patterns": []}
    for name, compiled in patterns.items():
        for source in found[name]:
            try:
                compiled.append(compile_rule(source))
            except RuleError as exc:
                errors.append(f"[{name}] pattern {source!r} skipped: {exc}")
    domains = tuple(d.lower().lstrip("@.") for d in found["blocked_sender_domains"])
    return Rules(domains, tuple(patterns["subject_patterns"]), tuple(patterns["body_patterns"])), errors


class RulesCache:
    """Process-wide cache of the keyword lists (one per warm Lambda sandbox)."""

    def __init__(self) -> None:
        self._rules: Rules | None = None
        self._loaded_at = float("-inf")
        self._lock = threading.Lock()

    def get(self, cfg: InboundHandlerConfig) -> Rules:
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
    def _load(cfg: InboundHandlerConfig) -> Rules:
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
    """Bounces and other delivery status notifications have a null or mailer-daemon envelope sender
    (RFC 5321 4.5.5). A postmaster envelope is not one: postmaster is a person's mailbox (RFC 5321
    4.5.1), so such mail is judged by its content (common/mail/reports.py)."""
    source = receipt.source.strip().lower()
    return source in ("", "<>") or reports.is_mailer_daemon(source.strip("<>").partition("@")[0])


def delivery_report(mail: ParsedMail, own: Callable[[str], bool] = lambda address: False) -> str:
    """Why ``mail`` is a report a program wrote, bounce or complaint ('' when nothing says so):
    common/mail/reports.py, by structure whatever the envelope."""
    found = reports.classify(mail, own)
    return found.reason if found else ""


def assess_envelope(receipt: SesReceipt, cfg: InboundHandlerConfig) -> Decision | None:
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
    cfg: InboundHandlerConfig,
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
    over = limits.screen(raw) if decision is None or decision.action == Action.DSN else ""
    if decision is not None and decision.action == Action.DSN and not over:
        # A null envelope is a report; an abuse complaint (ARF) is one too, and the owner hears of it.
        mail = parse.parse(raw)
        if why := reports.complaint(mail):
            return Assessment(Decision(Action.COMPLAINT, why), mail)
    if decision is None and over:
        decision = Decision(Action.QUARANTINE, f"not parsed: {over}")
    if decision is not None:
        return Assessment(decision, None)
    mail = parse.parse(raw)
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
    if found := reports.classify(mail, own):
        return Decision(Action.COMPLAINT if found.kind == reports.COMPLAINT else Action.DSN, found.reason)
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
