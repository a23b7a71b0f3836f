"""Relay byte streams from one listening address to another: ``python relay.py LISTEN TARGET [READY]``.

An address is ``tcp:HOST:PORT`` or ``unix:PATH``. test_push_containerd.py runs its second Docker daemon
in a network namespace of its own, where the host's loopback registry cannot be reached; a path-named
unix socket can, since it lives on the shared filesystem. So one relay on the host listens on a unix
socket and connects to the registry, and one in the daemon's namespace listens on the registry's
address and connects to that socket. READY, if given, is a file created once the listener is bound.
Run as a script (standard library only), so it starts fast in the namespace.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]


def _parse(address: str) -> tuple[str, str, int]:
    kind, _, rest = address.partition(":")
    if kind == "unix" and rest:
        return kind, rest, 0
    host, _, port = rest.rpartition(":")
    if kind == "tcp" and host and port.isdigit():
        return kind, host, int(port)
    raise SystemExit(f"relay: not tcp:HOST:PORT or unix:PATH: {address!r}")


async def _connect(target: tuple[str, str, int]) -> Streams:
    kind, where, port = target
    if kind == "unix":
        return await asyncio.open_unix_connection(where)
    return await asyncio.open_connection(where, port)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(1 << 16):
            writer.write(data)
            await writer.drain()
        # Pass the end of one direction on and keep the other open: a client may half-close.
        if writer.can_write_eof():
            writer.write_eof()
    except OSError:
        writer.close()


async def _main(listen: str, target: str, ready: str | None) -> None:
    destination = _parse(target)

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await _connect(destination)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer))
        upstream_writer.close()
        writer.close()

    kind, where, port = _parse(listen)
    if kind == "unix":
        server = await asyncio.start_unix_server(serve, where)
    else:
        server = await asyncio.start_server(serve, where, port)
    if ready:
        Path(ready).touch()
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    if len(sys.argv) not in (3, 4):
        raise SystemExit("usage: relay.py LISTEN TARGET [READY]")
    asyncio.run(_main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) == 4 else None))
