"""SES: the one module that sends mail (SESv2 SendEmail with raw content).

SESv2 accepts messages up to 40 MB (SESv1 SendRawEmail: 10 MB), "after base64 encoding" of the
attachments inside the MIME message (SES DG "Service quotas in Amazon SES"). The raw message is
passed as built; the SDK base64-encodes it for the request.
"""

from __future__ import annotations

from common.aws import client, error_code

# The largest message SESv2 sends, headers and encoded attachments included (decimal MB: the
# smaller reading of "40 MB"; SES adds its own headers, DKIM signature and Message-ID on top).
MAX_MESSAGE_BYTES = 40_000_000

# Codes worth another attempt after a pause (docs/senders.md). Everything else fails at once.
RETRYABLE = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "TooManyRequestsException",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "InternalFailure",
        "InternalServerError",
        "RequestTimeout",
        "MailFromDomainNotVerified",
        "MailFromDomainNotVerifiedException",
    }
)


def daily_quota_exceeded(exc: BaseException) -> bool:
    """SES refused the send because the account's 24-hour quota is used up. The API answers a throttling
    error whose message is "Daily message quota exceeded" (its rate twin: "Maximum sending rate
    exceeded"); only the message tells them apart (SES DG, "Errors related to the sending quotas for your
    Amazon SES account", https://docs.aws.amazon.com/ses/latest/dg/manage-sending-quotas-errors.html).
    Retrying within seconds cannot help: room comes back only as the day's oldest sends age out."""
    response = getattr(exc, "response", None)
    message = str((response or {}).get("Error", {}).get("Message", "")) if isinstance(response, dict) else ""
    return "daily message quota exceeded" in message.lower()


def prepare() -> None:
    """Create the sending client now (its first use loads botocore's SES model)."""
    client("sesv2", max_attempts=1)


def send_raw(raw: bytes, source: str, destinations: list[str], configuration_set: str = "") -> str:
    """SendEmail with ``Content.Raw``; returns the SES MessageId. botocore retries are off: the
    sender owns them. ``destinations`` are the envelope recipients (the To header is not read).
    With a configuration set SES publishes the send's delivery, bounce and complaint events."""
    extra = {"ConfigurationSetName": configuration_set} if configuration_set else {}
    response = client("sesv2", max_attempts=1).send_email(
        FromEmailAddress=source,
        Destination={"ToAddresses": destinations},
        Content={"Raw": {"Data": raw}},
        **extra,
    )
    return str(response["MessageId"])


def sandbox_refused(recipients: list[str]) -> list[str]:
    """The recipients SES's sandbox refuses: [] with production access; otherwise each address that is
    neither a verified identity nor at a verified domain. "If your account is still in the Amazon SES
    sandbox, you also need to verify any email addresses which you plan on sending email to" (SES DG,
    "Verified identities", https://docs.aws.amazon.com/ses/latest/dg/verify-addresses-and-domains.html).
    SESv2 reads (GetAccount, GetEmailIdentity's ``VerifiedForSendingStatus``), asked only when they
    matter: before an ack, and after SES refused a send."""

    sesv2 = client("sesv2")
    if sesv2.get_account().get("ProductionAccessEnabled"):
        return []

    def verified(identity: str) -> bool:
        try:
            return bool(sesv2.get_email_identity(EmailIdentity=identity).get("VerifiedForSendingStatus"))
        except Exception as exc:
            if error_code(exc) == "NotFoundException":  # not an identity at all
                return False
            raise

    return [r for r in recipients if not verified(r) and not verified(r.rpartition("@")[2].lower())]
