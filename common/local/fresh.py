"""A new AWS account, modelled in the project's moto server (``email-handler emulator --account fresh``).

moto's account is kinder than a real new one: a domain identity is verified the moment it is
created, MAIL FROM works at once, nothing is sandboxed or capped. With :func:`set_fresh` on, the
emulator applies the rules a first deploy meets on AWS, each cited where it is modelled:

* SES identities start Pending; DKIM and then MAIL FROM verify on a later poll once the published
  zone (:func:`publish`, the stand-in for DNS that ``email-handler dns publish`` feeds) holds the
  records SES asked for.
* SetIdentityMailFromDomain on an unverified identity is refused.
* A send from an identity whose MAIL FROM is not Success and whose BehaviorOnMXFailure is
  RejectMessage is refused with MailFromDomainNotVerified.
* The sandbox: verified recipients only (common.local.emulator.ses_sandbox), 200 a day, 1 a second.
* SES publishes to a topic only if the topic's policy lets ``ses.amazonaws.com`` publish
  (:func:`ses_may_publish`).
* IAM policy size quotas: inline user policies 2,048 characters in all, managed 6,144, a role's
  inline policies 10,240 in all (white space not counted).
* Lambda concurrency: 10 for the account (common/local/concurrency.py: the rules, GetAccountSettings
  and the wiring's throttling).

The state lives in this process (the emulator's): ``/moto-api/reset`` clears the zone and the counters
but keeps the account fresh.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from typing import Any

from common.local import concurrency

# Where the model's control endpoints live on the emulator (POST): the zone to publish, and the switch.
DNS_PATH = "/moto-api/service-email-handler/dns"
ACCOUNT_PATH = "/moto-api/service-email-handler/account"

# Lambda concurrency: the account's limit and the reservation rule live in common/local/concurrency.py.
ACCOUNT_CONCURRENCY = concurrency.FRESH_CONCURRENCY

# SES sandbox: "You can send a maximum of 200 messages in a 24-hour period" and "a maximum of one
# message per second" (https://docs.aws.amazon.com/ses/latest/dg/request-production-access.html).
SANDBOX_DAILY = 200
SANDBOX_RATE = 1.0

# IAM object quotas (https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_iam-quotas.html):
# "User policy size cannot exceed 2,048 characters", "Role policy size cannot exceed 10,240
# characters" (both the aggregate of the entity's inline policies), "Managed policy size cannot exceed
# 6,144 characters"; "IAM does not count white space when calculating the size of a policy".
USER_INLINE_LIMIT, ROLE_INLINE_LIMIT, MANAGED_LIMIT = 2048, 10240, 6144

_lock = threading.Lock()
STATE: dict[str, Any] = {"fresh": False}
_zone: set[tuple[str, str, str]] = set()  # (name, type, value), lower-case, names without the final dot
_verified: dict[str, set[str]] = {}  # identity -> {"domain", "dkim", "mail_from"}
_sent: deque[float] = deque()  # send times within the last 24 hours


def fresh() -> bool:
    return bool(STATE["fresh"])


def set_fresh(on: bool) -> None:
    """Model a new account from the next request on (off: moto's own kind account)."""
    from common.local.iam import SES_SANDBOX

    STATE["fresh"] = on
    SES_SANDBOX["on"] = on
    concurrency.set_account_limit(concurrency.FRESH_CONCURRENCY if on else concurrency.DEFAULT_CONCURRENCY)
    reset()


def reset() -> None:
    with _lock:
        _zone.clear()
        _verified.clear()
        _sent.clear()


def policy_size(document: str | dict[str, Any]) -> int:
    """A policy's size as IAM counts it: characters, white space not counted."""
    text = document if isinstance(document, str) else json.dumps(document)
    return len(re.sub(r"\s", "", text))


# --- the zone (what `email-handler dns publish` puts in "DNS") ----------------------------------------

_RECORD = re.compile(
    r"^(?P<name>\S+)\s+(?:(?:\d+|IN)\s+)*(?P<type>TXT|CNAME|MX)\s+(?P<value>.+?)\s*$", re.IGNORECASE
)


def parse_zone(text: str) -> list[tuple[str, str, str]]:
    """The TXT, CNAME and MX records of a BIND zone file (one record a line, as the deploy writes it)."""
    records = []
    for line in text.splitlines():
        line = line.split(";", 1)[0].strip() if not line.lstrip().startswith('"') else line.strip()
        match = _RECORD.match(line)
        if not match:
            continue
        value = match["value"].strip()
        if match["type"].upper() == "TXT":
            value = "".join(re.findall(r'"([^"]*)"', value)) or value
        records.append((_name(match["name"]), match["type"].upper(), _name(value)))
    return records


def _name(value: str) -> str:
    return value.strip().rstrip(".").lower()


def publish(text: str) -> int:
    """Add a zone's records to the model's DNS; returns how many it held."""
    records = parse_zone(text)
    with _lock:
        _zone.update(records)
    return len(records)


def _has(name: str, kind: str, value: str) -> bool:
    return (_name(name), kind, _name(value)) in _zone


def _mx(name: str, host: str) -> bool:
    return any(n == _name(name) and t == "MX" and v.split()[-1] == _name(host) for n, t, v in _zone)


def mx_hosts(name: str) -> list[str]:
    """The MX hosts published for ``name`` (what `email-handler status` checks receiving by, locally)."""
    with _lock:
        return sorted(v.split()[-1] for n, t, v in _zone if n == _name(name) and t == "MX")


# --- SES -------------------------------------------------------------------------------------------


def _ses_error(code: str, message: str) -> Exception:
    from moto.ses.exceptions import SesError

    error = SesError(message)
    error.code = code
    return error


def _step(
    identity: str, token: str | None, dkim_tokens: list[str], mail_from: str | None, region: str
) -> set[str]:
    """One poll of SES's checks: at most one more of domain+DKIM, then MAIL FROM, turns Success.

    "As Amazon SES searches for the TXT record, the domain's verification status is Pending. When Amazon SES
    detects the record, the domain's verification status changes to Success ... [it] also changes to Success
    when it is DKIM verified" (SES API reference, VerifyDomainIdentity,
    https://docs.aws.amazon.com/ses/latest/APIReference/API_VerifyDomainIdentity.html): a check passes on
    a poll after the records are published, never at once. The custom MAIL FROM domain belongs to "a
    verified identity" and its status says whether SES "has successfully read the MX record"
    (SetIdentityMailFromDomain, IdentityMailFromDomainAttributes)."""
    with _lock:
        done = _verified.setdefault(identity, set())
        if "domain" not in done:
            dkim_ok = bool(dkim_tokens) and all(
                _has(f"{t}._domainkey.{identity}", "CNAME", f"{t}.dkim.amazonses.com") for t in dkim_tokens
            )
            if dkim_ok or (token and _has(f"_amazonses.{identity}", "TXT", token)):
                done.add("domain")
                if dkim_ok:
                    done.add("dkim")
            return set(done)
        if (
            "dkim" not in done
            and dkim_tokens
            and all(
                _has(f"{t}._domainkey.{identity}", "CNAME", f"{t}.dkim.amazonses.com") for t in dkim_tokens
            )
        ):
            done.add("dkim")
        elif (
            mail_from and "mail_from" not in done and _mx(mail_from, f"feedback-smtp.{region}.amazonses.com")
        ):
            done.add("mail_from")
        return set(done)


def _identity_verified(identity: str) -> bool:
    with _lock:
        return "domain" in _verified.get(identity, set())


def _is_domain(identity: str) -> bool:
    return "@" not in identity


def _patch_ses() -> None:
    from moto.ses.models import SESBackend

    verification, dkim, mail_from_attrs = (
        SESBackend.get_identity_verification_attributes,
        SESBackend.get_identity_dkim_attributes,
        SESBackend.get_identity_mail_from_domain_attributes,
    )
    set_mail_from = SESBackend.set_identity_mail_from_domain
    send_raw, send = SESBackend.send_raw_email, SESBackend.send_email

    def poll(self: Any, identity: str) -> set[str]:
        token = verification(self, [identity]).get(identity, {}).get("VerificationToken")
        tokens = dkim(self, [identity]).get(identity, {}).get("DkimTokens", [])
        mail_from = self.identity_mail_from_domains.get(identity, {}).get("mail_from_domain")
        return _step(identity, token, tokens, mail_from, self.region_name)

    def get_identity_verification_attributes(self: Any, identities: list[str] | None = None) -> Any:
        found = verification(self, identities)
        if fresh():
            for identity, attrs in found.items():
                if _is_domain(identity):
                    attrs["VerificationStatus"] = "Success" if "domain" in poll(self, identity) else "Pending"
        return found

    def get_identity_dkim_attributes(self: Any, identities: list[str]) -> Any:
        found = dkim(self, identities)
        if fresh():
            for identity, attrs in found.items():
                if _is_domain(identity) and identity in self.email_identities:
                    attrs["DkimVerificationStatus"] = (
                        "Success" if "dkim" in poll(self, identity) else "Pending"
                    )
        return found

    def get_identity_mail_from_domain_attributes(self: Any, identities: list[str] | None = None) -> Any:
        found = mail_from_attrs(self, identities)
        if fresh():
            for identity, attrs in found.items():
                if attrs.get("MailFromDomain"):
                    attrs["MailFromDomainStatus"] = (
                        "Success" if "mail_from" in poll(self, identity) else "Pending"
                    )
        return found

    def set_identity_mail_from_domain(
        self: Any,
        identity: str,
        mail_from_domain: str | None = None,
        behavior_on_mx_failure: str | None = None,
    ) -> None:
        # SetIdentityMailFromDomain "Enables or disables the custom MAIL FROM domain setup for a verified
        # identity" (SES API reference, SetIdentityMailFromDomain); AWS answers InvalidParameterValue.
        if fresh() and mail_from_domain and not _identity_verified(identity.split("@")[-1]):
            raise _ses_error(
                "InvalidParameterValue",
                f"Provided MAIL-FROM domain '{mail_from_domain}' or its parents are not verified",
            )
        set_mail_from(self, identity, mail_from_domain, behavior_on_mx_failure)
        with _lock:
            _verified.get(identity, set()).discard("mail_from")  # a new MAIL FROM domain is checked again

    def check_send(self: Any, source: str, recipients: int) -> None:
        if not fresh():
            return
        from email.utils import parseaddr

        address = parseaddr(source)[1]
        domain = address.split("@")[-1]
        if address not in self.email_identities and not _identity_verified(domain):
            # "you have to verify ... the From ... address" (SES DG, creating-identities.html)
            raise _ses_error(
                "MessageRejected",
                "Email address is not verified. The following identities failed the "
                f"check in region {self.region_name.upper()}: {address}",
            )
        setting = self.identity_mail_from_domains.get(domain, {})
        with _lock:
            mail_from_ok = "mail_from" in _verified.get(domain, set())
        if (
            setting.get("mail_from_domain")
            and setting.get("behavior_on_mx_failure") == "RejectMessage"
            and not mail_from_ok
        ):
            # "If you choose RejectMessage, Amazon SES returns a MailFromDomainNotVerified error and [does]
            # not send the email ... in the Pending, Failed, and TemporaryFailure states" (SES API
            # reference, SetIdentityMailFromDomain, BehaviorOnMXFailure).
            raise _ses_error(
                "MailFromDomainNotVerifiedException",
                "The message could not be sent because Amazon "
                "SES could not read the MX record required to use "
                "the specified MAIL FROM domain.",
            )
        now = time.time()
        with _lock:
            while _sent and _sent[0] < now - 86400:
                _sent.popleft()
            if len(_sent) + recipients > SANDBOX_DAILY:
                raise _ses_error("Throttling", "Daily message quota exceeded.")
            if _sent and now - _sent[-1] < 1 / SANDBOX_RATE:
                raise _ses_error("Throttling", "Maximum sending rate exceeded.")

    def sent(recipients: int, result: Any) -> Any:
        """Count what SES accepted (a refused send does not count against the quotas)."""
        if fresh():
            with _lock:
                _sent.extend([time.time()] * recipients)
        return result

    def send_raw_email(self: Any, source: str, destinations: list[str], raw_data: str) -> Any:
        recipients = max(1, len(destinations))
        check_send(self, source or _raw_from(raw_data), recipients)
        return sent(recipients, send_raw(self, source, destinations, raw_data))

    def send_email(
        self: Any, source: str, subject: str, body: str, destinations: dict[str, list[str]]
    ) -> Any:
        recipients = max(1, sum(len(v) for v in destinations.values()))
        check_send(self, source, recipients)
        return sent(recipients, send(self, source, subject, body, destinations))

    SESBackend.get_identity_verification_attributes = get_identity_verification_attributes  # type: ignore[method-assign]
    SESBackend.get_identity_dkim_attributes = get_identity_dkim_attributes  # type: ignore[method-assign]
    SESBackend.get_identity_mail_from_domain_attributes = get_identity_mail_from_domain_attributes  # type: ignore[method-assign]
    SESBackend.set_identity_mail_from_domain = set_identity_mail_from_domain  # type: ignore[method-assign]
    SESBackend.send_raw_email = send_raw_email  # type: ignore[method-assign]
    SESBackend.send_email = send_email  # type: ignore[method-assign]


def _raw_from(raw: str) -> str:
    from email.parser import HeaderParser

    return str(HeaderParser().parsestr(raw, headersonly=True).get("From", ""))


def sent_last_24_hours() -> int:
    now = time.time()
    with _lock:
        return sum(1 for t in _sent if t >= now - 86400)


def ses_may_publish(policy: str | dict[str, Any] | None, topic_arn: str, source_arn: str) -> bool:
    """Would the topic's policy let SES publish for ``source_arn`` (a configuration set)? SES needs a
    statement for the ``ses.amazonaws.com`` principal (SES DG, "Set up an Amazon SNS event destination
    for event publishing", https://docs.aws.amazon.com/ses/latest/dg/event-publishing-add-event-destination-sns.html)."""
    from common.local.iam import Request, evaluate

    if not policy:
        return False
    document = json.loads(policy) if isinstance(policy, str) else policy
    account = source_arn.split(":")[4]

    def for_ses(statement: dict[str, Any]) -> bool:
        principal = statement.get("Principal", {})
        services = principal.get("Service", []) if isinstance(principal, dict) else []
        return "ses.amazonaws.com" in (services if isinstance(services, list) else [services])

    statements = [s for s in document.get("Statement", []) if for_ses(s)]
    request = Request(
        "sns:Publish", [topic_arn], {"aws:sourcearn": [source_arn], "aws:sourceaccount": [account]}
    )
    return evaluate([{"Statement": statements}], request) if statements else False


# --- IAM and Lambda quotas -------------------------------------------------------------------------


def _patch_iam() -> None:
    from moto.iam.exceptions import LimitExceededException
    from moto.iam.models import IAMBackend

    put_user, put_role, create, version = (
        IAMBackend.put_user_policy,
        IAMBackend.put_role_policy,
        IAMBackend.create_policy,
        IAMBackend.create_policy_version,
    )

    def inline_total(entity: Any, name: str, document: str) -> int:
        others = {k: v for k, v in entity.policies.items() if k != name}
        return sum(policy_size(v) for v in others.values()) + policy_size(document)

    def put_user_policy(self: Any, user_name: str, policy_name: str, policy_json: str) -> None:
        if fresh() and inline_total(self.get_user(user_name), policy_name, policy_json) > USER_INLINE_LIMIT:
            raise LimitExceededException(
                f"Maximum policy size of {USER_INLINE_LIMIT} bytes exceeded for user {user_name}"
            )
        put_user(self, user_name, policy_name, policy_json)

    def put_role_policy(self: Any, role_name: str, policy_name: str, policy_json: str) -> None:
        if fresh() and inline_total(self.get_role(role_name), policy_name, policy_json) > ROLE_INLINE_LIMIT:
            raise LimitExceededException(
                f"Maximum policy size of {ROLE_INLINE_LIMIT} bytes exceeded for role {role_name}"
            )
        put_role(self, role_name, policy_name, policy_json)

    def managed(document: str) -> None:
        if fresh() and policy_size(document) > MANAGED_LIMIT:
            raise LimitExceededException(f"Cannot exceed quota for PolicySize: {MANAGED_LIMIT}")

    def create_policy(
        self: Any, description: str, path: str, policy_document: str, policy_name: str, tags: Any
    ) -> Any:
        managed(policy_document)
        return create(self, description, path, policy_document, policy_name, tags)

    def create_policy_version(self: Any, policy_arn: str, policy_document: str, set_as_default: bool) -> Any:
        managed(policy_document)
        return version(self, policy_arn, policy_document, set_as_default)

    IAMBackend.put_user_policy = put_user_policy  # type: ignore[method-assign]
    IAMBackend.put_role_policy = put_role_policy  # type: ignore[method-assign]
    IAMBackend.create_policy = create_policy  # type: ignore[method-assign]
    IAMBackend.create_policy_version = create_policy_version  # type: ignore[method-assign]


# --- the control endpoints -------------------------------------------------------------------------


def _routes() -> None:
    from moto.moto_api._internal import urls

    def dns(request: Any, full_url: str, headers: Any) -> tuple[int, dict[str, str], str]:
        from urllib.parse import parse_qs, urlparse

        if request.method not in ("POST", "GET"):
            return 400, {}, json.dumps({"Error": "POST a zone file, or GET ?name=NAME for its MX hosts"})
        if not fresh():
            return (
                409,
                {},
                json.dumps({"Error": "the emulator is not modelling a fresh account (--account fresh)"}),
            )
        if request.method == "GET":
            return (
                200,
                {},
                json.dumps({"mx": mx_hosts(parse_qs(urlparse(full_url).query).get("name", [""])[0])}),
            )
        # the raw body even when a client labels it a form (werkzeug then leaves request.data empty)
        body = request.get_data() if hasattr(request, "get_data") else bytes(request.data or b"")
        return 200, {}, json.dumps({"records": publish(body.decode())})

    def account(request: Any, full_url: str, headers: Any) -> tuple[int, dict[str, str], str]:
        if request.method == "POST":
            set_fresh(json.loads(request.data or b"{}").get("account") == "fresh")
        return 200, {}, json.dumps({"account": "fresh" if fresh() else "default"})

    urls.url_paths["{0}" + DNS_PATH + "$"] = dns
    urls.url_paths["{0}" + ACCOUNT_PATH + "$"] = account


def install() -> None:
    """Called once by common.local.emulator.patch_moto; every rule is inert until :func:`set_fresh`."""
    _patch_ses()
    _patch_iam()
    concurrency.install()
    _routes()
    from common.local.iam import after_reset

    after_reset(reset)  # the zone and the counters, not the switch
