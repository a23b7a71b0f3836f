"""deploy.propagation: which refusals are waited out (a grant made seconds before) and for how long."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from deploy import config, propagation
from deploy.plan import Run
from local.env import local_env

CFG = config.load(local_env())


def refusal(code: str, message: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message}}, "Op")


def flaky(errors: list[Exception]) -> Any:
    def call() -> str:
        if errors:
            raise errors.pop(0)
        return "done"

    return call


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (
            refusal(
                "InvalidParameterValueException",
                "The role defined for the function cannot be assumed by Lambda.",
            ),
            propagation.ROLE_NOT_ASSUMABLE,
        ),
        (
            refusal(
                "InvalidParameterValueException",
                "The provided execution role does not have permissions to call ReceiveMessage on SQS",
            ),
            propagation.ROLE_LACKS_PERMISSION,
        ),
        (
            refusal("InvalidArgument", "Unable to validate the following destination configurations"),
            propagation.S3_DESTINATION_UNVALIDATED,
        ),
        (
            refusal(
                "InvalidLambdaFunction",
                "Could not invoke Lambda function: arn:aws:lambda:us-east-1:1:function:f:live",
            ),
            propagation.SES_RULE_UNVALIDATED,
        ),
        (refusal("InvalidS3Configuration", "Could not write to bucket: b"), propagation.SES_RULE_UNVALIDATED),
    ],
)
def test_a_propagation_refusal_is_retried_with_a_progress_line(
    error: Exception, kind: propagation.Propagating
) -> None:
    said: list[str] = []
    slept: list[float] = []
    run = Run(CFG, True, None, say=said.append, sleep=slept.append)
    assert propagation.retry(run, "the call", flaky([error, error]), kind) == "done"
    assert slept == [propagation.STEP_S] * 2 and len(said) == 2 and "the call" in said[0]


def test_other_errors_are_raised_at_once_and_a_refusal_that_lasts_after_the_attempts() -> None:
    slept: list[float] = []
    run = Run(CFG, True, None, sleep=slept.append)
    other = refusal("InvalidParameterValueException", "Image manifest is an index")
    with pytest.raises(ClientError, match="index"):
        propagation.retry(run, "x", flaky([other]), propagation.ROLE_LACKS_PERMISSION)
    assert slept == []
    lasting = refusal("InvalidArgument", "Unable to validate the following destination configurations")
    with pytest.raises(ClientError, match="Unable to validate"):
        propagation.retry(run, "x", flaky([lasting] * 50), propagation.S3_DESTINATION_UNVALIDATED)
    assert len(slept) == propagation.ATTEMPTS - 1
