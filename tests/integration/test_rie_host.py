"""Every function under the real aws-lambda-rie and awslambdaric on the host, invoked over HTTP."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from local.rie import InvokeError, RieProcess
from tests.support.cases import CASES, Case, event_for
from tests.support.harness import Stack


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.function)
def test_rie_invoke_on_host(case: Case, rie_function: Callable[..., RieProcess], stack: Stack) -> None:
    fn = rie_function(case.function)
    case.check(fn.invoke(event_for(case)))


def test_logs_are_flushed_before_the_response(rie_function: Callable[..., RieProcess], stack: Stack) -> None:
    """mypylogger writes on a background thread; every line must be out when the invoke returns."""
    fn = rie_function("ack-sender")
    event = event_for(CASES[3])
    event["Records"].append({**event["Records"][0], "messageId": "bad-1", "body": "not json"})
    # a body that is not JSON can never be sent: the DLQ at once, not a failed record
    assert fn.invoke(event) == {"batchItemFailures": []}
    output = fn.output()  # read at once: no sleep, no retry
    request_id = re.search(r"START RequestId: (\S+)", output) or re.search(
        r"INVOKE START\(requestId: ([^)]+)\)", output
    )
    assert request_id, output
    # Log records, not the embedded-metric documents that share stdout (they carry no message).
    lines = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    lines = [line for line in lines if "message" in line]
    finished = [line for line in lines if line["message"] == "invocation finished"]
    assert finished and finished[-1]["request_id"] == request_id.group(1)
    assert finished[-1]["service"] == "ack-sender" and finished[-1]["outcome"] == "ok"
    failed = [line for line in lines if line["message"] == "send failed"]
    assert failed[0]["sqs_message_id"] == "bad-1" and failed[0]["error_code"] == "InvalidMessage"
    assert "not JSON" in failed[0]["detail"] and failed[0]["level"] == "ERROR" and failed[0]["permanent"]


def test_missing_config_is_a_clear_init_error(
    rie_function: Callable[..., RieProcess], moto_server: str
) -> None:
    from common.aws import client
    from deploy import config
    from local.env import local_env

    # no secret in its variables (as always) and none stored in SSM either (provisioning stores one)
    name = config.load(local_env()).thread_secret_parameter
    try:
        client("ssm").delete_parameter(Name=name)
    except client("ssm").exceptions.ParameterNotFound:
        pass
    fn = rie_function("inbound-handler", drop=("DOMAIN_NAME", "THREAD_SECRET"))
    with pytest.raises(InvokeError) as err:
        fn.invoke(event_for(CASES[0]))
    assert err.value.payload["errorType"] == "ConfigError"
    assert "DOMAIN_NAME" in err.value.payload["errorMessage"]
    assert "THREAD_SECRET" in err.value.payload["errorMessage"]


def test_wrong_event_shape_is_rejected_with_reason(rie_function: Callable[..., RieProcess]) -> None:
    fn = rie_function("attachment-extractor")
    with pytest.raises(InvokeError) as err:
        fn.invoke(event_for(CASES[0]))  # an SES event sent to the extractor
    assert err.value.payload["errorType"] == "EventError"
    assert "aws:s3" in err.value.payload["errorMessage"]


def test_cli_invoke_reaches_the_function(
    rie_function: Callable[..., RieProcess], stack: Stack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ops.main import main

    fn = rie_function("ack-sender")
    event = tmp_path / "event.json"
    event.write_text(json.dumps(event_for(CASES[3])))
    assert main(["invoke", "ack-sender", "--event", str(event), "--url", fn.url]) == 0
    assert json.loads(capsys.readouterr().out) == {"batchItemFailures": []}
