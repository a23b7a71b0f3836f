"""What the deploy tests share: published images as the push would report them (the seam
`deploy(images=...)`, so these tests need no Docker; the push itself runs against a local registry in
tests/docker/test_deploy_push.py), a deploy run that keeps its report, and a deployer's identity."""

from __future__ import annotations

import json
from typing import Any

from common.aws import client, reset_clients
from deploy.functions import FUNCTIONS
from deploy.images import Published
from deploy.main import Options, deploy

ACCOUNT = "123456789012"


PREFIX = "service-email-handler-prd"


BUCKET = f"{PREFIX}-{ACCOUNT}-us-east-1-mail"  # bucket names are global: account and region in the default


def images(digest: str = "a", only: str = "") -> dict[str, Published]:
    """Published images as the push would report them; ``only`` gives one function another digest."""
    return {
        f.name: Published(
            f.name,
            f"{ACCOUNT}.dkr.ecr.us-east-1.amazonaws.com/{PREFIX}-{f.name}",
            f"c-{(digest if not only or f.name == only else 'a') * 12}",
            "sha256:" + (digest if not only or f.name == only else "a") * 64,
            "x86_64",
        )
        for f in FUNCTIONS
    }


def run(
    env: dict[str, str],
    published: dict[str, Published] | None = None,
    lines: list[str] | None = None,
    **options: Any,
) -> tuple[list[Any], list[str]]:
    lines = [] if lines is None else lines
    changes = deploy(Options(**options), env, report=lines.append, images=published or images())
    return changes, lines


def changed(changes: list[Any]) -> list[tuple[str, str, str]]:
    return [(c.kind, c.name, c.action) for c in changes if c.action != "unchanged"]


def printed_policies() -> list[dict[str, Any]]:
    """What `email-handler deploy --print-deployer-policy` prints on stdout: one policy document a line."""
    import contextlib
    import io

    from ops.main import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main(["deploy", "--print-deployer-policy"]) == 0
    return [json.loads(line) for line in out.getvalue().splitlines() if line.strip()]


def deployer_user(env: dict[str, str]) -> dict[str, str]:
    """An IAM user holding exactly `email-handler deploy --print-deployer-policy`'s policies, created and
    attached as it says (managed policies: an inline user policy is capped at 2,048 characters)."""
    from deploy.iam import deployer_policies, deployer_policy_names
    from deploy.preflight import load_config

    iam_api = client("iam")
    iam_api.create_user(UserName="deployer")
    cfg = load_config(env, "prd", "us-east-1", ACCOUNT)
    documents = printed_policies()
    assert documents == deployer_policies(cfg, ACCOUNT)  # the printed policy is the deployment's
    for name, document in zip(deployer_policy_names(cfg, len(documents)), documents, strict=True):
        arn = iam_api.create_policy(PolicyName=name, PolicyDocument=json.dumps(document))["Policy"]["Arn"]
        iam_api.attach_user_policy(UserName="deployer", PolicyArn=arn)
    key = iam_api.create_access_key(UserName="deployer")["AccessKey"]
    return {"AWS_ACCESS_KEY_ID": key["AccessKeyId"], "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"]}


def as_user(credentials: dict[str, str], call: Any) -> Any:
    import os

    saved = {k: os.environ.get(k) for k in credentials}
    os.environ.update(credentials)
    reset_clients()
    try:
        return call()
    finally:
        os.environ.update({k: v for k, v in saved.items() if v is not None})
        reset_clients()


class Throttled:
    """A raw body for botocore's AWSResponse."""

    def __init__(self, body: bytes) -> None:
        self.body = body

    def stream(self, **_: Any) -> Any:
        yield self.body
