import hashlib

import pytest

from common.mail.threads import conversation_id, slugify, thread_address, verify_thread_address

RELAYS = ("bounce.linkedin.com",)


@pytest.mark.parametrize(("address", "name", "expected"), [
    ("Anoop@SynchronyCorp.com", "Anoop Kumar", "anoop-at-synchronycorp.com"),  # docs/CONTRACT.md example
    ("jane@corp.example", "", "jane-at-corp.example"),
    ("s-2kfv@bounce.linkedin.com", "", "s-2kfv-at-bounce.linkedin.com"),  # relay without a name: ordinary
])
def test_ordinary_ids(address: str, name: str, expected: str) -> None:
    assert conversation_id(address, name, RELAYS) == expected


@pytest.mark.parametrize(("name", "slug"), [
    ("Jane Smith", "jane-smith"), ("José Müller-Lüdenscheidt", "jose-muller-ludenscheidt"),
    ("  Ærø   Ñandú!! ", "r-nandu"), ("李小龙", "contact"), ("---", "contact"), ("Zoë O'Brien", "zoe-o-brien"),
])
def test_opaque_relay_ids_use_slug_and_address_hash(name: str, slug: str) -> None:
    address = "S-2KFV@bounce.linkedin.com"
    digest = hashlib.sha256(address.lower().encode()).hexdigest()[:6]
    assert conversation_id(address, name, RELAYS) == f"{slug}-linkedin-{digest}"


def test_slugify_folds_and_collapses() -> None:
    assert slugify("Élodie  --  D'Arc") == "elodie-d-arc"


def test_relay_list_is_configuration() -> None:
    assert conversation_id("x@relay.example", "Jane", ("relay.example",)).startswith("jane-linkedin-")
    assert conversation_id("x@relay.example", "Jane", RELAYS) == "x-at-relay.example"


def test_thread_address_round_trip_and_tampering() -> None:
    address = thread_address("jane-at-corp.example", "s" * 32, "thread.example.com")
    assert verify_thread_address(address, "s" * 32, "thread.example.com") == "jane-at-corp.example"
    assert verify_thread_address(address.upper(), "s" * 32, "thread.example.com") == "jane-at-corp.example"
    assert verify_thread_address(address, "t" * 32, "thread.example.com") is None
    assert verify_thread_address(address.replace("jane", "mall"), "s" * 32, "thread.example.com") is None
    assert verify_thread_address(address.replace("thread.example.com", "thread.evil.com"), "s" * 32, "thread.example.com") is None
    assert verify_thread_address("no-tag@thread.example.com", "s" * 32, "thread.example.com") is None
