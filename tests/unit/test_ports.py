import os
import socket
from pathlib import Path

import pytest

from local.rie import _ephemeral_floor, free_port


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
    from local import rie

    monkeypatch.setattr(rie, "_ephemeral_floor", lambda: 1024)
    assert 20000 <= rie.free_port(6) < 65000


def test_waiting_for_a_published_port_means_waiting_for_an_http_answer() -> None:
    """docker-proxy accepts a connection on a published port before the RIE inside listens, then resets it
    (curl's exit 56 in CI). A listener that resets its first three connections, as the proxy does, and then
    answers 404 is only ready after the fourth: an open port is not enough."""
    import threading

    from local.rie import wait_for_http

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    port = server.getsockname()[1]
    seen: list[int] = []

    def serve() -> None:
        for n in range(4):
            conn, _ = server.accept()
            seen.append(n)
            if n < 3:
                conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                conn.close()  # an RST, as the proxy sends
                continue
            conn.recv(4096)
            conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        wait_for_http(f"http://127.0.0.1:{port}/", timeout=10)
        assert seen == [0, 1, 2, 3]
    finally:
        thread.join(5)
        server.close()


def test_waiting_for_http_gives_up_with_the_last_error() -> None:
    from local.rie import wait_for_http

    port = free_port()
    with pytest.raises(TimeoutError, match="no HTTP answer"):
        wait_for_http(f"http://127.0.0.1:{port}/", timeout=0.3)


def test_a_port_handed_out_is_not_handed_out_again_by_any_process_until_its_claim_expires(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Seen in CI: a compose stack chose its ports, checked its images, and meanwhile another pytest
    worker's container bound one of them. Choosers share claims, so the same random pick is refused."""
    from local import rie

    monkeypatch.setattr(rie, "CLAIMS", tmp_path / "claims")
    picks = iter([21000, 21000, 21003, 21000])
    monkeypatch.setattr(rie.random, "randrange", lambda low, top: next(picks))
    assert rie.free_port(2) == 21000
    assert rie.free_port(2) == 21003  # 21000 is free to bind, but claimed
    os.utime(tmp_path / "claims" / "21000", (0, 0))
    os.utime(tmp_path / "claims" / "21001", (0, 0))
    assert rie.free_port(2) == 21000  # claims older than CLAIM_S are taken over


def test_a_refused_range_gives_back_what_it_had_claimed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from local import rie

    monkeypatch.setattr(rie, "CLAIMS", tmp_path / "claims")
    picks = iter([21001, 21000, 21010])
    monkeypatch.setattr(rie.random, "randrange", lambda low, top: next(picks))
    assert rie.free_port(1) == 21001
    assert rie.free_port(2) == 21010  # 21000 was claimed and then given back when 21001 was refused
    assert not (tmp_path / "claims" / "21000").exists()
