#!/usr/bin/env python3
"""Rewrite requirements/image.txt with sha256 hashes of the x86_64 and aarch64 wheels.

Run after changing a pin: downloads both platforms' wheels for Python 3.13 (cp313)
and records every hash, so `pip install --require-hashes` in Dockerfile.base accepts
exactly these files on either architecture.
"""

from __future__ import annotations

import hashlib
import pathlib
import re
import subprocess
import sys
import tempfile

LOCK = pathlib.Path(__file__).resolve().parent.parent / "requirements" / "image.txt"
HEADER = [
    "# Full pinned set installed into the Lambda images from the host wheelhouse",
    "# (scripts/wheelhouse.sh), with the sha256 of the x86_64 and aarch64 wheels.",
    "# Direct pins must match pyproject.toml [project.dependencies] (tests/unit/test_packaging.py).",
    "# To change a pin: edit it here and in pyproject.toml, then run scripts/lock-hashes.py.",
]


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def main() -> None:
    pins = re.findall(r"^([A-Za-z0-9_.-]+)==([^\s\\]+)", LOCK.read_text(), re.M)
    with tempfile.TemporaryDirectory() as tmp:
        reqs = pathlib.Path(tmp, "req.txt")
        reqs.write_text("".join(f"{n}=={v}\n" for n, v in pins))
        for arch in ("x86_64", "aarch64"):
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    "-q",
                    "--no-deps",
                    "-d",
                    f"{tmp}/{arch}",
                    # google-re2 publishes manylinux_2_28 wheels only; the rest are manylinux2014.
                    *(
                        a
                        for tag in (f"manylinux_2_28_{arch}", f"manylinux2014_{arch}")
                        for a in ("--platform", tag)
                    ),
                    "--python-version",
                    "3.13",
                    "--implementation",
                    "cp",
                    "--only-binary=:all:",
                    "-r",
                    str(reqs),
                ],
                check=True,
            )
        wheels = list(pathlib.Path(tmp).glob("*/*.whl"))
        out = list(HEADER)
        for name, version in pins:
            hashes = sorted(
                {
                    hashlib.sha256(w.read_bytes()).hexdigest()
                    for w in wheels
                    if norm(w.name.split("-")[0]) == norm(name) and w.name.split("-")[1] == version
                }
            )
            if not hashes:
                sys.exit(f"no wheel found for {name}=={version}")
            out.append(f"{name}=={version} \\\n" + " \\\n".join(f"    --hash=sha256:{h}" for h in hashes))
    LOCK.write_text("\n".join(out) + "\n")
    print(f"wrote {LOCK} ({len(pins)} pins)")


if __name__ == "__main__":
    main()
