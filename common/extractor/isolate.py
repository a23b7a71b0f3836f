"""Run one parse in a forked child with a memory limit and a hard deadline.

Why a child: a parser that allocates without bound, loops, or crashes in C must not take the
invocation with it. The child's memory is held below what the sandbox has left (``RLIMIT_AS`` plus
a watchdog, see ``run``), so runaway allocation ends the child, not the function; and ``SIGKILL``
on the deadline is the only time limit a parser cannot catch (a ``SIGALRM`` exception can be
swallowed by library code, and pypdf's form-XObject code did).

Why fork and a pipe: Lambda has no ``/dev/shm``, so ``multiprocessing.Queue``/``Pool`` (semaphores)
fail there; ``Process`` with ``Pipe`` needs only ``os.fork`` and ``os.pipe``. The fork start method is
named explicitly (Python 3.14 changes the default); the child starts with the parent's imports,
costs about a millisecond and shares the input bytes copy-on-write.

The child streams events (tuples) back as it produces them, so a parent that kills it on a
deadline still has everything that came before.
"""

from __future__ import annotations

import gc
import logging
import multiprocessing
import os
import resource
import signal
import time
import warnings
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from common.errors import EmailHandlerError

Event = tuple[Any, ...]
_FORK = multiprocessing.get_context("fork")
_PAGE = os.sysconf("SC_PAGE_SIZE")
MB = 1024 * 1024
# Kept free when a child is sized: pages the child dirties copy-on-write, the text the parent
# collects meanwhile (2,000,000 characters), pipe buffers. Measured: see docs/extractor.md.
PARENT_RESERVE = 32 * MB
MIN_CHILD_ALLOWANCE = 32 * MB
WATCH_INTERVAL = 0.05  # seconds between looks at the child's memory


class StoppedError(EmailHandlerError):
    """The child ended without finishing: ``kind`` is "time", "memory" or "crash"."""

    def __init__(self, kind: str, reason: str):
        super().__init__(reason)
        self.kind, self.reason = kind, reason


def run(
    target: Callable[..., Iterable[Event]],
    args: tuple[Any, ...],
    *,
    memory_bytes: int,
    deadline: float,
    step_s: float | None = None,
) -> Generator[Event, None, None]:
    """Yield ``target(*args)``'s events, then ("end", {"peak_rss_mb": ...}), from a child that may
    add ``memory_bytes`` to the sandbox's memory.

    Two guards hold the memory: ``RLIMIT_AS`` (new address space beyond ``memory_bytes`` fails at
    once, as a MemoryError the parser can report), and a watchdog here that kills the child when
    its private memory passes ``memory_bytes``: a forked child can also fill address space it
    inherited (heap holes, copy-on-write pages), which RLIMIT_AS does not see. Measured in the
    256 MB image, a child held to +32 MB of address space reached +44 MB of memory that way.

    ``deadline`` is a ``time.monotonic()`` value for the whole run; ``step_s`` (optional) bounds the
    wait for each event after the first. Raises :class:`StoppedError` when the child is killed or dies.
    Closing the generator early kills the child.
    """
    receiver, sender = _FORK.Pipe(duplex=False)
    # Objects that exist now are frozen out of the child's collector, so a collection in the
    # child does not write to (and copy) every page of the parent's heap.
    gc.freeze()
    child = _FORK.Process(target=_child, args=(sender, target, args, memory_bytes), daemon=True)
    try:
        with warnings.catch_warnings():
            # Python warns when a process with threads forks (here mypylogger's writer thread): a
            # lock that thread holds stays locked in the child. The child never touches what it
            # locks (log handlers, their queue, stdout; see _child), so the warning does not apply.
            warnings.filterwarnings("ignore", r"This process .* is multi-threaded", DeprecationWarning)
            child.start()
    finally:
        gc.unfreeze()
        sender.close()
    try:
        until, next_check = deadline, 0.0
        while True:
            now = time.monotonic()
            if now >= next_check:
                next_check = now + WATCH_INTERVAL
                private = private_bytes(child.pid or 0)
                if private is not None and private > memory_bytes:
                    raise StoppedError("memory", f"needs more than the {memory_bytes // MB} MB memory limit")
            if now >= until:
                limit = "time budget" if until >= deadline else f"{step_s:g} s page time limit"
                raise StoppedError("time", f"stopped at the {limit}")
            if not receiver.poll(min(until - now, WATCH_INTERVAL)):
                continue
            try:
                event = receiver.recv()
            except EOFError:
                child.join()
                raise _death(child.exitcode, memory_bytes) from None
            if event[0] == "stopped":  # the child's last resort caught an error the target did not
                raise StoppedError(event[1], event[2])
            yield event
            if event[0] == "end":
                return
            until = deadline if step_s is None else min(deadline, time.monotonic() + step_s)
    finally:
        if child.is_alive():
            child.kill()
        child.join()
        receiver.close()


