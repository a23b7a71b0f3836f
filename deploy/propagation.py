"""Retrying the calls that AWS validates against a role or permission made seconds before.

IAM and resource-based policies are eventually consistent, and several calls check them when they
are made: Lambda assumes the new role (CreateFunction) or checks that it may read the queue
(CreateEventSourceMapping) or send to the on-failure queue (PutFunctionEventInvokeConfig); S3 checks
the permission the extractor was just given (PutBucketNotificationConfiguration); SES test-writes to
the bucket and checks the Lambda permission (CreateReceiptRule). Each refuses with a client error
for a while after the grant. Only those errors, recognised by code and message, are retried.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from common.aws import error_code

if TYPE_CHECKING:  # pragma: no cover
    from deploy.plan import Run

ATTEMPTS = 12
STEP_S = 5.0  # 12 x 5 s: about a minute, what IAM usually needs


@dataclass(frozen=True)
class Propagating:
    """An error that means "not propagated yet": one of ``codes`` whose message has one of ``fragments``."""

    codes: tuple[str, ...]
    fragments: tuple[str, ...]

    def matches(self, exc: BaseException) -> bool:
        message = str(exc).lower()
        return error_code(exc) in self.codes and any(f in message for f in self.fragments)


# CreateFunction / UpdateFunctionConfiguration: "The role defined for the function cannot be assumed
# by Lambda."
ROLE_NOT_ASSUMABLE = Propagating(("InvalidParameterValueException",), ("cannot be assumed", "assume"))
# CreateEventSourceMapping: "The provided execution role does not have permissions to call
# ReceiveMessage on SQS" (newer: "The function execution role ..."); PutFunctionEventInvokeConfig:
# "... to call SendMessage on SQS"
ROLE_LACKS_PERMISSION = Propagating(
    ("InvalidParameterValueException",), ("execution role does not have permissions",)
)
# PutBucketNotificationConfiguration right after AddPermission: InvalidArgument
S3_DESTINATION_UNVALIDATED = Propagating(
    ("InvalidArgument",), ("unable to validate the following destination",)
)
# CreateReceiptRule / UpdateReceiptRule: SES checks the bucket policy and the Lambda permission
SES_RULE_UNVALIDATED = Propagating(
    ("InvalidS3Configuration", "InvalidLambdaFunction"),
    ("could not write to bucket", "could not invoke lambda function"),
)


def retry[T](run: Run, what: str, call: Callable[[], T], *errors: Propagating) -> T:
    """``call()``, again every STEP_S seconds while it fails with one of ``errors`` (ATTEMPTS in all)."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return call()
        except Exception as exc:
            if attempt == ATTEMPTS or not any(e.matches(exc) for e in errors):
                raise
            run.say(
                f"waiting for IAM to propagate: {what} refused ({error_code(exc)}: {str(exc)[-160:]}); "
                f"retry {attempt}/{ATTEMPTS - 1} in {STEP_S:.0f} s"
            )
            run.sleep(STEP_S)
    raise AssertionError("unreachable")
