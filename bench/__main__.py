"""Run every benchmark, write bench/results.json and print the tables."""

from __future__ import annotations

import json
import platform
import time
from pathlib import Path
from typing import Any

from bench import extract, images, senders


def main() -> None:
    out = Path(__file__).resolve().parent / "results.json"
    results: dict[str, Any] = {"machine": {"python": platform.python_version(), "cpus": __import__("os").cpu_count()},
               "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    print("== images: size, cold start, warm invoke ==", flush=True)
    results["images"] = images.run()
    print(images.table(results["images"]), flush=True)
    print("\n== PDF extraction: pypdf vs peers ==", flush=True)
    results["extract"] = extract.run()
    print(extract.table(results["extract"]), flush=True)
    print("\n== senders: throughput, latency, rate limit ==", flush=True)
    results["senders"] = senders.run()
    print(senders.table(results["senders"]), flush=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
