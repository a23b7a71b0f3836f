"""SES: the one module that sends mail."""

from __future__ import annotations

from common.aws import client

# Codes worth another attempt after a pause (FR-2). Everything else fails at once.
RETRYABLE = frozenset({
    "Throttling", "ThrottlingException", "TooManyRequestsException", "ServiceUnavailable",
    "ServiceUnavailableException", "InternalFailure", "InternalServerError", "RequestTimeout",
    "MailFromDomainNotVerified", "MailFromDomainNotVerifiedException",
})


def prepare() -> None:
    """Create the sending client now (its first use loads botocore's SES model)."""
    client("ses", max_attempts=1)


def send_raw(raw: bytes, source: str, destinations: list[str], configuration_set: str = "") -> str:
    """SendRawEmail; returns the SES MessageId. botocore retries are off: the sender owns them.
    With a configuration set SES publishes the send's delivery, bounce and complaint events."""
    extra = {"ConfigurationSetName": configuration_set} if configuration_set else {}
    response = client("ses", max_attempts=1).send_raw_email(
        Source=source, Destinations=destinations, RawMessage={"Data": raw}, **extra,
    )
    return str(response["MessageId"])
