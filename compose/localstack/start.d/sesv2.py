"""LocalStack init hook (start stage, run inside LocalStack's process): the SESv2 calls this system
makes, answered from LocalStack's own SES (v1).

**SendEmail with raw content.** The senders send through SESv2 ``SendEmail`` with ``Content.Raw``
(40 MB messages; common/aws/ses.py).
LocalStack community 4.4.0 has no SESv2: it answers ``501 InternalFailure`` ("not included in your
current license plan"), measured. This route answers that one operation with LocalStack's own SES:
the same message goes through SES v1 ``SendRawEmail`` of this LocalStack, with the caller's
credentials and region, so identity checks, configuration-set events to SNS and the ``/_aws/ses``
list behave as for any SES send here, and SES's error (code, message, status) is returned as SESv2
returns errors. Any other SESv2 content (Simple, Template) is refused with 400, saying so.

**The account and identity calls.** The deploy and the local provisioning create PRIVATE_EMAIL's
identity with SESv2
``CreateEmailIdentity``; the senders ask ``GetAccount`` and ``GetEmailIdentity`` whether SES's sandbox
refuses a recipient (common/aws/ses.py ``sandbox_refused``). Here:

* ``CreateEmailIdentity`` → SES ``VerifyEmailIdentity`` / ``VerifyDomainIdentity`` of this LocalStack;
* ``GetEmailIdentity`` → SES ``GetIdentityVerificationAttributes`` (404 ``NotFoundException`` for an
  unknown identity, as SESv2 answers);
* ``GetAccount`` → production access: LocalStack's SES has no sandbox (it sends to anyone), so
  saying "sandbox" would hold mail that LocalStack would deliver. The quota is SES's ``GetSendQuota``.
"""

import base64
import json
import re

from botocore.exceptions import ClientError
from localstack.aws.connect import connect_externally_to
from localstack.http import Response
from localstack.services.edge import ROUTER

_CREDENTIAL = re.compile(r"Credential=([^/,\s]+)/\d{8}/([^/]+)/")


def _error(status: int, code: str, message: str) -> Response:
    # SESv2 is REST-JSON: botocore reads the code from x-amzn-ErrorType and the text from "message".
    return Response(
        json.dumps({"message": message}),
        status,
        headers={"x-amzn-ErrorType": code},
        mimetype="application/json",
    )


def _send_email(request, **_):
    try:
        body = json.loads(request.get_data() or b"{}")
        raw = base64.b64decode(body["Content"]["Raw"]["Data"])
    except (ValueError, KeyError, TypeError):
        return _error(
            400, "BadRequestException", "this LocalStack answers SESv2 SendEmail with Content.Raw only"
        )
    destination = body.get("Destination") or {}
    params = {"RawMessage": {"Data": raw}}
    recipients = [
        a for key in ("ToAddresses", "CcAddresses", "BccAddresses") for a in destination.get(key) or []
    ]
    if recipients:
        params["Destinations"] = recipients
    if body.get("FromEmailAddress"):
        params["Source"] = body["FromEmailAddress"]
    if body.get("ConfigurationSetName"):
        params["ConfigurationSetName"] = body["ConfigurationSetName"]
    ses = _ses(request)
    try:
        sent = ses.send_raw_email(**params)
    except ClientError as exc:
        error = exc.response.get("Error", {})
        return _error(
            int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 500)),
            str(error.get("Code", "InternalFailure")),
            str(error.get("Message", "")),
        )
    return Response(json.dumps({"MessageId": sent["MessageId"]}), 200, mimetype="application/json")


def _ses(request):
    found = _CREDENTIAL.search(request.headers.get("Authorization", ""))
    access_key, region = found.groups() if found else ("test", "us-east-1")
    return connect_externally_to(
        region_name=region, aws_access_key_id=access_key, aws_secret_access_key="test"
    ).ses


def _json(body: dict, status: int = 200) -> Response:
    return Response(json.dumps(body), status, mimetype="application/json")


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


ROUTER.add("/v2/email/outbound-emails", endpoint=_send_email, methods=["POST"])
ROUTER.add("/v2/email/identities", endpoint=_create_identity, methods=["POST"])
ROUTER.add("/v2/email/identities/<path:identity>", endpoint=_get_identity, methods=["GET"])
ROUTER.add("/v2/email/account", endpoint=_get_account, methods=["GET"])
