"""The download links of a shortened forward (common.delivery.compose.build_forward with
common.aws.s3.presign_get): what gets a link, how long it is said to work, and what never gets one.
Presigning is local computation (no request), so these run with made-up credentials."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from urllib.parse import parse_qs, urlsplit

import pytest

from common.aws import reset_clients, s3
from common.delivery.compose import TEMPORARY_LINKS_NOTE, build_forward
from common.mail.outbound import Attachment
from common.mail.parse import parse
from common.store.attachments import Stored, Withheld
from deploy import config
from local.env import local_env
from tests.support.mailgen import mail

CFG = config.load({**local_env(), "MAX_FORWARD_BYTES": "100000"})
ARCHIVE = "conversations/jane-at-corp.example/m1.eml"
BIG = Attachment(
    key="attachments/jane-at-corp.example/m1/big.pdf", filename="big.pdf", content_type="application/pdf"
)


@pytest.fixture
def credentials(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    for name in ("AWS_PROFILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLEEXAMPLE00")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    reset_clients()
    yield monkeypatch
    reset_clients()


def forward(stored: Stored, html: bool = False) -> str:
    parsed = parse(
        mail(
            sender='"Jane https://evil.example/x" <jane@corp.example>',
            text="See attached.",
            html="<p>See attached.</p>" if html else None,
        )
    )
    fwd = build_forward(
        CFG,
        "m1",
        "jane-at-corp.example",
        parsed,
        stored,
        (),
        ARCHIVE,
        "t@thread.example.com",
        lambda key: s3.presign_get(CFG.bucket, key, CFG.forward_link_days * 24 * 3600),
    )
    return fwd.html if html else fwd.text


def query(url: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}


def test_long_term_keys_sign_for_the_configured_days_and_the_forward_says_until_when(
    credentials: pytest.MonkeyPatch,
) -> None:
    link = s3.presign_get(
        "bucket-name",
        "attachments/c/m/big file.pdf",
        30 * 24 * 3600,
        now=datetime(2026, 11, 26, 0, 0, tzinfo=UTC),
    )
    q = query(link.url)
    assert (
        q["X-Amz-Algorithm"] == "AWS4-HMAC-SHA256" and q["X-Amz-Expires"] == "604800"
    )  # S3's seven days at most
    assert "/eu-west-1/s3/aws4_request" in q["X-Amz-Credential"] and not link.temporary
    assert link.url.startswith(
        "https://bucket-name.s3.eu-west-1.amazonaws.com/attachments/c/m/big%20file.pdf?"
    )
    assert link.expires == datetime(2026, 12, 3, 0, 0, tzinfo=UTC)
    text = forward(Stored(attachments=[BIG], sizes={BIG.key: 300_000}))
    assert f"big.pdf (too large to forward; stored at s3://{CFG.bucket}/{BIG.key}; download until " in text
    assert f"archived at s3://{CFG.bucket}/{ARCHIVE} (download until " in text
    assert "at the latest" not in text and TEMPORARY_LINKS_NOTE not in text


def test_temporary_credentials_sign_for_twelve_hours_at_most_and_the_forward_says_it_may_end_sooner(
    credentials: pytest.MonkeyPatch,
) -> None:
    credentials.setenv("AWS_SESSION_TOKEN", "role-session-token")
    link = s3.presign_get("bucket-name", "k", 7 * 24 * 3600)
    assert link.temporary and query(link.url)["X-Amz-Expires"] == "43200"
    assert query(link.url)["X-Amz-Security-Token"] == "role-session-token"
    assert (
        query(s3.presign_get("bucket-name", "k", 600).url)["X-Amz-Expires"] == "600"
    )  # a shorter setting holds
    text = forward(Stored(attachments=[BIG], sizes={BIG.key: 300_000}))
    assert " UTC at the latest: https://" in text and TEMPORARY_LINKS_NOTE in text


def test_withheld_parts_and_an_original_holding_them_get_no_link(credentials: pytest.MonkeyPatch) -> None:
    exe = Withheld(
        name="setup.exe", key="withheld/jane-at-corp.example/m1/setup.exe", reason="denied type .exe"
    )
    text = forward(Stored(attachments=[BIG], sizes={BIG.key: 300_000}, withheld=[exe]))
    assert f"setup.exe (denied type .exe; stored at s3://{CFG.bucket}/{exe.key})" in text
    assert text.count("X-Amz-Signature=") == 1 and "big.pdf (too large to forward; stored at" in text
    assert f"archived at s3://{CFG.bucket}/{ARCHIVE} (no download link: it holds the withheld parts" in text


def test_a_forward_that_fits_carries_no_link(credentials: pytest.MonkeyPatch) -> None:
    small = Attachment(key="attachments/jane-at-corp.example/m1/a.pdf", filename="a.pdf")
    text = forward(Stored(attachments=[small], sizes={small.key: 1000}))
    assert "X-Amz-Signature=" not in text and "download" not in text


def test_the_html_part_makes_the_links_clickable_and_nothing_the_sender_wrote(
    credentials: pytest.MonkeyPatch,
) -> None:
    html = forward(Stored(attachments=[BIG], sizes={BIG.key: 300_000}), html=True)
    anchors = re.findall(r'<a href="([^"]+)">', html)
    assert len(anchors) == 2 and all(a.startswith("https://") and "X-Amz-Signature=" in a for a in anchors)
    assert "&amp;X-Amz-" in anchors[0]  # escaped in the attribute: a client reads it as &
    assert "https://evil.example/x" in html and 'href="https://evil.example' not in html
