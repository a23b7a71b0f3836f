"""Cold starts against a reference build, and the one cold-start measure the images keep, in one run.

Two questions a change to the code's shape must answer with figures taken side by side, on the same
machine and the same emulator, the order alternated from pair to pair (a start right after another's
removal is slower, so a fixed order would favour whichever goes first):

- **against a reference build**: ``BENCH_REFERENCE_TAG=<tag>`` names function images built from
  another commit (``IMAGE_TAG=<tag> scripts/images.sh --functions`` in a worktree of it). Each
  function starts on the same cheap event from its image of this tree and from the reference's; the
  ratio is the median of the pairs' ratios. Without the variable the section measures only the pause.
- **the collector's pause** (common/runtime/coldstart.py): each function's image beside a variant of
  it whose ``pause_collector`` and ``resume_collector`` do nothing, built here from the image itself, so
  the two differ in exactly that. docs/decisions.md keeps a cold-start measure only while its gain,
  measured this way, is 10 % or more.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from bench import images
from local.env import local_env

# The variant's coldstart.py: the same two functions, doing nothing.
NO_PAUSE = "def pause_collector():\n    pass\n\n\ndef resume_collector():\n    pass\n"
COLDSTART_PY = "/opt/lib/common/runtime/coldstart.py"


def _no_pause_variant(image: str) -> str:
    tag = image.replace(":", ":nopause-", 1) if ":" in image else f"{image}:nopause"
    with tempfile.TemporaryDirectory() as ctx:
        Path(ctx, "coldstart.py").write_text(NO_PAUSE)
        Path(ctx, "Dockerfile").write_text(
            f"FROM {image}\nUSER root\nCOPY coldstart.py {COLDSTART_PY}\n"
            f"RUN python3 -m compileall -q --invalidation-mode unchecked-hash {COLDSTART_PY}\n"
        )
        subprocess.run(
            ["docker", "build", "-q", "--network", "none", "-t", tag, ctx], check=True, capture_output=True
        )
    return tag


def _pairs(
    client: Any, first: str, second: str, event: images.Event, rounds: int
) -> list[tuple[float, float]]:
    out = []
    for i in range(rounds):
        order = [first, second] if i % 2 == 0 else [second, first]
        seconds = {ref: images._cold_start(client, ref, event()) for ref in order}
        out.append((seconds[first], seconds[second]))
    return out


def _init_cpu_ms(client: Any, image: str) -> float:
    """CPU time of ``import app`` (the function's init: its imports, its configuration, its handler) in a
    fresh container: a process's own CPU time moves far less with the machine's load than the wall clock."""
    code = "import time; t=time.process_time(); import app; print((time.process_time()-t)*1000)"
    out = client.containers.run(
        image,
        entrypoint=["python", "-c", code],
        environment=local_env(),
        remove=True,
        read_only=True,
        network_mode="none",
    )
    return float(out.decode().strip())


def _init_pairs(client: Any, first: str, second: str, rounds: int) -> list[tuple[float, float]]:
    out = []
    for i in range(rounds):
        order = [first, second] if i % 2 == 0 else [second, first]
        ms = {ref: _init_cpu_ms(client, ref) for ref in order}
        out.append((ms[first] / 1000, ms[second] / 1000))
    return out


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
    client = docker.from_env()  # type: ignore[attr-defined]  # mypy sees the repo's docker/ folder
    results: dict[str, Any] = {"rounds": rounds, "reference_tag": reference, "reference": {}, "gc_pause": {}}
    with emulator_process(local_env()):
        images.attach_emulator()
        try:
            for name, image in images.function_images():
                event = images.cheap_event(name)
                images._cold_start(client, image, event())  # untimed: moto loads each backend on first use
                if reference:
                    ref_image = image.rsplit(":", 1)[0] + f":{reference}"
                    row = _row(_pairs(client, image, ref_image, event, rounds))
                    init = _row(_init_pairs(client, image, ref_image, rounds))
                    results["reference"][name] = {
                        "this_ms": row["ms"],
                        "reference_ms": row["other_ms"],
                        "ratio": row["ratio"],
                        "init_cpu_ms": init["ms"],
                        "reference_init_cpu_ms": init["other_ms"],
                        "init_cpu_ratio": init["ratio"],
                    }
                variant = _no_pause_variant(image)
                row = _row(_pairs(client, image, variant, event, rounds))
                results["gc_pause"][name] = {
                    "paused_ms": row["ms"],
                    "not_paused_ms": row["other_ms"],
                    "ratio": row["ratio"],
                }
        finally:
            images.detach_emulator()
    return results


def table(results: dict[str, Any]) -> str:
    lines = [
        f"cold start, docker run -> first response, and init CPU (import app), median of {results['rounds']}"
        " alternated pairs"
    ]
    if results["reference"]:
        lines.append(
            f"{'function':22} {'this ms':>8} {'ref ms':>8} {'this/ref':>9} {'init CPU':>9} {'ref':>7} "
            f"{'this/ref':>9}  ref {results['reference_tag']}"
        )
        for name, r in results["reference"].items():
            lines.append(
                f"{name:22} {r['this_ms']:>8} {r['reference_ms']:>8} {r['ratio']:>9} "
                f"{r['init_cpu_ms']:>9} {r['reference_init_cpu_ms']:>7} {r['init_cpu_ratio']:>9}"
            )
    lines.append(f"{'function':22} {'paused':>8} {'no pause':>8} {'ratio':>9}  (the collector's pause)")
    for name, r in results["gc_pause"].items():
        lines.append(f"{name:22} {r['paused_ms']:>8} {r['not_paused_ms']:>8} {r['ratio']:>9}")
    return "\n".join(lines)
