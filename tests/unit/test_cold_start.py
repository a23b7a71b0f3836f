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


def test_a_lambda_cold_start_runs_without_the_cyclic_collector_until_the_first_invocation_returns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The collector walked what the cold start made again and again (30-50 ms of an ack-sender's cold
    start). It resumes after the first invocation with that in the oldest generation, so its first
    pass is short, and nothing is kept for good: the first invocation's garbage is still collected."""
    import gc
    import weakref

    from common.aws import sts
    from common.runtime import coldstart
    from common.runtime import handler as handler_mod
    from common.runtime.config import SenderConfig
    from local.env import local_env

    class Node:
        pass

    seen: list[bool] = []
    garbage: list[weakref.ref[Node]] = []

    def logic(cfg: SenderConfig, event: object, context: object) -> dict[str, str]:
        seen.append(gc.isenabled())
        cycle = Node()
        cycle.self = cycle  # type: ignore[attr-defined]  # unreachable once this returns, but for the collector
        garbage.append(weakref.ref(cycle))
        return {"status": "ok"}

    for name, value in local_env().items():  # what the function's class reads at cold start
        monkeypatch.setenv(name, value)
    try:
        monkeypatch.setenv("AWS_LAMBDA_RUNTIME_API", "127.0.0.1:9001")
        fn = handler_mod.make_handler("ack-sender", logic)
        assert not gc.isenabled()
        other = handler_mod.make_handler("reply-sender", logic)  # a second handler in the same process
        assert not gc.isenabled()
        other({}, None)  # the first invocation, whichever handler serves it, resumes the collector
        assert seen == [False] and gc.isenabled()
        seen.clear()
        garbage.clear()
        gc.disable()
        coldstart._PAUSED.append(True)  # as if paused again: the same process's first invocation
        fn({}, None)
        assert seen == [False] and gc.isenabled()
        assert gc.get_count()[0] < 100  # the young generation starts empty: its first pass walks nothing old
        assert gc.get_freeze_count() == 0
        assert garbage[0]() is not None
        gc.collect()
        assert garbage[0]() is None
        fn({}, None)
        assert seen == [False, True]
        # Outside a Lambda runtime (tests, the host tools) the collector is never touched.
        monkeypatch.delenv("AWS_LAMBDA_RUNTIME_API")
        handler_mod.make_handler("ack-sender", logic)({}, None)
        assert seen[-1] is True
    finally:
        coldstart._PAUSED.clear()
        gc.enable()
        sts.use_account("")
