"""The public address table (common/runtime/addresses.py): configuration, resolution, validation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from common.errors import ConfigError
from common.runtime import addresses
from deploy import config

BASE = {"DOMAIN_NAME": "example.com", "PRIVATE_EMAIL": "owner@example.net"}
SEVERAL = {
    **BASE,
    "PUBLIC_EMAIL": "hello@example.com, Jobs@example.com, *@example.com",
    "PUBLIC_ADDRESSES": json.dumps(
        {"jobs@example.com": {"label": "Jobs", "ack_subject": "Thanks for applying"}}
    ),
}


def test_one_address_is_the_configuration_of_before() -> None:
    cfg = config.load({**BASE, "PUBLIC_EMAIL": "Hello@example.com"})
    table = addresses.of(cfg)
    assert cfg.public_email == "Hello@example.com" and not table.several and table.catch_all is None
    assert table.resolve("hello@example.com") == table.primary and table.primary.ack
    assert table.resolve("other@example.com") is None
    assert table.primary.ack_subject == cfg.ack_subject and table.primary.label == "Hello@example.com"
    # written from as spelt: IAM's ses:FromAddress condition (StringEquals) compares it exactly
    assert table.sending_from("hello@EXAMPLE.com") == "Hello@example.com" == addresses.sending(cfg, "")


def test_several_addresses_their_settings_and_the_catch_all() -> None:
    cfg = config.load(SEVERAL)
    table = addresses.of(cfg)
    assert cfg.public_email == "hello@example.com" and table.several
    assert cfg.public_emails == ("hello@example.com", "Jobs@example.com", "*@example.com")
    jobs = table.resolve("<JOBS@example.com>")
    assert jobs is not None and (jobs.label, jobs.ack_subject, jobs.ack) == (
        "Jobs",
        "Thanks for applying",
        True,
    )
    shop = table.resolve("Shop-X@example.com")
    assert shop is not None and shop.catch_all and shop.address == "shop-x@example.com"
    assert (shop.ack, shop.label, shop.described) == (
        False,
        "to: unknown address",
        "shop-x@example.com (to: unknown address)",
    )
    # the catch-all is the domain, not its subdomains, and never an address nobody could write from
    for outside in ("x@thread.example.com", "x@example.org", '"a b"@example.com', "ünï@example.com"):
        assert table.resolve(outside) is None
    assert table.written_to(["x@example.org", "jobs@example.com", "hello@example.com"]) == jobs
    assert cfg.is_own("jobs+x@example.com") and "jobs@example.com" in cfg.own_addresses


def test_a_removed_address_is_answered_from_the_default() -> None:
    table = addresses.of(config.load({**BASE, "PUBLIC_EMAIL": "hello@example.com,jobs@example.com"}))
    assert table.sending_from("jobs@example.com") == "jobs@example.com"
    assert table.sending_from("press@example.com") == "hello@example.com"  # no longer served
    assert table.sending_from("") == "hello@example.com"  # a record from before: no publicAddress


def test_the_sender_refuses_an_address_it_does_not_serve() -> None:
    from common.errors import EventError

    cfg = config.load(SEVERAL)
    assert addresses.sending(cfg, "") == "hello@example.com"
    assert addresses.sending(cfg, "shop-x@example.com") == "shop-x@example.com"
    for other in ("ceo@other.example", "x@thread.example.com"):
        with pytest.raises(EventError, match="not a public address"):
            addresses.sending(cfg, other)


def test_a_file_describes_the_addresses(tmp_path: Path) -> None:
    path = tmp_path / "addresses.json"
    path.write_text(
        json.dumps({"hello@example.com": {}, "press@example.com": {"ack": False, "keywords": False}})
    )
    cfg = config.load({**BASE, "PUBLIC_ADDRESSES": str(path)})
    assert cfg.public_email == "hello@example.com" and cfg.public_addresses.startswith("{")  # inlined
    press = addresses.of(cfg).resolve("press@example.com")
    assert press is not None and not press.ack and not press.keywords
    assert addresses.environment(cfg)["PUBLIC_EMAIL"] == "hello@example.com,press@example.com"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"PUBLIC_EMAIL": "hello@example.com,jobs@other.org"}, "not an address at DOMAIN_NAME"),
        ({"PUBLIC_EMAIL": "hello@example.com,shop-*@example.com"}, "the only wildcard is the catch-all"),
        ({"PUBLIC_EMAIL": "*@example.com"}, "besides the catch-all"),
        ({"PUBLIC_EMAIL": "hello@example.com", "PUBLIC_ADDRESSES": "{not json"}, "not JSON"),
        (
            {"PUBLIC_EMAIL": "hello@example.com", "PUBLIC_ADDRESSES": '{"hello@example.com":{"ak":true}}'},
            "unknown setting",
        ),
        (
            {"PUBLIC_EMAIL": "hello@example.com", "PUBLIC_ADDRESSES": '{"hello@example.com":{"ack":"no"}}'},
            "ack must be bool",
        ),
        (
            {"PUBLIC_EMAIL": "hello@example.com", "PUBLIC_ADDRESSES": "/nonexistent/addresses.json"},
            "PUBLIC_ADDRESSES=",
        ),
        (
            {
                "PUBLIC_EMAIL": "hello@example.com",
                "PUBLIC_ADDRESSES": json.dumps({"hello@example.com": {"ack_template": "x" * 3000}}),
            },
            "at most 2048",
        ),
    ],
)
def test_bad_address_configuration_is_refused_with_the_reason(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config.load({**BASE, **env})


def test_from_command_reads_the_owners_choice() -> None:
    assert (
        addresses.from_command("[to: a@b.example]\r\n[ From : <jobs@example.com> ]\r\nHi")
        == "jobs@example.com"
    )
    assert addresses.from_command("Hi\n> [from: jobs@example.com]\n") == ""  # a quoted line is not a command


def test_an_entry_for_one_public_address() -> None:
    from common.store import senderlists

    assert (
        senderlists.normalise("@Corp.example  TO  <Jobs@Example.com>") == "@corp.example to jobs@example.com"
    )
    with pytest.raises(ValueError, match="not a public address"):
        senderlists.normalise("jane@corp.example to @example.com")
    # scoped before the same global entry, the address before its domains
    assert senderlists.candidates("jane@corp.example", "jobs@example.com") == [
        "jane@corp.example to jobs@example.com",
        "jane@corp.example",
        "@corp.example to jobs@example.com",
        "@corp.example",
    ]
    cfg = config.load(SEVERAL)
    assert senderlists.protected(cfg, "@corp.example to shop@example.com") == ""  # the catch-all serves it
    assert "not one of this system's public addresses" in senderlists.protected(
        cfg, "@corp.example to x@y.example"
    )
    assert "covers the owner's address" in senderlists.protected(cfg, "jobs@example.com to hello@example.com")


@pytest.mark.parametrize(
    ("public", "condition"),
    [
        ("Hello@Example.com", {"StringEquals": {"ses:FromAddress": "Hello@Example.com"}}),  # as before
        (
            "hello@example.com,jobs@example.com",
            {"StringEquals": {"ses:FromAddress": ["hello@example.com", "jobs@example.com"]}},
        ),
        ("hello@example.com,*@example.com", {"StringLike": {"ses:FromAddress": "*@example.com"}}),
        # StringLike compares case-sensitively: an address spelt with capitals is named as well
        (
            "Hello@Example.com,*@example.com",
            {"StringLike": {"ses:FromAddress": ["*@example.com", "Hello@Example.com"]}},
        ),
    ],
)
def test_the_senders_may_send_from_every_public_address(public: str, condition: dict[str, object]) -> None:
    from deploy.iam import from_addresses

    assert from_addresses(config.load({**BASE, "PUBLIC_EMAIL": public})) == condition


def test_the_local_defaults_serve_two_addresses_and_a_catch_all() -> None:
    """`email-handler dev` and `make up` (compose/local.env): hello@ (ack), jobs@ (ack, its subject), *@."""
    from local.env import local_env
    from local.ingress import route

    cfg = config.load(local_env())
    table = addresses.of(cfg)
    hello, jobs = table.listed
    assert (hello.address, hello.ack, hello.ack_subject) == ("hello@example.com", True, cfg.ack_subject)
    assert (jobs.address, jobs.ack) == ("jobs@example.com", True) and jobs.ack_subject != cfg.ack_subject
    assert table.catch_all is not None and not table.catch_all.ack
    # the SMTP ingress takes what SES's rules would: every address at the domain, the thread domain
    assert route(cfg, "anyone@example.com") == "inbound-handler" == route(cfg, "jobs@example.com")
    assert route(cfg, "x.tag@thread.example.com") == "reply-handler" and route(cfg, "a@example.org") is None
