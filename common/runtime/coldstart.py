"""The cold start's collector pause: what every function gets from the base image, and the cold-start
benchmark's baselines too (bench/hello, bench/hello-boto), so a ratio to them shows the function's
own work and nothing the base gives both sides.

Standard library only, and imported by nothing heavier: a baseline that imports it pays for no more
than the pause itself.
"""

from __future__ import annotations

import gc
import os

# Set while the cold start runs without the cyclic collector (one process, however many handlers it makes).
_PAUSED: list[bool] = []


def pause_collector() -> None:
    """In a Lambda runtime (``AWS_LAMBDA_RUNTIME_API``: Lambda and the RIE set it), the cold start runs
    without the cyclic garbage collector until the first invocation returns. The cold start allocates
    what lives as long as the sandbox (modules, clients, models), and the collector traversed it again
    and again: 30-50 ms of an ack-sender's cold start (docs/decisions.md, "Cold start: what was tried").
    The first invocation is part of it: the clients and most imports are made there."""
    if os.environ.get("AWS_LAMBDA_RUNTIME_API") and gc.isenabled() and not _PAUSED:
        gc.disable()
        _PAUSED.append(True)


def resume_collector() -> None:
    """Re-enabled as it was, the collector's first pass walked everything the cold start made (~30 ms,
    before the response left). Frozen and at once unfrozen, that moves to the oldest generation
    untraversed: the young passes stay short, and a full collection, later, still examines it all (the
    first invocation's garbage included: nothing is kept for good)."""
    if not _PAUSED:
        return
    _PAUSED.clear()
    gc.freeze()
    gc.unfreeze()
    gc.enable()
