import pytest

from common.errors import ConfigError
from common.runtime.config import with_secrets
from deploy import config
from deploy.functions import FUNCTIONS

GOOD = {
    "DOMAIN_NAME": "example.com",
    "PUBLIC_EMAIL": "hello@example.com",
    "PRIVATE_EMAIL": "owner@example.net",
    "THREAD_SECRET": "x" * 32,
}


def test_defaults_follow_project_env_name_convention() -> None:
    cfg = config.load({**GOOD, "ENVIRONMENT": "local"})
    assert cfg.prefix == "service-email-handler-local"
    assert cfg.conversations_table == "service-email-handler-local-conversations"
    assert cfg.ack_queue == "service-email-handler-local-ack"
    assert cfg.thread_domain == "thread.example.com"
    assert cfg.owner_emails == ("owner@example.net",)
    assert config.load(GOOD).env == "prd"


def test_missing_required_variables_are_named() -> None:
    with pytest.raises(ConfigError) as err:
        config.load(
            {"PUBLIC_EMAIL": "hello@example.com"}, require=("domain_name", "public_email", "thread_secret")
        )
    assert "DOMAIN_NAME" in str(err.value) and "THREAD_SECRET" in str(err.value)
    assert "PUBLIC_EMAIL" not in str(err.value)


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        ({"PUBLIC_EMAIL": "not-an-address"}, "PUBLIC_EMAIL"),
        ({"PUBLIC_EMAIL": "hello@other.org"}, "PUBLIC_EMAIL must be an address at DOMAIN_NAME"),
        ({"DOMAIN_NAME": "no_dots"}, "DOMAIN_NAME"),
        ({"THREAD_SECRET": "short"}, "THREAD_SECRET"),
        ({"MAX_SEND_RATE": "fast"}, "MAX_SEND_RATE"),
        ({"EXTRACT_MAX_PAGES": "1.5"}, "EXTRACT_MAX_PAGES"),
        ({"OWNER_EMAILS": "owner@example.net, nope"}, "OWNER_EMAILS"),
        ({"PRIVATE_EMAIL": "jörg@example.net"}, "PRIVATE_EMAIL=.* is not an ASCII email address"),
        ({"OWNER_EMAILS": "owner@bücher.example"}, "OWNER_EMAILS contains"),
        ({"ENVIRONMENT": "Prod"}, "ENVIRONMENT"),
        ({"FORWARD_LINK_DAYS": "8"}, "FORWARD_LINK_DAYS must be 1 to 7"),  # S3's SigV4 limit
        ({"FORWARD_LINK_DAYS": "0"}, "FORWARD_LINK_DAYS must be 1 to 7"),
        ({"QUOTA_WAIT_SECONDS": "43201"}, "QUOTA_WAIT_SECONDS must be between 1 and 43200"),
        ({"QUOTA_WAIT_SECONDS": "0"}, "QUOTA_WAIT_SECONDS"),
    ],
)
def test_malformed_values_raise_naming_the_variable(env: dict[str, str], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        config.load({**GOOD, **env})


def test_lists_and_numbers_parse() -> None:
    cfg = config.load(
        {
            **GOOD,
            "OWNER_EMAILS": "a@example.net, b@example.org",
            "ATTACHMENT_DENY_TYPES": "EXE,.js",
            "MAX_SEND_RATE": "2.5",
            "EXTRACT_MAX_PAGES": "10",
            "AWS_REGION": "eu-west-1",
        }
    )
    assert cfg.owner_emails == ("a@example.net", "b@example.org")
    assert cfg.attachment_deny_types == ("EXE", ".js")
    assert (cfg.max_send_rate, cfg.max_pages, cfg.region) == (2.5, 10, "eu-west-1")


def test_every_function_can_start_with_the_local_defaults(local_defaults: dict[str, str]) -> None:
    for fn in FUNCTIONS:  # the dev secret is in the defaults: no SSM parameter is read
        assert with_secrets(fn.config.load(local_defaults))


def test_a_send_record_outlives_every_copy_of_its_message() -> None:
    """A redrive resets a message's enqueue time (SQS DG), so one late redrive gives a copy a second life of
    main + DLQ retention; the idempotency record must still be there when it arrives, or the mail goes out
    twice."""
    from deploy.resources import DLQ_RETENTION_S, MAIN_RETENTION_S, lifecycle

    lifetime = 2 * (MAIN_RETENTION_S + DLQ_RETENTION_S)
    cfg = config.load(GOOD)
    assert cfg.idempotency_ttl_s >= lifetime
    # A large send's body sits in S3 (claim check): gone before the message, the send fails for good.
    [payloads] = [rule for rule in lifecycle(cfg) if rule["ID"] == "queue-payloads"]
    assert payloads["Expiration"]["Days"] * 86400 >= lifetime


def test_only_the_daily_quota_message_reads_as_a_used_up_quota() -> None:
    """SES answers both quota errors with a throttling code; the message tells them apart (SES DG,
    "Errors related to the sending quotas for your Amazon SES account")."""
    from botocore.exceptions import ClientError

    from common.aws.ses import daily_quota_exceeded

    def error(code: str, message: str) -> ClientError:
        return ClientError({"Error": {"Code": code, "Message": message}}, "SendEmail")

    assert daily_quota_exceeded(error("ThrottlingException", "Daily message quota exceeded."))
    assert daily_quota_exceeded(error("Throttling", "Daily message quota exceeded."))
    assert not daily_quota_exceeded(error("ThrottlingException", "Maximum sending rate exceeded."))
    assert not daily_quota_exceeded(RuntimeError("Daily message quota exceeded"))  # no SES answer at all
    assert config.load(GOOD).quota_wait_s == 3600
