"""Cold starts against a reference build, in one run.

A change to the code's shape (its imports, its configuration, a new dependency) must answer with
figures taken side by side: ``BENCH_REFERENCE_TAG=<tag>`` names function images built from another
commit (``IMAGE_TAG=<tag> scripts/images.sh --functions`` in a worktree of it). Each function starts
on the event a real first invocation brings (a first-contact mail, a first send; the reply-handler
and the extractor on their cheap events) from its image of this tree and from the reference's, the
order alternated from pair to pair (a start right after another's removal is slower, so a fixed
order would favour whichever goes first), on the same machine and the same emulator. Two figures per
start: docker run -> first response, and the CPU time the container used by then (the RIE, the
runtime's init and the first event), which moves far less with the machine's load than the wall
clock. The ratios are medians of the pairs' ratios. Without the variable the section says what it
needs and measures nothing.

docs/decisions.md keeps a cold-start measure only while its gain, measured this way against the code
without it, is 10 % or more (the collector's pause went that way).
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

from bench import images
from local.env import local_env

# The container's CPU time so far, in ns: cgroup v1's cpuacct, or v2's cpu.stat (usage_usec).
CPU_USAGE = (
    "cat /sys/fs/cgroup/cpuacct/cpuacct.usage 2>/dev/null"
    " || awk '/^usage_usec/{print $2 * 1000}' /sys/fs/cgroup/cpu.stat"
)


def _cold(client: Any, image: str, event: Any) -> tuple[float, float]:
    """(seconds from `docker run` to the first response, CPU seconds the container used by then)."""
    t0 = time.perf_counter()
    container, url = images._start(client, image)
    try:
        images._first_response(url, event)
        wall = time.perf_counter() - t0
        out = container.exec_run(["sh", "-c", CPU_USAGE]).output.decode().strip()
        return wall, float(out) / 1e9
    finally:
        container.remove(force=True)


def _pairs(
    client: Any, first: str, second: str, event: images.Event, rounds: int
) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    """(wall, cpu) pairs (first, second), the order alternated."""
    wall, cpu = [], []
    for i in range(rounds):
        order = [first, second] if i % 2 == 0 else [second, first]
        got = {ref: _cold(client, ref, event()) for ref in order}
        wall.append((got[first][0], got[second][0]))
        cpu.append((got[first][1], got[second][1]))
    return wall, cpu


def _row(pairs: list[tuple[float, float]]) -> dict[str, float]:
    return {
        "ms": round(statistics.median(a for a, _ in pairs) * 1000, 1),
        "other_ms": round(statistics.median(b for _, b in pairs) * 1000, 1),
        "ratio": round(statistics.median(a / b for a, b in pairs), 3),
    }


def run(rounds: int = 0) -> dict[str, Any]:
    import docker
    from tests.support.sendload import emulator_process

    rounds = rounds or int(os.environ.get("BENCH_ROUNDS") or 5)
    reference = os.environ.get("BENCH_REFERENCE_TAG", "")
    results: dict[str, Any] = {"rounds": rounds, "reference_tag": reference, "functions": {}}
    if not reference:
        return results
    client = docker.from_env()  # type: ignore[attr-defined]  # mypy sees the repo's docker/ folder
    with emulator_process(local_env()):
        images.attach_emulator()
        try:
            for name, image in images.function_images():
                # A cheap event can skip what every real first invocation pays (a sender's duplicate never
                # reaches SES); code that moves such work from the first event to init would look slower.
                event = images.REAL_FIRST_EVENT.get(name) or images.cheap_event(name)
                images._cold_start(client, image, event())  # untimed: moto loads each backend on first use
                ref_image = image.rsplit(":", 1)[0] + f":{reference}"
                wall, cpu = (_row(p) for p in _pairs(client, image, ref_image, event, rounds))
                results["functions"][name] = {
                    "this_ms": wall["ms"],
                    "reference_ms": wall["other_ms"],
                    "ratio": wall["ratio"],
                    "cpu_ms": cpu["ms"],
                    "reference_cpu_ms": cpu["other_ms"],
                    "cpu_ratio": cpu["ratio"],
                }
        finally:
            images.detach_emulator()
    return results


def table(results: dict[str, Any]) -> str:
    if not results["reference_tag"]:
        return "no reference: set BENCH_REFERENCE_TAG to the tag of images built from another commit"
    lines = [
        "cold start: docker run -> first response, and the container's CPU time by then; median of "
        f"{results['rounds']} alternated pairs against {results['reference_tag']}",
        f"{'function':22} {'this ms':>8} {'ref ms':>8} {'this/ref':>9} {'CPU ms':>9} {'ref':>7} "
        f"{'this/ref':>9}",
    ]
    for name, r in results["functions"].items():
        lines.append(
            f"{name:22} {r['this_ms']:>8} {r['reference_ms']:>8} {r['ratio']:>9} "
            f"{r['cpu_ms']:>9} {r['reference_cpu_ms']:>7} {r['cpu_ratio']:>9}"
        )
    return "\n".join(lines)
