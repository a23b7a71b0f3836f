"""The extraction child: its memory limit, its deadline and its crashes become StoppedError, never a dead
parent."""

from __future__ import annotations

import ctypes
import faulthandler
import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from common.extractor import isolate
from common.extractor.isolate import StoppedError

MB = 1024 * 1024


def collect(
    target: Callable[..., Any],
    *,
    memory_bytes: int = 64 * MB,
    seconds: float = 10,
    step_s: float | None = None,
) -> tuple[list, StoppedError | None]:
    events: list = []
    try:
        for event in isolate.run(
            target, (), memory_bytes=memory_bytes, deadline=time.monotonic() + seconds, step_s=step_s
        ):
            events.append(event)
    except StoppedError as stop:
        return events, stop
    return events, None


def test_events_stream_back_and_end_with_the_childs_peak() -> None:
    events, stop = collect(lambda: iter([("a", 1), ("b", [2, 3])]))
    assert stop is None and events[:2] == [("a", 1), ("b", [2, 3])]
    assert events[-1][0] == "end" and events[-1][1]["peak_rss_mb"] > 0


def test_allocation_beyond_the_limit_is_a_memory_stop() -> None:
    def hungry() -> Iterator[tuple]:
        yield ("started",)
        hoard = [bytearray(8 * MB) for _ in range(64)]  # 512 MB against a 64 MB limit
        yield ("never", len(hoard))

    events, stop = collect(hungry)
    assert events == [("started",)]
    assert stop is not None and (stop.kind, stop.reason) == (
        "memory",
        "needs more than the 64 MB memory limit",
    )


def test_growth_into_inherited_memory_is_stopped_too() -> None:
    """Copy-on-write pages cost the sandbox memory without adding address space: the watchdog sees them."""
    inherited = bytearray(b"x") * (96 * MB)

    def dirty() -> Iterator[tuple]:
        yield ("started",)
        for offset in range(0, len(inherited), 4096):
            inherited[offset] = 1  # every page copied: 96 MB more, and RLIMIT_AS never notices
        time.sleep(5)
        yield ("never",)

    started = time.monotonic()
    events, stop = collect(dirty, memory_bytes=48 * MB)
    assert events == [("started",)] and time.monotonic() - started < 4
    assert stop is not None and (stop.kind, stop.reason) == (
        "memory",
        "needs more than the 48 MB memory limit",
    )


def test_a_parser_that_swallows_every_exception_still_stops_at_the_deadline() -> None:
    def stubborn() -> Iterator[tuple]:
        yield ("page", 1)
        while True:
            try:
                time.sleep(0.05)
            except BaseException:  # what pypdf's form-XObject code did to SIGALRM
                pass

    started = time.monotonic()
    events, stop = collect(stubborn, seconds=1.5)
    assert time.monotonic() - started < 2.5
    assert (
        events == [("page", 1)]
        and stop is not None
        and (stop.kind, stop.reason) == ("time", "stopped at the time budget")
    )


def test_the_step_limit_bounds_the_wait_for_each_event_after_the_first() -> None:
    def slow_second() -> Iterator[tuple]:
        time.sleep(0.6)  # before the first event only the overall deadline counts
        yield ("first",)
        time.sleep(5)
        yield ("second",)

    events, stop = collect(slow_second, seconds=10, step_s=0.5)
    assert (
        events == [("first",)] and stop is not None and stop.reason == "stopped at the 0.5 s page time limit"
    )


def test_a_crash_in_native_code_is_a_crash_stop() -> None:
    def segfault() -> Iterator[tuple]:
        yield ("before",)
        ctypes.string_at(0)

    enabled = faulthandler.is_enabled()
    faulthandler.disable()  # pytest's fault handler would print the child's stack (harmless noise)
    try:
        events, stop = collect(segfault)
    finally:
        if enabled:
            faulthandler.enable()
    assert (
        events == [("before",)]
        and stop is not None
        and (stop.kind, stop.reason) == ("crash", "parser crashed (SIGSEGV)")
    )


def test_the_child_never_writes_through_the_parents_log_handlers(tmp_path: Path) -> None:
    """The parent's handlers (mypylogger's queue and its thread) do not exist for the child."""
    handler = logging.FileHandler(tmp_path / "parent.log")
    logging.getLogger().addHandler(handler)
    try:

        def chatty() -> Iterator[tuple]:
            logging.getLogger("pypdf").warning("noise from a library")
            yield ("done",)

        events, stop = collect(chatty)
        logging.getLogger("test").warning("the parent still logs")
    finally:
        logging.getLogger().removeHandler(handler)
        handler.close()
    assert stop is None and events[0] == ("done",)
    assert (tmp_path / "parent.log").read_text() == "the parent still logs\n"


def test_the_allowance_is_what_the_sandbox_has_left(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert isolate.child_allowance(None) > 1 << 40
    own = isolate.rss()
    total = own + isolate.PARENT_RESERVE + 100 * MB
    assert isolate.child_allowance(isolate.Sandbox(total)) == pytest.approx(100 * MB, abs=8 * MB)
    assert isolate.child_allowance(isolate.Sandbox(64 * MB)) == isolate.MIN_CHILD_ALLOWANCE
    usage = tmp_path / "memory.current"  # a cgroup counts the other processes and the page cache too
    usage.write_text(str(own + 60 * MB))
    assert isolate.child_allowance(isolate.Sandbox(total, str(usage))) == pytest.approx(40 * MB, abs=8 * MB)
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "256")
    box = isolate.sandbox()
    assert box is not None and box.total <= 256 * MB


def test_a_child_forked_during_a_cold_start_collects_its_own_garbage() -> None:
    """The cold start pauses the parent's collector (common.runtime.handler); the fork would inherit the
    pause, and pypdf's cycles took 3x the memory in the child without a collector."""
    import gc

    gc.disable()
    try:
        events, stop = collect(lambda: iter([("gc", gc.isenabled())]))
    finally:
        gc.enable()
    assert stop is None and events[0] == ("gc", True)
