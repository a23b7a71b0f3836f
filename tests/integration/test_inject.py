"""`email-handler inject` (docs/local.md): the envelope sender it derives, and what it reports, with the
CLI in its own process, the local wiring and inbound-handler under the host RIE against moto."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from local import provision
from local.rie import RieProcess
from local.wiring import Endpoint, Wiring, invocation_route
from tests.conftest import IAM_ENFORCED, REPO
from tests.support import mailgen as g
from tests.support.harness import Stack


@pytest.fixture
def wired(stack: Stack, rie_function: Callable[..., RieProcess]) -> Iterator[Callable[..., Wiring]]:
    """The wiring's asynchronous-invocation source in this process, delivering to ``start(env)``'s RIE."""
    provision.provision(stack.cfg, wiring=True)
    running: list[Wiring] = []

    def start(**env: str) -> Wiring:
        fn = rie_function("inbound-handler", env=env)
        wiring = Wiring(stack.cfg, {"inbound-handler": Endpoint("inbound-handler", fn.url)}, visibility_s=1)
        wiring.sources = [s for s in wiring.sources if s.route is invocation_route]
        running.append(wiring.start())
        return wiring

    yield start
    for wiring in running:
        wiring.stop()


def inject(
    stack: Stack, tmp_path: Path, raw: bytes, *extra: str, timeout: float = 60
) -> tuple[int, dict, str, float]:
    path = tmp_path / "mail.eml"
    path.write_bytes(raw)
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ops.main",
            "inject",
            str(path),
            "--endpoint",
            stack.url,
            "--timeout",
            str(timeout),
            *extra,
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout + 30,
    )
    elapsed = time.monotonic() - started
    return done.returncode, json.loads(done.stdout) if done.stdout.strip() else {}, done.stderr, elapsed


@pytest.mark.parametrize(
    ("raw", "cid"),
    [
        (
            g.from_field("a@x.example <b@y.example>"),
            "b-at-y.example",
        ),  # the angle-addr, not the first address seen
        (g.from_field("Big Bug bb@bug.example"), "bb-at-bug.example"),  # bare words before the address
        (
            g.raw([("Return-Path", "<bounces+x@list.example>"), *g.basic()]),
            "jane-at-corp.example",
        ),  # Return-Path wins
    ],
)
def test_envelope_from_return_path_or_the_from_address(
    stack: Stack, wired: Callable[..., Wiring], tmp_path: Path, raw: bytes, cid: str
) -> None:
    wired()
    code, result, err, _ = inject(stack, tmp_path, raw)
    assert code == 0, err
    assert (result["outcome"], result["conversationId"]) == ("forwarded", cid), (
        result
    )  # not archived as a bounce


def test_null_return_path_is_a_bounce(stack: Stack, wired: Callable[..., Wiring], tmp_path: Path) -> None:
    wired()
    code, result, err, _ = inject(stack, tmp_path, g.raw([("Return-Path", "<>"), *g.basic()]))
    assert code == 0 and result["outcome"] == "delivery status notification", (result, err)


def test_no_usable_sender_needs_from(stack: Stack, wired: Callable[..., Wiring], tmp_path: Path) -> None:
    wired()
    code, result, err, _ = inject(stack, tmp_path, g.from_field("undisclosed-recipients:;"))
    assert code == 2 and result == {} and "--from" in err
    assert stack.s3_keys("staging/") == []  # nothing was delivered
    code, result, err, _ = inject(
        stack, tmp_path, g.from_field("undisclosed-recipients:;"), "--from", "x@corp.example"
    )
    assert (
        code == 0
        and result["outcome"] == "quarantined"
        and result["reason"] == "From header has no usable address"
    )


def test_a_failing_handler_is_reported_at_once(
    stack: Stack, wired: Callable[..., Wiring], tmp_path: Path
) -> None:
    wired(EMAIL_BUCKET="no-such-bucket")  # every invocation fails: the staged mail cannot be read
    code, result, err, elapsed = inject(stack, tmp_path, g.from_field("Jane <jane@corp.example>"), timeout=60)
    assert code == 1, (result, err)
    assert result["outcome"] == "handler failed" and result["attempt"] in ("1 of 3", "2 of 3", "3 of 3"), (
        result
    )
    # The role may only read its own bucket: IAM refuses another one before S3 looks for it (as on AWS).
    reported = result["errorType"] + result["errorMessage"]
    assert ("AccessDenied" if IAM_ENFORCED else "NoSuchBucket") in reported, reported
    assert "Lambda retries it" in result["hint"] or "dead-letter queue" in result["hint"]
    assert elapsed < 20  # reported when the first attempt failed, not after the 60 s timeout
    assert "is the wiring running" not in json.dumps(result)


def test_no_wiring_says_so(stack: Stack, tmp_path: Path) -> None:
    provision.provision(stack.cfg, wiring=True)
    code, result, _, _ = inject(stack, tmp_path, g.from_field("Jane <jane@corp.example>"), timeout=2)
    assert code == 1 and result["outcome"] == "not handled yet" and "is the wiring running" in result["hint"]
