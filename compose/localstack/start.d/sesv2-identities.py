"""LocalStack init hook (start stage, run inside LocalStack's process): the SESv2 account and identity
reads and writes this system makes, answered from LocalStack's own SES (v1).

LocalStack community 4.4.0 has no SESv2 (``501 InternalFailure``, "not included in your current
license plan"). The deploy and the local provisioning create PRIVATE_EMAIL's identity with SESv2
``CreateEmailIdentity``; the senders ask ``GetAccount`` and ``GetEmailIdentity`` whether SES's sandbox
refuses a recipient (common/aws/ses.py ``sandbox_refused``). Here:

* ``CreateEmailIdentity`` → SES ``VerifyEmailIdentity`` / ``VerifyDomainIdentity`` of this LocalStack;
* ``GetEmailIdentity`` → SES ``GetIdentityVerificationAttributes`` (404 ``NotFoundException`` for an
  unknown identity, as SESv2 answers);
* ``GetAccount`` → production access: LocalStack's SES has no sandbox (it sends to anyone), so
  saying "sandbox" would hold mail that LocalStack would deliver. The quota is SES's ``GetSendQuota``.
"""

import json
import re

from localstack.aws.connect import connect_externally_to
from localstack.http import Response
from localstack.services.edge import ROUTER

_CREDENTIAL = re.compile(r"Credential=([^/,\s]+)/\d{8}/([^/]+)/")


def _ses(request):
    found = _CREDENTIAL.search(request.headers.get("Authorization", ""))
    access_key, region = found.groups() if found else ("test", "us-east-1")
    return connect_externally_to(
        region_name=region, aws_access_key_id=access_key, aws_secret_access_key="test"
    ).ses


def _json(body: dict, status: int = 200) -> Response:
    return Response(json.dumps(body), status, mimetype="application/json")


def _error(status: int, code: str, message: str) -> Response:
    return Response(
        json.dumps({"message": message}),
        status,
        headers={"x-amzn-ErrorType": code},
        mimetype="application/json",
    )


def _kind(identity: str) -> str:
    return "EMAIL_ADDRESS" if "@" in identity else "DOMAIN"


def _create_identity(request, **_):
    try:
        identity = str(json.loads(request.get_data() or b"{}")["EmailIdentity"])
    except (ValueError, KeyError, TypeError):
        return _error(400, "BadRequestException", "EmailIdentity is required")
    ses = _ses(request)
    if "@" in identity:
        ses.verify_email_identity(EmailAddress=identity)
    else:
        ses.verify_domain_identity(Domain=identity)
    status = ses.get_identity_verification_attributes(Identities=[identity])["VerificationAttributes"]
    verified = status.get(identity, {}).get("VerificationStatus") == "Success"
    return _json({"IdentityType": _kind(identity), "VerifiedForSendingStatus": verified})


def _get_identity(request, identity: str, **_):
    found = _ses(request).get_identity_verification_attributes(Identities=[identity])[
        "VerificationAttributes"
    ]
    if identity not in found:
        return _error(404, "NotFoundException", f"Email identity {identity} does not exist.")
    status = str(found[identity].get("VerificationStatus", "Pending"))
    return _json(
        {
            "IdentityType": _kind(identity),
            "VerifiedForSendingStatus": status == "Success",
            "VerificationStatus": status.upper(),
        }
    )


def _get_account(request, **_):
    quota = _ses(request).get_send_quota()
    return _json(
        {
            "ProductionAccessEnabled": True,
            "SendingEnabled": True,
            "EnforcementStatus": "HEALTHY",
            "DedicatedIpAutoWarmupEnabled": False,
            "SendQuota": {k: quota.get(k, 0) for k in ("Max24HourSend", "MaxSendRate", "SentLast24Hours")},
        }
    )


ROUTER.add("/v2/email/identities", endpoint=_create_identity, methods=["POST"])
ROUTER.add("/v2/email/identities/<path:identity>", endpoint=_get_identity, methods=["GET"])
ROUTER.add("/v2/email/account", endpoint=_get_account, methods=["GET"])
