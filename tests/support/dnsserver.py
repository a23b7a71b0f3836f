"""A nameserver on loopback for tests that must not need the network: it answers A queries for the names
it holds, NXDOMAIN for the others, or SERVFAIL for everything (``failing``: a resolver that cannot answer).
Built with dnspython's own message handling; a daemon thread, closed by :meth:`close`."""

from __future__ import annotations

import socket
import threading
from typing import Any


class LoopbackDns:
    def __init__(self, addresses: dict[str, str] | None = None, failing: bool = False) -> None:
        self.addresses = {k.rstrip(".").lower(): v for k, v in (addresses or {}).items()}
        self.failing = failing
        self.queries: list[str] = []
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        import dns.message
        import dns.rcode
        import dns.rrset

        while not self._stop.is_set():
            try:
                wire, peer = self.sock.recvfrom(4096)
            except (TimeoutError, OSError):
                continue
            query = dns.message.from_wire(wire)
            answer = dns.message.make_response(query)
            question = query.question[0]
            name = question.name.to_text().rstrip(".").lower()
            self.queries.append(name)
            if self.failing:
                answer.set_rcode(dns.rcode.SERVFAIL)
            elif name in self.addresses:
                answer.answer.append(dns.rrset.from_text(question.name, 60, "IN", "A", self.addresses[name]))
            else:
                answer.set_rcode(dns.rcode.NXDOMAIN)
            self.sock.sendto(answer.to_wire(), peer)

    def resolver(self) -> Any:
        """A dnspython Resolver that asks only this server."""
        import dns.resolver

        resolver = dns.resolver.Resolver(configure=False)
        resolver.nameservers = ["127.0.0.1"]
        resolver.port = self.port
        return resolver

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        self.sock.close()

    def __enter__(self) -> LoopbackDns:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
