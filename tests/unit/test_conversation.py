import hashlib
import re

import pytest

from common.mail.threads import (
    MAX_ID,
    UnsafeIdError,
    conversation_id,
    is_safe_id,
    opaque_message_id,
    opaque_thread_address,
    readable_id,
    slugify,
    thread_address,
    verify_thread_address,
)

RELAYS = ("bounce.linkedin.com",)


@pytest.mark.parametrize(
    ("address", "name", "expected"),
    [
        ("Anoop@SynchronyCorp.com", "Anoop Kumar", "anoop-at-synchronycorp.com"),  # docs/CONTRACT.md example
        ("jane@corp.example", "", "jane-at-corp.example"),
        ("s-2kfv@bounce.linkedin.com", "", "s-2kfv-at-bounce.linkedin.com"),  # relay without a name: ordinary
    ],
)
def test_ordinary_ids(address: str, name: str, expected: str) -> None:
    assert conversation_id(address, name, RELAYS) == expected


@pytest.mark.parametrize(
    ("name", "slug"),
    [
        ("Jane Smith", "jane-smith"),
        ("José Müller-Lüdenscheidt", "jose-muller-ludenscheidt"),
        ("  Ærø   Ñandú!! ", "r-nandu"),
        ("李小龙", "contact"),
        ("---", "contact"),
        ("Zoë O'Brien", "zoe-o-brien"),
    ],
)
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
    assert (
        verify_thread_address(
            address.replace("thread.example.com", "thread.evil.com"), "s" * 32, "thread.example.com"
        )
        is None
    )
    assert verify_thread_address("no-tag@thread.example.com", "s" * 32, "thread.example.com") is None


# --- ids are safe, bounded and injective --------------------------------------------------

UNUSUAL = [
    "x@cat-at-work.example",
    "x-at-cat@work.example",
    "a/b@x.example",
    "a_b@x.example",
    "jdöe@mächine.example",
    '"big bug bb"@bug.example',
    "a" * 3000 + "@x.example",
    "o'brien+jobs@corp.example",
    "-x@y.example",
    "x@localhost",
    "firstname.lastname.department@subsidiary.company.example.com",
    "UPPER@Case.Example",
    "a-at-b-at-c@d.example",
    "a@b-at-c.example",
    "..@x.example",
    "jane@corp.example",
    "jane@corp.example.",
    "anoop-at-synchronycorp.com@x.example",
]


@pytest.mark.parametrize("address", UNUSUAL)
def test_ids_are_safe_and_thread_addresses_fit_64(address: str) -> None:
    cid = conversation_id(address, "", RELAYS)
    assert is_safe_id(cid) and len(cid) <= MAX_ID
    local = thread_address(cid, "s" * 32, "thread.example.com").split("@")[0]
    assert (
        len(local) <= 64
        and verify_thread_address(f"{local}@thread.example.com", "s" * 32, "thread.example.com") == cid
    )


def test_ids_are_injective() -> None:
    ids = {conversation_id(a, "", RELAYS): a.lower() for a in UNUSUAL}
    assert len(ids) == len({a.lower() for a in UNUSUAL})  # no two distinct addresses share an id
    assert conversation_id("x@cat-at-work.example", "", RELAYS) != conversation_id(
        "x-at-cat@work.example", "", RELAYS
    )


def test_readable_form_only_when_unambiguous() -> None:
    assert conversation_id("jane.doe@corp.example", "", RELAYS) == "jane.doe-at-corp.example"
    assert readable_id("x@cat-at-work.example") is None and readable_id("a/b@x.example") is None
    hashed = conversation_id("a/b@x.example", "", RELAYS)
    assert re.fullmatch(r"a-b-at-x-example-[0-9a-f]{12}", hashed) and "." not in hashed


def test_long_relay_names_are_cut_to_fit() -> None:
    cid = conversation_id("s-2kfv@bounce.linkedin.com", "A very long display name " * 5, RELAYS)
    assert len(cid) <= MAX_ID and re.fullmatch(r"[a-z-]+-linkedin-[0-9a-f]{6}", cid)


# --- opaque thread addresses (hide_correspondent) ------------------------------------------


@pytest.mark.parametrize("address", UNUSUAL)
def test_an_opaque_thread_address_opens_to_its_conversation_and_shows_nothing_of_it(address: str) -> None:
    cid = conversation_id(address, "Jane Smith", RELAYS)
    opaque = opaque_thread_address(cid, "s" * 32, "thread.example.com")
    local, _, domain = opaque.partition("@")
    assert domain == "thread.example.com" and len(local) == 64 and "." not in local
    assert re.fullmatch(r"[a-z2-7]{64}", local)
    # nothing of the id (and so of the address) outside: no 6 characters of it are in it
    assert not any(cid[i : i + 6] in local for i in range(len(cid) - 5))
    assert verify_thread_address(opaque, "s" * 32, "thread.example.com") == cid
    assert verify_thread_address(opaque.upper(), "s" * 32, "thread.example.com") == cid  # any case
    assert opaque_thread_address(cid, "s" * 32, "thread.example.com") == opaque  # one per conversation


def test_opaque_addresses_differ_per_conversation_and_a_forged_one_is_refused() -> None:
    secret, domain = "s" * 32, "thread.example.com"
    cids = [conversation_id(a, "", RELAYS) for a in UNUSUAL]
    opaque = [opaque_thread_address(c, secret, domain) for c in cids]
    assert len(set(opaque)) == len(set(cids))
    one = opaque[0]
    local = one.partition("@")[0]
    assert verify_thread_address(one, "t" * 32, domain) is None  # another deployment's secret
    assert verify_thread_address(one.replace(domain, "thread.evil.com"), secret, domain) is None
    for i in range(64):  # every single changed character fails the tag
        swapped = "b" if local[i] == "a" else "a"
        assert verify_thread_address(f"{local[:i]}{swapped}{local[i + 1 :]}@{domain}", secret, domain) is None
    assert verify_thread_address(f"{local[:-1]}@{domain}", secret, domain) is None  # 63 characters
    assert verify_thread_address(f"{'a' * 64}@{domain}", secret, domain) is None
    assert verify_thread_address(f"{local[:-1]}1@{domain}", secret, domain) is None  # not base32
    # a readable address of the same conversation still opens; neither form is read as the other
    readable = thread_address(cids[0], secret, domain)
    assert verify_thread_address(readable, secret, domain) == cids[0] and readable != one


def test_an_unsafe_id_gets_no_opaque_address_and_a_message_id_digest_is_keyed_and_stable() -> None:
    with pytest.raises(UnsafeIdError):
        opaque_thread_address("Jane@corp", "s" * 32, "thread.example.com")
    digest = opaque_message_id("<first-contact-1@corp.example>", "s" * 32, "thread.example.com")
    assert re.fullmatch(r"<[0-9a-f]{32}@thread\.example\.com>", digest)
    assert digest == opaque_message_id("<first-contact-1@corp.example>", "s" * 32, "thread.example.com")
    assert digest != opaque_message_id("<first-contact-1@corp.example>", "t" * 32, "thread.example.com")
    assert digest != opaque_message_id("<first-contact-2@corp.example>", "s" * 32, "thread.example.com")