def _death(exitcode: int | None, memory_bytes: int) -> StoppedError:
    if exitcode == -signal.SIGKILL:  # not ours (we raise before killing): the kernel's OOM killer
        return StoppedError("memory", f"killed for memory (limit {memory_bytes // MB} MB)")
    if exitcode == -signal.SIGABRT:  # native code aborts when an allocation fails under RLIMIT_AS
        return StoppedError(
            "memory", f"parser aborted, most likely out of memory (limit {memory_bytes // MB} MB)"
        )
    if exitcode is not None and exitcode < 0:
        return StoppedError("crash", f"parser crashed ({signal.Signals(-exitcode).name})")
    return StoppedError("crash", f"parser exited unexpectedly (status {exitcode})")


def _child(
    sender: Connection, target: Callable[..., Iterable[Event]], args: tuple[Any, ...], memory_bytes: int
) -> None:
    """Child body: never returns into multiprocessing (no atexit, no flushing of inherited streams)."""
    # Forked during a cold start, the child inherits the paused collector (common.runtime.handler);
    # the parser's cycles are its own garbage (pypdf: 3x the memory on a 1,000-page file without it).
    gc.enable()
    try:
        _detach_logging()
        _limit_address_space(memory_bytes)
        for event in target(*args):
            sender.send(event)
        sender.send(("end", {"peak_rss_mb": peak_rss_mb()}))
    except MemoryError:
        _send_quietly(
            sender, ("stopped", "memory", f"needs more than the {memory_bytes // MB} MB memory limit")
        )
    except BaseException as exc:  # the target reports its own errors; this is the last resort
        _send_quietly(sender, ("stopped", "crash", f"parser failed ({type(exc).__name__})"))
    finally:
        os._exit(0)


def _send_quietly(sender: Connection, event: Event) -> None:
    try:
        sender.send(event)
    except BaseException:
        pass


def _detach_logging() -> None:
    # The parent's handlers feed a queue drained by a thread that does not exist in the child (and
    # whose lock may have been held at fork time): the child must never touch them.
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    root.addHandler(logging.NullHandler())
    logging.captureWarnings(True)


def _limit_address_space(extra: int) -> None:
    limit = _vm_size() + extra
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _vm_size() -> int:
    return int(Path("/proc/self/statm").read_text().split()[0]) * _PAGE


def rss() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * _PAGE


def private_bytes(pid: int) -> int | None:
    """Memory only this process maps (its own allocations and its copies of copy-on-write pages):
    what it adds to the sandbox. None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except (OSError, ValueError):
        return None
    return (
        sum(
            int(line.split()[1])
            for line in text.splitlines()
            if line.startswith(("Private_Clean:", "Private_Dirty:"))
        )
        * 1024
    )


def peak_rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


# (limit, usage) files of the cgroup v2 and v1 memory controllers, as a container sees its own.
_CGROUPS = (
    ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
    ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes"),
)


@dataclass(frozen=True)
class Sandbox:
    """The memory all processes of this function share, and how to tell how much is in use."""

    total: int
    usage_file: str = (
        ""  # a cgroup whose limit is the sandbox's: its usage counts every process and the page cache
    )

    def used(self) -> int:
        if self.usage_file:
            try:
                return max(rss(), int(Path(self.usage_file).read_text()))
            except (OSError, ValueError):
                pass
        return rss()


def sandbox() -> Sandbox | None:
    """Lambda's configured memory, or the cgroup limit if lower; None when neither is known."""
    configured = os.environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "")
    total = int(configured) * MB if configured.isdigit() else None
    for limit_file, usage_file in _CGROUPS:
        try:
            value = Path(limit_file).read_text().strip()
        except OSError:
            continue
        # v1 says "no limit" with a huge number, v2 with "max"; a limit above the configured memory
        # belongs to a bigger enclosure (the host), whose usage says nothing about this function.
        if value.isdigit() and int(value) < 1 << 50 and (total is None or int(value) <= total):
            return Sandbox(int(value), usage_file)
    return Sandbox(total) if total else None


def child_allowance(box: Sandbox | None) -> int:
    """How much address space a child may add: what the sandbox has left (unbounded when its
    size is unknown). Measured at fork time, when the input and the parser's modules are resident."""
    if box is None:
        return 1 << 62
    return max(MIN_CHILD_ALLOWANCE, box.total - box.used() - PARENT_RESERVE)
