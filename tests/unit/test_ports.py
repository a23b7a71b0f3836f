import socket

import pytest

from common.local.rie import _ephemeral_floor, free_port


def test_free_ports_are_outside_the_ephemeral_range_and_bindable() -> None:
    """A port from bind(0) is ephemeral: an outgoing connection can take it before the server binds it (an RIE
    died on it in CI). Chosen ports sit below the kernel's ephemeral range, consecutive and free."""
    for count in (1, 6):
        base = free_port(count)
        assert base >= 20000 and base + count <= min(_ephemeral_floor(), 32768)
        socks = [socket.socket() for _ in range(count)]
        try:
            for s, port in zip(socks, range(base, base + count), strict=True):
                s.bind(("127.0.0.1", port))
        finally:
            for s in socks:
                s.close()


def test_a_low_ephemeral_range_still_gives_ports(monkeypatch: pytest.MonkeyPatch) -> None:
    from common.local import rie

    monkeypatch.setattr(rie, "_ephemeral_floor", lambda: 1024)
    assert 20000 <= rie.free_port(6) < 65000
