"""What a function's cold start imports: the modules only some events need stay out of ``import app``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _imported_by(module: str) -> set[str]:
    code = f"import sys, {module}; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, check=True, capture_output=True, text=True
    ).stdout
    return set(out.split())


def test_a_sender_never_imports_the_attachment_store_or_the_mail_parser() -> None:
    """About 50 ms of a sender's `import app`: a sender reads a stored part through the send queue's
    claim check (common/store/sendqueue.py), never through the module that stores what inbound parsed."""
    loaded = _imported_by("common.senders.handler")
    assert "common.senders.handler" in loaded
    assert not {"common.store.attachments", "common.mail.parse"} & loaded


def test_the_deploy_gives_every_function_its_own_account_never_the_shells(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ACCOUNT_ID spares each cold start an sts:GetCallerIdentity call (common/aws/sts.py); the value is the
    account the deploy runs in, whatever a shell exported under that common name."""
    from deploy.functions import FUNCTIONS
    from deploy.lambdas import environment
    from deploy.preflight import load_config

    topic = "arn:aws:sns:us-east-1:123456789012:{}"
    monkeypatch.setattr("deploy.lambdas.topic_arn", lambda cfg, name: topic.format(name))
    source = {
        "DOMAIN_NAME": "example.com",
        "PUBLIC_EMAIL": "hello@example.com",
        "PRIVATE_EMAIL": "owner@example.net",
        "ACCOUNT_ID": "999999999999",
    }
    cfg = load_config(source, "prd", "us-east-1", "123456789012", need_secret=False)
    for spec in FUNCTIONS:
        assert environment(cfg, spec, source)["ACCOUNT_ID"] == "123456789012", spec.name
