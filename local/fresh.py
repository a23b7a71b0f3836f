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
* The sandbox: verified recipients only (local.emulator.ses_sandbox), 200 a day, 1 a second.
* SES publishes to a topic only if the topic's policy lets ``ses.amazonaws.com`` publish
  (:func:`ses_may_publish`).
* IAM policy size quotas: inline user policies 2,048 characters in all, managed 6,144, a role's
  inline policies 10,240 in all (white space not counted).
* Lambda concurrency: 10 for the account (local/concurrency.py: the rules, GetAccountSettings
  and the wiring's throttling).

The state lives in this process (the emulator's): ``/moto-api/reset`` clears the zone and the counters
but keeps the account fresh.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections import deque
from email.parser import HeaderParser
from email.utils import parseaddr
from typing import Any
from urllib.parse import parse_qs, urlparse

from deploy.emulator import EMULATOR_ACCOUNT_PATH
from deploy.images import LAMBDA_MANIFESTS, manifest_media_type
from deploy.route53 import TXT_STRING_MAX, txt_strings, txt_text
from local import concurrency, motoadapter
from local.iam import SES_SANDBOX, Request, after_reset, evaluate

# Where the model's control endpoints live on the emulator (POST): the zone to publish, and the switch.
DNS_PATH = "/moto-api/service-email-handler/dns"
ACCOUNT_PATH = EMULATOR_ACCOUNT_PATH
# The stand-ins for a person clicking SES's verification link, AWS granting production access and a
# person clicking SNS's subscription link (`email-handler model verify-address | grant-production |
# confirm-subscriptions`).
VERIFY_ADDRESS_PATH = "/moto-api/service-email-handler/verify-address"
GRANT_PRODUCTION_PATH = "/moto-api/service-email-handler/grant-production"
CONFIRM_SUBSCRIPTIONS_PATH = "/moto-api/service-email-handler/confirm-subscriptions"

# "The verification status of an email address is "Pending" until the email address owner clicks the
# link within the verification email that Amazon SES sent to that address. If the email address owner
# clicks the link within 24 hours, the verification status of the email address changes to "Success""
# (SES API reference, GetIdentityVerificationAttributes,
# https://docs.aws.amazon.com/ses/latest/APIReference/API_GetIdentityVerificationAttributes.html), and
# "If your account is still in the Amazon SES sandbox, you also need to verify any email addresses which
# you plan on sending email to" (SES DG, https://docs.aws.amazon.com/ses/latest/dg/verify-addresses-and-domains.html).
# The model keeps an address identity Pending until `model verify-address` clicks; it never expires it.
# Subscribe answers "The ARN of the subscription if it is confirmed, or the string "pending confirmation"
# if the subscription requires confirmation" (SNS API reference, Subscribe,
# https://docs.aws.amazon.com/sns/latest/api/API_Subscribe.html); an e-mail endpoint requires it (its
# owner clicks the link SNS mails). The reference does not say what ListSubscriptionsByTopic lists for it:
# AWS lists "PendingConfirmation" in place of the ARN, and the model does the same (status accepts any
# value that is not an ARN as unconfirmed, the stricter reading).
EMAIL_PROTOCOLS = ("email", "email-json")

# Lambda concurrency: the account's limit and the reservation rule live in local/concurrency.py.
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
_events: list[dict[str, Any]] = []  # SES events the model published for a configuration set, or dropped
_clicked: set[str] = set()  # address identities whose verification link was "clicked" (lower-case)
# What `ses request-production-access` submitted (SESv2 PutAccountDetails) and its review, answered as
# GetAccount's ``Details`` (SESv2 API reference, GetAccount, "Details": "An object that defines your
# account details", ReviewDetails.Status PENDING | GRANTED | DENIED | FAILED)
_details: dict[str, Any] = {}
# Subscription confirmation mails SNS sent, by e-mail endpoint (lower-case): one per Subscribe of a new or
# still pending e-mail subscription.
_confirmation_mails: dict[str, int] = {}


def fresh() -> bool:
    return bool(STATE["fresh"])


def set_fresh(on: bool) -> None:
    """Model a new account from the next request on (off: moto's own kind account)."""

    STATE["fresh"] = on
    SES_SANDBOX["on"] = on
    concurrency.set_account_limit(concurrency.FRESH_CONCURRENCY if on else concurrency.DEFAULT_CONCURRENCY)
    reset()


def reset() -> None:

    with _lock:
        _zone.clear()
        _verified.clear()
        _sent.clear()
        _clicked.clear()
        _details.clear()
        _events.clear()
        _confirmation_mails.clear()
    SES_SANDBOX["on"] = fresh()  # a reset account is back in the sandbox


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


def route53_records() -> set[tuple[str, str, str]]:
    """The TXT, CNAME and MX records of every public Route 53 hosted zone on the emulator, as
    :func:`parse_zone` gives a zone file's. The model has no registrar: every public zone counts as the
    one its domain delegates to, so `email-handler dns publish --route53` publishes as `dns publish
    FILE.zone` does."""
    route53_backends = motoadapter.route53_models().route53_backends

    found = set()
    for partitions in list(route53_backends.values()):
        for backend in list(partitions.values()):
            for zone in list(backend.zones.values()):
                if zone.private_zone:
                    continue
                for rrset in list(zone.rrsets):
                    kind = str(rrset.type or "").upper()
                    if kind not in ("TXT", "CNAME", "MX"):
                        continue
                    for value in rrset.records or []:
                        text = txt_text(str(value)) if kind == "TXT" else str(value)
                        found.add((_name(rrset.name), kind, _name(text)))
    return found


def _records() -> set[tuple[str, str, str]]:
    return _zone | route53_records()


def _has(name: str, kind: str, value: str) -> bool:
    return (_name(name), kind, _name(value)) in _records()


def _mx(name: str, host: str) -> bool:
    return any(n == _name(name) and t == "MX" and v.split()[-1] == _name(host) for n, t, v in _records())


def mx_hosts(name: str) -> list[str]:
    """The MX hosts published for ``name`` (what `email-handler status` checks receiving by, locally)."""
    with _lock:
        return sorted(v.split()[-1] for n, t, v in _records() if n == _name(name) and t == "MX")


# --- SES -------------------------------------------------------------------------------------------


def _ses_error(code: str, message: str) -> Exception:
    ses_exceptions = motoadapter.ses_exceptions()

    error = ses_exceptions.SesError(message)
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
    """SES v1 on the model: identities verify as their DNS records appear (or their link is clicked),
    and a send passes the checks a new account's SES makes."""
    _patch_ses_attributes()
    _patch_ses_identities()
    _patch_ses_sending()


def _patch_ses_attributes() -> None:
    """The identity attribute reads answer Pending until the DNS records (or the click) are there."""
    ses_models = motoadapter.ses_models()

    verification, dkim, mail_from_attrs = (
        ses_models.SESBackend.get_identity_verification_attributes,
        ses_models.SESBackend.get_identity_dkim_attributes,
        ses_models.SESBackend.get_identity_mail_from_domain_attributes,
    )

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
                else:
                    attrs["VerificationStatus"] = "Success" if address_clicked(identity) else "Pending"
                    attrs.pop("VerificationToken", None)  # address identities have none on AWS
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

    ses_models.SESBackend.get_identity_verification_attributes = get_identity_verification_attributes
    ses_models.SESBackend.get_identity_dkim_attributes = get_identity_dkim_attributes
    ses_models.SESBackend.get_identity_mail_from_domain_attributes = get_identity_mail_from_domain_attributes


def _patch_ses_identities() -> None:
    """Setting a MAIL FROM domain, the verified-address rule and deleting an identity, as on AWS."""
    ses_models = motoadapter.ses_models()

    set_mail_from = ses_models.SESBackend.set_identity_mail_from_domain
    is_verified, delete = ses_models.SESBackend._is_verified_address, ses_models.SESBackend.delete_identity

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

    def is_verified_address(self: Any, source: str) -> bool:
        """A verified recipient (the sandbox) or sender: the address identity once clicked, or its verified
        domain. Off the model, moto's rule (the identity exists)."""
        if not fresh():
            return bool(is_verified(self, source))

        address = parseaddr(source)[1]
        domain = address.rpartition("@")[2].lower()
        if address in self.email_identities and address_clicked(address):
            return True
        return domain in self.email_identities and _identity_verified(domain)

    def delete_identity(self: Any, identity: str) -> None:
        delete(self, identity)
        with _lock:  # created again, it waits for a new click (SES mails a new link)
            _clicked.discard(identity.lower())
            _verified.pop(identity, None)

    ses_models.SESBackend._is_verified_address = is_verified_address
    ses_models.SESBackend.delete_identity = delete_identity
    ses_models.SESBackend.set_identity_mail_from_domain = set_identity_mail_from_domain


def _patch_ses_sending() -> None:
    """SendRawEmail and SendEmail pass ``_check_send`` first and count what SES accepted."""
    ses_models = motoadapter.ses_models()

    send_raw, send = ses_models.SESBackend.send_raw_email, ses_models.SESBackend.send_email

    def send_raw_email(self: Any, source: str, destinations: list[str], raw_data: str) -> Any:
        recipients = max(1, len(destinations))
        _check_send(self, source or _raw_from(raw_data), recipients)
        return _count_sent(recipients, send_raw(self, source, destinations, raw_data))

    def send_email(
        self: Any, source: str, subject: str, body: str, destinations: dict[str, list[str]]
    ) -> Any:
        recipients = max(1, sum(len(v) for v in destinations.values()))
        _check_send(self, source, recipients)
        return _count_sent(recipients, send(self, source, subject, body, destinations))

    ses_models.SESBackend.send_raw_email = send_raw_email
    ses_models.SESBackend.send_email = send_email


def _check_send(backend: Any, source: str, recipients: int) -> None:
    """What a new account's SES refuses: an unverified sender, a MAIL FROM domain that RejectMessage
    makes a condition, the sandbox's daily quota and rate."""
    if not fresh():
        return

    address = parseaddr(source)[1]
    domain = address.split("@")[-1]
    if address not in backend.email_identities and not _identity_verified(domain):
        # "you have to verify ... the From ... address" (SES DG, creating-identities.html)
        raise _ses_error(
            "MessageRejected",
            "Email address is not verified. The following identities failed the "
            f"check in region {backend.region_name.upper()}: {address}",
        )
    setting = backend.identity_mail_from_domains.get(domain, {})
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


def _count_sent(recipients: int, result: Any) -> Any:
    """Count what SES accepted (a refused send does not count against the quotas)."""
    if fresh():
        with _lock:
            _sent.extend([time.time()] * recipients)
    return result


def address_clicked(address: str) -> bool:
    with _lock:
        return address.lower() in _clicked


def click(address: str) -> bool:
    """Stand in for the owner of ``address`` clicking SES's verification link; False when no identity of
    that address exists (no link was sent)."""
    ses_backends = motoadapter.ses_models().ses_backends

    found = any(
        address in backend.email_identities
        for regions in ses_backends.values()
        for backend in regions.values()
    )
    if found:
        with _lock:
            _clicked.add(address.lower())
    return found


def _patch_sesv2() -> None:
    """GetEmailIdentity tells an address identity's state as SESv2 does: ``VerifiedForSendingStatus`` and
    ``VerificationStatus`` (PENDING until the link is clicked, SES API v2 reference, GetEmailIdentity,
    https://docs.aws.amazon.com/ses/latest/APIReference-V2/API_GetEmailIdentity.html)."""
    sesv2_responses = motoadapter.sesv2_responses()

    original = sesv2_responses.SESV2Response.get_email_identity
    send = sesv2_responses.SESV2Response.send_email

    def send_email(self: Any) -> str:
        answer = send(self)
        config_set = json.loads(self.body or "{}").get("ConfigurationSetName")
        if fresh() and config_set:
            params = json.loads(self.body)
            recipients = [
                a
                for k in ("ToAddresses", "CcAddresses", "BccAddresses")
                for a in params.get("Destination", {}).get(k, [])
            ]
            _publish_event(
                self.sesv2_backend.core_backend,
                config_set,
                json.loads(answer)["MessageId"],
                str(params.get("FromEmailAddress", "")),
                recipients,
            )
        return str(answer)

    sesv2_responses.SESV2Response.send_email = send_email

    suppression = sesv2_responses.SESV2Response.put_configuration_set_suppression_options

    def put_configuration_set_suppression_options(self: Any) -> str:
        """The suppression-list settings in the sandbox. Documented: "To bulk add or remove addresses,
        you must have production access" (SES DG, "Using the Amazon SES account-level suppression list",
        https://docs.aws.amazon.com/ses/latest/dg/sending-email-suppression-list.html). The documentation
        says nothing of a configuration set's SuppressionOptions in the sandbox: the model is stricter than
        AWS may be and refuses them too, so the deploy is proven to go on without them (and to set them on
        a later run)."""

        if fresh() and SES_SANDBOX["on"]:
            raise _ses_error(
                "BadRequestException",
                "Suppression list settings are not available while the account is in the sandbox "
                "(stricter than documented: the fresh-account model)",
            )
        return str(suppression(self))

    sesv2_responses.SESV2Response.put_configuration_set_suppression_options = (
        put_configuration_set_suppression_options
    )

    def get_email_identity(self: Any) -> str:
        body = json.loads(original(self))
        identity = self._get_param("EmailIdentity")
        if fresh():
            if _is_domain(identity):
                ok = _identity_verified(identity)
            else:
                ok = address_clicked(identity)
            body["VerifiedForSendingStatus"] = ok
            body["VerificationStatus"] = "SUCCESS" if ok else "PENDING"
        else:
            body.setdefault("VerificationStatus", "SUCCESS")
            body["VerifiedForSendingStatus"] = True
        return json.dumps(body)

    sesv2_responses.SESV2Response.get_email_identity = get_email_identity


def ses_events() -> list[dict[str, Any]]:
    """What SES did with each event of a send made with a configuration set: published to the SNS
    destination, or dropped because the topic's policy does not let SES publish (``reason``)."""
    with _lock:
        return [dict(e) for e in _events]


def _publish_event(
    backend: Any, config_set: str, message_id: str, source: str, recipients: list[str]
) -> None:
    """SES publishes a sent message's Send and Delivery events to the configuration set's SNS destination,
    as the topic's policy allows: "you must ... allow Amazon SES to publish to the topic" (SES DG, "Set up an
    Amazon SNS event destination for event publishing",
    https://docs.aws.amazon.com/ses/latest/dg/event-publishing-add-event-destination-sns.html). The model
    delivers Delivery at once (every recipient accepts) to SQS subscriptions; a Lambda subscription is
    recorded, not invoked (the model runs no image). A topic whose policy refuses SES gets nothing, and the
    drop is recorded; the documentation does not say what SES does then, so the model drops silently as
    AWS does for a misconfigured destination."""
    sns_backends = motoadapter.sns_models().sns_backends

    destination = backend.config_set_event_destination.get(config_set) or {}
    wanted = [t.lower() for t in destination.get("MatchingEventTypes", [])]
    topic_arn = (destination.get("SNSDestination") or {}).get("TopicARN", "")
    if not topic_arn or not destination.get("Enabled", True) or "delivery" not in wanted:
        return
    account, region = topic_arn.split(":")[4], topic_arn.split(":")[3]
    sns = sns_backends[account][region]
    topic = sns.topics.get(topic_arn)
    source_arn = f"arn:aws:ses:{region}:{backend.account_id}:configuration-set/{config_set}"
    record: dict[str, Any] = {"topic": topic_arn, "eventType": "Delivery", "messageId": message_id}
    if topic is None or not ses_may_publish(topic.policy, topic_arn, source_arn):
        record["delivered"], record["reason"] = False, "the topic's policy does not let SES publish"
    else:
        now = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())
        event = {
            "eventType": "Delivery",
            "mail": {"timestamp": now, "messageId": message_id, "source": source, "destination": recipients},
            "delivery": {"timestamp": now, "recipients": recipients, "smtpResponse": "250 2.0.0 OK"},
        }
        record["delivered"], record["subscriptions"] = True, []
        for sub in sns._get_topic_subscriptions(topic):
            record["subscriptions"].append(sub.protocol)
            if sub.protocol == "sqs":
                sub.publish(json.dumps(event), message_id=f"ses-event-{message_id}")
    with _lock:
        _events.append(record)


def _raw_from(raw: str) -> str:

    return str(HeaderParser().parsestr(raw, headersonly=True).get("From", ""))


def sent_last_24_hours() -> int:
    now = time.time()
    with _lock:
        return sum(1 for t in _sent if t >= now - 86400)


def ses_may_publish(policy: str | dict[str, Any] | None, topic_arn: str, source_arn: str) -> bool:
    """Would the topic's policy let SES publish for ``source_arn`` (a configuration set)? SES needs a
    statement for the ``ses.amazonaws.com`` principal (SES DG, "Set up an Amazon SNS event destination
    for event publishing", https://docs.aws.amazon.com/ses/latest/dg/event-publishing-add-event-destination-sns.html)."""
    return ses_may(policy, "sns:Publish", topic_arn, source_arn)


def ses_may(policy: str | bytes | dict[str, Any] | None, action: str, resource: str, source_arn: str) -> bool:
    """Would a resource policy let ``ses.amazonaws.com`` do ``action`` on ``resource`` for ``source_arn``
    (its configuration set or receipt rule), with the account as ``aws:SourceAccount``?"""

    if not policy:
        return False
    document = json.loads(policy) if isinstance(policy, str | bytes) else policy
    account = source_arn.split(":")[4]

    def for_ses(statement: dict[str, Any]) -> bool:
        principal = statement.get("Principal", {})
        services = principal.get("Service", []) if isinstance(principal, dict) else []
        return "ses.amazonaws.com" in (services if isinstance(services, list) else [services])

    statements = [s for s in document.get("Statement", []) if for_ses(s)]
    request = Request(action, [resource], {"aws:sourcearn": [source_arn], "aws:sourceaccount": [account]})
    return evaluate([{"Statement": statements}], request) if statements else False


def _patch_receipt_rules() -> None:
    """Creating or updating a receipt rule, SES checks that it may use its actions' resources.
    CreateReceiptRule answers InvalidS3ConfigurationException when "Amazon SES could not publish to
    the bucket, possibly due to permissions issues", and InvalidLambdaFunctionException when "Amazon
    SES could not execute the provided function, possibly due to permissions issues" (SES API
    reference, CreateReceiptRule, Errors,
    https://docs.aws.amazon.com/ses/latest/APIReference/API_CreateReceiptRule.html). SES proves the
    bucket by writing a test object, AMAZON_SES_SETUP_NOTIFICATION, under the action's prefix; the
    documentation does not describe that object, the model writes it as SES does. The permissions are
    evaluated as the bucket policy and the function policy would be for ``ses.amazonaws.com`` with the
    rule as ``aws:SourceArn`` (SES DG, "Giving permissions to Amazon SES for email receiving",
    https://docs.aws.amazon.com/ses/latest/dg/receiving-email-permissions.html)."""
    ses_exceptions = motoadapter.ses_exceptions()
    ses_models = motoadapter.ses_models()

    create, update = ses_models.SESBackend.create_receipt_rule, ses_models.SESBackend.update_receipt_rule

    def check(backend: Any, rule_set: str, rule: dict[str, Any]) -> None:
        if not fresh():
            return
        lambda_backends = motoadapter.awslambda_models().lambda_backends
        s3_backends = motoadapter.s3_models().s3_backends

        account, region = backend.account_id, backend.region_name
        source = f"arn:aws:ses:{region}:{account}:receipt-rule-set/{rule_set}:receipt-rule/{rule.get('Name')}"
        for action in rule.get("Actions", []):
            if s3 := action.get("S3Action"):
                bucket = s3_backends[account]["aws"].buckets.get(s3["BucketName"])
                if bucket is None:
                    continue  # moto's own check answers for a bucket that does not exist
                key = f"{s3.get('ObjectKeyPrefix', '')}AMAZON_SES_SETUP_NOTIFICATION"
                if not ses_may(bucket.policy, "s3:PutObject", f"arn:aws:s3:::{bucket.name}/{key}", source):
                    raise ses_exceptions.InvalidS3ConfigurationException(
                        f"Could not write to bucket: {bucket.name}"
                    )
                s3_backends[account]["aws"].put_object(bucket.name, key, b"Amazon SES setup notification\n")
            if lam := action.get("LambdaAction"):
                arn = lam["FunctionArn"]
                try:  # moto answers GetPolicy's wire format: {"Policy": "<the document>"}
                    policy = json.loads(lambda_backends[account][region].get_policy(arn))["Policy"]
                except Exception:
                    policy = None
                if not ses_may(policy, "lambda:InvokeFunction", arn, source):
                    raise ses_exceptions.InvalidLambdaFunctionException(
                        f"Could not invoke Lambda function: {arn} (no permission for ses.amazonaws.com)"
                    )

    def create_receipt_rule(self: Any, rule_set_name: str, rule: dict[str, Any], after: str | None) -> None:
        check(self, rule_set_name, rule)
        create(self, rule_set_name, rule, after)

    def update_receipt_rule(self: Any, rule_set_name: str, rule: dict[str, Any]) -> None:
        check(self, rule_set_name, rule)
        update(self, rule_set_name, rule)

    ses_models.SESBackend.create_receipt_rule = create_receipt_rule
    ses_models.SESBackend.update_receipt_rule = update_receipt_rule


# --- production access, subscriptions, alarms -------------------------------------------------------


def put_account_details(request: dict[str, Any]) -> None:
    """SESv2 PutAccountDetails: "MailType" and "WebsiteURL" are required (SES API v2 reference,
    PutAccountDetails, https://docs.aws.amazon.com/ses/latest/APIReference-V2/API_PutAccountDetails.html);
    a request for production access puts it under review ("Details.ReviewDetails.Status" PENDING, GetAccount)
    until AWS answers (`email-handler model grant-production`)."""

    missing = [k for k in ("MailType", "WebsiteURL") if not request.get(k)]
    if missing:
        raise _ses_error("BadRequestException", f"Missing required parameter(s): {', '.join(missing)}")
    if request.get("MailType") not in ("MARKETING", "TRANSACTIONAL"):
        raise _ses_error("BadRequestException", "MailType must be MARKETING or TRANSACTIONAL")
    with _lock:
        _details.clear()
        _details.update({k: v for k, v in request.items() if k != "ProductionAccessEnabled"})
        if request.get("ProductionAccessEnabled"):
            _details["ReviewDetails"] = {"Status": "PENDING", "CaseId": uuid.uuid4().hex[:10]}


def account_details() -> dict[str, Any]:
    with _lock:
        return json.loads(json.dumps(_details))


def grant_production() -> None:
    """AWS grants production access: sends to any address, the production quotas."""

    SES_SANDBOX["on"] = False
    with _lock:
        review = _details.setdefault("ReviewDetails", {"CaseId": "granted-by-model"})
        review["Status"] = "GRANTED"


def confirmation_mails(endpoint: str) -> int:
    """How many subscription confirmation mails SNS sent to ``endpoint`` on the model."""
    with _lock:
        return _confirmation_mails.get(endpoint.lower(), 0)


def confirm_subscriptions() -> int:
    """Stand in for clicking every pending e-mail subscription's link; returns how many were confirmed."""
    sns_backends = motoadapter.sns_models().sns_backends

    confirmed = 0
    for regions in sns_backends.values():
        for backend in regions.values():
            for sub in backend.subscriptions.values():
                if sub.attributes.get("PendingConfirmation") is True:
                    sub.attributes["PendingConfirmation"] = False
                    sub.confirmed = True
                    confirmed += 1
    return confirmed


def _patch_sns() -> None:
    """An e-mail subscription made on the model waits for its confirmation: GetSubscriptionAttributes says
    ``PendingConfirmation`` "true" and ListSubscriptions* list ``PendingConfirmation`` for its ARN, as SNS
    does for a subscription "pending confirmation" (SNS API reference, Subscribe, ReturnSubscriptionArn)."""
    sns_models = motoadapter.sns_models()

    subscribe = sns_models.SNSBackend.subscribe

    def subscribe_pending(self: Any, topic_arn: str, endpoint: str, protocol: str) -> Any:
        existing = self._find_subscription(topic_arn, endpoint, protocol)
        sub = subscribe(self, topic_arn, endpoint, protocol)
        if fresh() and protocol in EMAIL_PROTOCOLS:
            if existing is None:
                sub.attributes["PendingConfirmation"] = True
            if sub.attributes.get("PendingConfirmation") is True:  # SNS mails the link, again if pending
                with _lock:
                    _confirmation_mails[endpoint.lower()] = _confirmation_mails.get(endpoint.lower(), 0) + 1
        return sub

    def subscription_arn(self: Any) -> str:
        return "PendingConfirmation" if self.attributes.get("PendingConfirmation") is True else str(self.arn)

    sns_models.SNSBackend.subscribe = subscribe_pending
    sns_models.Subscription.subscription_arn = property(subscription_arn)


def _patch_cloudwatch() -> None:
    """A new alarm starts INSUFFICIENT_DATA: "This is the initial state of a new alarm, but the alarm state
    also changes to INSUFFICIENT_DATA if CloudWatch metrics become unavailable, or not enough data is
    available" ("Monitor with CloudWatch alarms",
    https://docs.aws.amazon.com/autoscaling/application/userguide/cloudwatch-alarm-notifications.html);
    moto starts it OK. The model leaves it there (it evaluates no metric)."""
    cloudwatch_models = motoadapter.cloudwatch_models()

    put = cloudwatch_models.CloudWatchBackend.put_metric_alarm

    def put_metric_alarm(self: Any, name: str, *args: Any, **kwargs: Any) -> Any:
        new = name not in self.alarms
        alarm = put(self, name, *args, **kwargs)
        if fresh() and new:
            self.alarms[name].state_value = "INSUFFICIENT_DATA"
        return alarm

    cloudwatch_models.CloudWatchBackend.put_metric_alarm = put_metric_alarm


# --- IAM and Lambda quotas -------------------------------------------------------------------------


def _patch_iam() -> None:
    iam_exceptions = motoadapter.iam_exceptions()
    iam_models = motoadapter.iam_models()

    put_user, put_role, create, version = (
        iam_models.IAMBackend.put_user_policy,
        iam_models.IAMBackend.put_role_policy,
        iam_models.IAMBackend.create_policy,
        iam_models.IAMBackend.create_policy_version,
    )

    def inline_total(entity: Any, name: str, document: str) -> int:
        others = {k: v for k, v in entity.policies.items() if k != name}
        return sum(policy_size(v) for v in others.values()) + policy_size(document)

    def put_user_policy(self: Any, user_name: str, policy_name: str, policy_json: str) -> None:
        if fresh() and inline_total(self.get_user(user_name), policy_name, policy_json) > USER_INLINE_LIMIT:
            raise iam_exceptions.LimitExceededException(
                f"Maximum policy size of {USER_INLINE_LIMIT} bytes exceeded for user {user_name}"
            )
        put_user(self, user_name, policy_name, policy_json)

    def put_role_policy(self: Any, role_name: str, policy_name: str, policy_json: str) -> None:
        if fresh() and inline_total(self.get_role(role_name), policy_name, policy_json) > ROLE_INLINE_LIMIT:
            raise iam_exceptions.LimitExceededException(
                f"Maximum policy size of {ROLE_INLINE_LIMIT} bytes exceeded for role {role_name}"
            )
        put_role(self, role_name, policy_name, policy_json)

    def managed(document: str) -> None:
        if fresh() and policy_size(document) > MANAGED_LIMIT:
            raise iam_exceptions.LimitExceededException(
                f"Cannot exceed quota for PolicySize: {MANAGED_LIMIT}"
            )

    def create_policy(
        self: Any, description: str, path: str, policy_document: str, policy_name: str, tags: Any
    ) -> Any:
        managed(policy_document)
        return create(self, description, path, policy_document, policy_name, tags)

    def create_policy_version(self: Any, policy_arn: str, policy_document: str, set_as_default: bool) -> Any:
        managed(policy_document)
        return version(self, policy_arn, policy_document, set_as_default)

    iam_models.IAMBackend.put_user_policy = put_user_policy
    iam_models.IAMBackend.put_role_policy = put_role_policy
    iam_models.IAMBackend.create_policy = create_policy
    iam_models.IAMBackend.create_policy_version = create_policy_version


# The registries the model can ask: the local push path's (`email-handler deploy --registry HOST:PORT`).
# An ECR host is not asked (the model has no ECR behind it).
LOCAL_REGISTRY = re.compile(r"^(?:127\.0\.0\.1|localhost)(?::\d+)?$")


def image_refused(image_uri: str) -> str:
    """Why Lambda would refuse ``image_uri`` ('' if not, or if the model cannot ask its registry): "The
    image manifest, config or layer media type for the source image ... is not supported"
    (InvalidParameterValueException) when it names an image index -- what Docker's containerd image store
    and BuildKit's attestations push -- instead of one single-platform manifest (Lambda supports the
    Docker image manifest V2, schema 2 and the OCI image manifest: Lambda DG, "Create a Lambda function
    using a container image", https://docs.aws.amazon.com/lambda/latest/dg/images-create.html; the
    message is what AWS answers, as users report it, boto/boto3#3255)."""

    host, _, rest = image_uri.partition("/")
    repository, _, digest = rest.partition("@")
    if not digest or not LOCAL_REGISTRY.match(host):
        return ""
    try:
        media_type = manifest_media_type(host, repository, digest, {}, secure=False)
    except OSError:
        return ""
    if media_type in LAMBDA_MANIFESTS:
        return ""
    return (
        f"The image manifest, config or layer media type for the source image {image_uri} is not supported."
    )


def _patch_lambda_images() -> None:
    awslambda_exceptions = motoadapter.awslambda_exceptions()
    awslambda_models = motoadapter.awslambda_models()

    create, update = (
        awslambda_models.LambdaBackend.create_function,
        awslambda_models.LambdaBackend.update_function_code,
    )

    # Every account refuses an index, not only a new one: this rule is on whatever the switch says.
    def refuse(image_uri: str | None) -> None:
        if image_uri and (why := image_refused(image_uri)):
            raise awslambda_exceptions.InvalidParameterValueException(why)

    def create_function(self: Any, spec: dict[str, Any]) -> Any:
        refuse((spec.get("Code") or {}).get("ImageUri"))
        return create(self, spec)

    def update_function_code(self: Any, function_name: str, qualifier: str, body: dict[str, Any]) -> Any:
        refuse(body.get("ImageUri"))
        return update(self, function_name, qualifier, body)

    awslambda_models.LambdaBackend.create_function = create_function
    awslambda_models.LambdaBackend.update_function_code = update_function_code


# --- the control endpoints -------------------------------------------------------------------------


def _body(request: Any) -> bytes:
    """The raw body even when a client labels it a form (werkzeug then leaves request.data empty)."""
    return bytes(request.get_data() if hasattr(request, "get_data") else request.data or b"")


def _routes() -> None:
    urls = motoadapter.moto_api_urls()

    def dns(request: Any, full_url: str, headers: Any) -> tuple[int, dict[str, str], str]:

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
        return 200, {}, json.dumps({"records": publish(_body(request).decode())})

    def account(request: Any, full_url: str, headers: Any) -> tuple[int, dict[str, str], str]:
        if request.method == "POST":
            set_fresh(json.loads(_body(request) or b"{}").get("account") == "fresh")
        return 200, {}, json.dumps({"account": "fresh" if fresh() else "default"})

    def verify_address(request: Any, full_url: str, headers: Any) -> tuple[int, dict[str, str], str]:
        address = str(json.loads(_body(request) or b"{}").get("address", ""))
        if not fresh():
            return 409, {}, json.dumps({"Error": "not a fresh account: every identity is verified at once"})
        if not click(address):
            return 404, {}, json.dumps({"Error": f"no identity {address}: SES sent no link to click"})
        return 200, {}, json.dumps({"verified": address})

    def grant(request: Any, full_url: str, headers: Any) -> tuple[int, dict[str, str], str]:
        grant_production()
        return 200, {}, json.dumps({"production": True})

    def confirm(request: Any, full_url: str, headers: Any) -> tuple[int, dict[str, str], str]:
        return 200, {}, json.dumps({"confirmed": confirm_subscriptions()})

    urls.url_paths["{0}" + DNS_PATH + "$"] = dns
    urls.url_paths["{0}" + ACCOUNT_PATH + "$"] = account
    urls.url_paths["{0}" + VERIFY_ADDRESS_PATH + "$"] = verify_address
    urls.url_paths["{0}" + GRANT_PRODUCTION_PATH + "$"] = grant
    urls.url_paths["{0}" + CONFIRM_SUBSCRIPTIONS_PATH + "$"] = confirm


def _patch_route53() -> None:
    """ChangeResourceRecordSets refuses a TXT value that is not made of quoted strings of at most 255
    characters, as Route 53 does ("A TXT record contains one or more strings that are enclosed in double
    quotation marks", each "up to 255 characters", Route 53 DG, "Supported DNS record types", TXT; AWS
    answers InvalidChangeBatch). moto stores any text."""
    route53_exceptions = motoadapter.route53_exceptions()
    route53_models = motoadapter.route53_models()

    change = route53_models.Route53Backend.change_resource_record_sets

    def change_resource_record_sets(self: Any, zoneid: str, change_list: list[dict[str, Any]]) -> None:
        if fresh():
            for item in change_list:
                record_set = item.get("ResourceRecordSet") or {}
                if str(record_set.get("Type", "")).upper() != "TXT" or item.get("Action") == "DELETE":
                    continue
                for record in record_set.get("ResourceRecords") or []:
                    value = str(record.get("Value", "") if isinstance(record, dict) else record)
                    strings = txt_strings(value)
                    if strings is None or max(map(len, strings)) > TXT_STRING_MAX:
                        problem = "TXTRDATATooLong" if strings else "InvalidCharacterString"
                        raise route53_exceptions.Route53ClientError(
                            "InvalidChangeBatch",
                            f"[Invalid Resource Record: 'FATAL problem: {problem} encountered with "
                            f"'{value[:80]}'']",
                        )
        change(self, zoneid, change_list)

    route53_models.Route53Backend.change_resource_record_sets = change_resource_record_sets


def install() -> None:
    """Called once by local.emulator.patch_moto; every rule is inert until :func:`set_fresh`, except that
    Lambda refuses an image index (as on any account)."""
    _patch_route53()
    _patch_ses()
    _patch_receipt_rules()
    _patch_sesv2()
    _patch_sns()
    _patch_cloudwatch()
    _patch_iam()
    _patch_lambda_images()
    concurrency.install()
    _routes()

    after_reset(reset)  # the zone and the counters, not the switch
