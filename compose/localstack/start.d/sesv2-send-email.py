"""LocalStack init hook (start stage, run inside LocalStack's process): SESv2 SendEmail with raw content.

The senders send through SESv2 ``SendEmail`` with ``Content.Raw`` (40 MB messages; common/aws/ses.py).
LocalStack community 4.4.0 has no SESv2: it answers ``501 InternalFailure`` ("not included in your
current license plan"), measured. This route answers that one operation with LocalStack's own SES:
the same message goes through SES v1 ``SendRawEmail`` of this LocalStack, with the caller's
credentials and region, so identity checks, configuration-set events to SNS and the ``/_aws/ses``
list behave as for any SES send here, and SES's error (code, message, status) is returned as SESv2
returns errors. Any other SESv2 content (Simple, Template) is refused with 400, saying so.
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
    found = _CREDENTIAL.search(request.headers.get("Authorization", ""))
    access_key, region = found.groups() if found else ("test", "us-east-1")
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
    ses = connect_externally_to(
        region_name=region, aws_access_key_id=access_key, aws_secret_access_key="test"
    ).ses
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


ROUTER.add("/v2/email/outbound-emails", endpoint=_send_email, methods=["POST"])
