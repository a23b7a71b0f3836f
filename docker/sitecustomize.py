"""Read ahead, on a second thread, the files a Lambda runtime in this image is about to import.

Python imports one file at a time, and each first touch of a module in a new container (an overlay
mount here, a lazily loaded image on Lambda) waits on the file system while the interpreter idles. The
base image's build records, in import order, the files a cold start of the functions reads
(docker/record-readahead.py). Site imports this module at interpreter start; in the runtime
process (``python -m awslambdaric``, as docker/lambda-entrypoint.sh starts it) a daemon thread reads
those files while the main thread imports and runs the handler, so most first touches are done by the
time the import reaches them. It only reads: nothing is imported or run, and a missing manifest or
file is skipped. ``READAHEAD=off`` turns it off; ``make bench`` measures it (images: readahead).
"""

import os
import sys
import threading

MANIFEST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "readahead.txt")
read: list[int] = []  # files read, once the thread is done


def _read_ahead(paths: list[str]) -> None:
    count = 0
    for path in paths:
        try:
            with open(path, "rb") as f:
                while f.read(1 << 20):
                    pass
            count += 1
        except OSError:
            continue
    read.append(count)


def _start(argv: list[str], manifest: str = MANIFEST) -> threading.Thread | None:
    if argv[1:3] != ["-m", "awslambdaric"] or os.environ.get("READAHEAD", "on") == "off":
        return None  # only the runtime process: not builds, tools or the extractor's parser children
    try:
        with open(manifest, encoding="utf-8") as f:
            paths = [line for line in f.read().split("\n") if line]
    except OSError:
        return None
    thread = threading.Thread(target=_read_ahead, args=(paths,), name="readahead", daemon=True)
    thread.start()
    return thread


_start(sys.orig_argv)
