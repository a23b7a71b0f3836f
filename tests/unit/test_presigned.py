"""Query-string SigV4 (presigned URLs) as the local emulator verifies it (local.iam.presigned_problem),
checked against botocore's own presigner."""

from __future__ import annotations

import datetime
from urllib.parse import urlsplit

from botocore.auth import S3SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from local.iam import presigned_problem

SECRET = "local-secret"


def presign(url: str, expires: int = 300) -> tuple[str, str]:
    request = AWSRequest(method="GET", url=url)
    S3SigV4QueryAuth(Credentials("AKIDLOCAL", SECRET), "s3", "us-east-1", expires=expires).add_auth(request)
    parts = urlsplit(request.url)
    return parts.path, parts.query


def check(path: str, query: str, secret: str = SECRET, later: int = 0) -> str:
    now = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=later)
    return presigned_problem("GET", path, query, {"Host": "127.0.0.1:4566"}, secret, now)


def test_a_presigned_get_is_valid_until_it_expires() -> None:
    path, query = presign("http://127.0.0.1:4566/bucket/attachments/c/m/big%20file.pdf")
    assert check(path, query) == ""
    assert check(path, query, later=301) == "Request has expired"


def test_anything_changed_breaks_the_signature() -> None:
    path, query = presign("http://127.0.0.1:4566/bucket/a.pdf")
    assert check(path.replace("a.pdf", "b.pdf"), query) == "SignatureDoesNotMatch"
    assert check(path, query, secret="other") == "SignatureDoesNotMatch"
    assert check(path, query.replace("X-Amz-Expires=300", "X-Amz-Expires=600")) == "SignatureDoesNotMatch"


def test_malformed_or_over_long_presigned_requests_are_refused() -> None:
    path, query = presign(
        "http://127.0.0.1:4566/bucket/a.pdf", expires=8 * 24 * 3600
    )  # S3 allows seven days at most
    assert check(path, query) == "AuthorizationQueryParametersError"
    assert check(path, "X-Amz-Algorithm=AWS4-HMAC-SHA256") == "AuthorizationQueryParametersError"
