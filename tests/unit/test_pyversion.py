"""``email-handler dev`` names its Python and refuses one that reads mail differently from the images."""

from __future__ import annotations

import platform

import pytest

from local import pyversion
from ops import main as cli


def test_this_python_reads_mail_as_the_images_do() -> None:
    # The host's 3.13.0 (and any 3.12.6+) must not be refused: HTML is read by our own tokenizer.
    assert pyversion.differences() == []
    assert platform.python_version() in pyversion.describe()


def test_a_python_without_strict_address_parsing_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    def old_getaddresses(
        fieldvalues: list[str],
    ) -> list[tuple[str, str]]:  # the signature of Python 3.12.0 to 3.12.5
        return []

    monkeypatch.setattr(pyversion, "getaddresses", old_getaddresses)
    assert ["CVE-2023-27043" in p for p in pyversion.differences()] == [True]


def test_dev_refuses_it_naming_the_version_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(pyversion, "differences", lambda: ["reads mail differently"])
    assert cli.main(["dev"]) == 2
    out, err = capsys.readouterr()
    assert f"Python {platform.python_version()}" in out
    assert (
        "reads mail differently" in err
        and "install Python 3.13 (the images run Debian trixie's python3.13" in err
    )
