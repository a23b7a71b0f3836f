"""`email-handler deploy --export cloudformation DIR` as a user runs it, with no AWS at all: the
template passes cfn-lint (its bundled specifications, no network) in every Region the deploy accepts,
nothing secret is written, and the README's steps name commands that exist. That the template makes
what the deploy makes is tests/integration/test_cloudformation_export.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cfnlint.api import ManualArgs, lint

from deploy.regions import RECEIVING_REGIONS
from local.env import local_env
from ops.main import COMMANDS, main
from tests.support.ownerkeys import pgp_owner

SECRET = "f" * 64


def _environment(monkeypatch: pytest.MonkeyPatch, values: dict[str, str]) -> None:
    """The deploy's variables and nothing of AWS: no endpoint, no credentials."""
    names = (
        *("AWS_ENDPOINT_URL", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"),
        *("AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION", "ENVIRONMENT"),
    )
    for name in names:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    for name, value in values.items():
        if name not in names:
            monkeypatch.setenv(name, value)


def _configurations(tmp_path: Path) -> dict[str, dict[str, str]]:
    key = tmp_path / "owner.asc"
    key.write_text(pgp_owner().armored)
    defaults = {k: v for k, v in local_env().items() if k != "ENVIRONMENT"}
    return {
        # several addresses, one with its own settings, and a catch-all
        "catch-all": {**defaults, "THREAD_SECRET": SECRET},
        # one address, the owner's key, a retention of 0 (no lifecycle rule for the archive)
        "one-address": {
            **{k: v for k, v in defaults.items() if k != "PUBLIC_ADDRESSES"},
            "PUBLIC_EMAIL": "hello@example.com",
            "OWNER_PGP_KEY": str(key),
            "RETENTION_ARCHIVE_DAYS": "0",
            "THREAD_SECRET": SECRET,
        },
    }


@pytest.mark.parametrize("configuration", ["catch-all", "one-address"])
def test_the_exported_template_passes_cfn_lint_in_every_region_the_deploy_accepts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, configuration: str
) -> None:
    """Errors, warnings and informational findings alike fail: the template is generated, so a finding
    is a defect of the generator, not a choice of a template's author (a redundant DependsOn, a
    hard-coded partition and stateful resources without a deletion policy were all fixed)."""
    _environment(monkeypatch, _configurations(tmp_path)[configuration])
    out = tmp_path / "out"
    assert main(["deploy", "--region", "eu-west-1", "--export", "cloudformation", str(out)]) == 0
    text = (out / "template.json").read_text()
    findings = lint(text, config=ManualArgs(regions=sorted(RECEIVING_REGIONS), include_checks=["I"]))
    assert [str(f) for f in findings] == []
    template = json.loads(text)
    assert len(template["Resources"]) > 80
    images = [p for p in template["Parameters"] if p.endswith("ImageUri")]
    assert len(images) == 6 and all("Default" not in template["Parameters"][p] for p in images)
    assert template["Parameters"]["DomainName"]["Default"] == "example.com"
    assert (
        template["Parameters"]["ThreadSecretParameter"]["Default"]
        == "/service-email-handler/prd/thread-secret"
    )
    for written in out.iterdir():
        assert SECRET not in written.read_text(), written.name
    # The Region and the domain are the stack's and its parameters', never the exporting shell's.
    key = template["Resources"].pop("OwnerKeyParameter", None)  # the key's own text names its owner
    assert (key is not None) == (configuration == "one-address")
    resources = json.dumps(template["Resources"])
    assert "eu-west-1" not in resources and "example.com" not in resources and "owner@" not in resources


def test_the_readme_gives_a_command_for_each_step_a_template_cannot_take(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _environment(monkeypatch, _configurations(tmp_path)["catch-all"])
    assert (
        main(
            ["deploy", "--env", "stage", "--region", "us-east-1", "--export", "cloudformation", str(tmp_path)]
        )
        == 0
    )
    readme = (tmp_path / "README.md").read_text()
    for step in (
        "aws ssm put-parameter --region us-east-1 --type SecureString "
        "--name /service-email-handler/stage/thread-secret",
        "make images",
        "docker push",
        "aws ses set-active-receipt-rule-set --region us-east-1 --rule-set-name service-email-handler-stage",
        "email-handler ses request-production-access --env stage",
        "aws s3 cp spam-rules.txt s3://BUCKET/config/spam-rules.txt",
        "DkimRecord1",
        "MX    example.com  10 inbound-smtp.us-east-1.amazonaws.com",
        'resource "aws_cloudformation_stack"',
        "cfn_inc.CfnInclude(",
        "--capabilities CAPABILITY_NAMED_IAM",
    ):
        assert step in readme, step
    # every email-handler command the README gives exists
    named = {
        line.split("email-handler ", 1)[1].split("`")[0]
        for line in readme.splitlines()
        if "`email-handler " in line
    }
    for command in named:
        words = [w for w in command.split() if not w.startswith("-")]
        assert " ".join(words[:2]) in COMMANDS or words[0] in COMMANDS, command
    assert (tmp_path / "spam-rules.txt").read_text().strip()
    template = json.loads((tmp_path / "template.json").read_text())
    assert template["Parameters"]["Env"]["Default"] == "stage"


def test_an_unknown_format_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _environment(monkeypatch, _configurations(tmp_path)["catch-all"])
    assert main(["deploy", "--region", "us-east-1", "--export", "terraform", str(tmp_path / "x")]) == 2
    assert "cloudformation" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()
