"""``python -m common.runtime.launch MODULE ARGS...``: ``python -m MODULE ARGS...`` run inside one
large interpreter frame. The image's entry script starts the Lambda runtime client this way
(``... launch awslambdaric app.handler``).

CPython keeps Python frames in a stack of chunks (16 KiB each at first) and, before 3.13.13, frees a
chunk as soon as the last frame in it returns (python/cpython#142183, "Calls across stack chunks
perform badly"; Debian trixie's python3.13 was 3.13.5 when this was written). Code that calls in a
loop at the depth where frames spill into a new chunk pays an mmap, a munmap and a fresh page for every
call. Which depth that is depends on every frame below it, so it moves with any change to the code: in
the ack-sender, one wrapper frame more or less around the handler decided whether urllib3's IPv6
regexes compiled in 5 ms or in 42 ms with 5,600 page faults (a third of the gap to the one-call
baseline; docs/decisions.md, "The frame stack's chunk boundary").

Here the module runs in a frame that reserves ``STACK_SLOTS`` slots of value stack it never uses. Too
large for the chunk it is called from, that frame gets a chunk of its own (the next power of two, 2 MiB),
and every frame the runtime and the functions push later fits in what is left of it: no boundary is
within reach of anything they do (Python's recursion limit, 1,000 frames, stops far short of it).
Pages of the chunk that no frame reaches are never touched, so they cost no memory. On a CPython with
the fix the frame is harmless, and still spares the calls that would cross a boundary (a cached chunk
is cheap to reuse, but a call across chunks is not specialised).

Temporary: it exists only while the interpreter the images run (Debian trixie's python3.13, its
revision floating with Debian's updates) is older than ``FIXED_IN``; :func:`needed` reads the running
interpreter, so on a fixed CPython the module runs in an ordinary frame. tests/docker/test_images.py
fails once the built images' interpreter reaches the fix, so that this module and the entry script's
use of it are deleted then.
"""

from __future__ import annotations

import runpy
import sys

STACK_SLOTS = 1 << 17  # 1 MiB of pointers; the chunk holding the frame is 2 MiB
FIXED_IN = (3, 13, 13)  # python/cpython#142183: the first 3.13 that caches a freed chunk


def _run(module: str) -> None:
    runpy.run_module(module, run_name="__main__", alter_sys=True)


def needed(version: tuple[int, ...] = tuple(sys.version_info[:3])) -> bool:
    return version < FIXED_IN


if needed():
    # Only the reservation changes: the bytecode and what the frame holds are _run's own.
    _run.__code__ = _run.__code__.replace(co_stacksize=_run.__code__.co_stacksize + STACK_SLOTS)


def main(argv: list[str]) -> None:
    if len(argv) < 2:
        raise SystemExit("usage: python -m common.runtime.launch MODULE [ARGS...]")
    # As ``python -m MODULE ARGS`` would see it: runpy puts the module's path in argv[0].
    sys.argv = argv[1:]
    _run(argv[1])


if __name__ == "__main__":
    main(sys.argv)
