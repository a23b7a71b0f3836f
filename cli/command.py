"""The console script's command framework, shared by every host package (local, ops): a
:class:`Command` is its help, its arguments (declared right above the function by :func:`command`) and
the function that runs it; ops/main.py lists every command in one table and builds the parser.
Commands that run until stopped share :func:`run_until_signalled`; commands that talk to the emulator
share :data:`ENDPOINT` and :func:`endpoint`.
"""

from __future__ import annotations

import argparse
import os
import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# The local modes' AWS emulator (CONTRACT.md "Command line"): the endpoint every host command defaults to.
EMULATOR_PORT = 4566
DEFAULT_ENDPOINT = f"http://127.0.0.1:{EMULATOR_PORT}"
Run = Callable[[argparse.Namespace], int]


@dataclass(frozen=True, slots=True)
class Arg:
    flags: tuple[str, ...]
    options: dict[str, Any]


def arg(*flags: str, **options: Any) -> Arg:
    return Arg(flags, options)


@dataclass(frozen=True, slots=True)
class Command:
    """One command of the console script: its help, its arguments and the function that runs it."""

    help: str
    args: tuple[Arg, ...]
    run: Run

    def __call__(self, args: argparse.Namespace) -> int:
        return self.run(args)


def command(help: str, *args: Arg) -> Callable[[Run], Command]:
    """Make the decorated function a :class:`Command` with ``help`` and ``args``; the console script's
    table (ops/main.py) gives it its name."""

    def make(run: Run) -> Command:
        return Command(help, args, run)

    return make


ENDPOINT = arg("--endpoint", help=f"AWS emulator URL (default: $AWS_ENDPOINT_URL or {DEFAULT_ENDPOINT})")


def run_until_signalled(poll: Callable[[], None] | None = None, interval: float = 0.2) -> int:
    """Block until SIGINT (Ctrl-C) or SIGTERM, calling ``poll`` every ``interval``; returns the signal."""
    received: list[int] = []
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        received.append(signum)
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        while not stop.wait(interval):
            if poll is not None:
                poll()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    return received[0]


def endpoint(args: argparse.Namespace) -> str:
    return str(args.endpoint or os.environ.get("AWS_ENDPOINT_URL") or DEFAULT_ENDPOINT)
