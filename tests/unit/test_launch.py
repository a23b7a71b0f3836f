"""common.runtime.launch: ``python -m MODULE`` inside one large frame, with no frame-stack chunk boundary
within reach of the code it runs (python/cpython#142183)."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import textwrap
from pathlib import Path

from common.runtime import launch
from local.pyversion import IMAGE_PYTHON

REPO = Path(__file__).resolve().parents[2]


def _pinned_python() -> tuple[int, ...]:
    """The upstream version of the Debian python3.13 package the images pin (scripts/os-image.sh)."""
    pin = re.search(r"^PYTHON_DEB_VERSION=(\S+)$", (REPO / "scripts" / "os-image.sh").read_text(), re.M)
    assert pin, "scripts/os-image.sh pins no PYTHON_DEB_VERSION"
    upstream = re.match(r"(\d+)\.(\d+)\.(\d+)-", pin.group(1))
    assert upstream, pin.group(1)
    return tuple(int(part) for part in upstream.groups())


def test_the_launcher_is_deleted_once_the_pinned_python_has_the_fix() -> None:
    """The launcher works around python/cpython#142183, fixed in 3.13.13. This fails the day the pin
    reaches the fix: then delete common/runtime/launch.py, its tests, and `-m common.runtime.launch`
    in docker/lambda-entrypoint.sh (and the docker test that looks for it)."""
    pinned = _pinned_python()
    assert ".".join(map(str, pinned)) == IMAGE_PYTHON  # dev's check names the same interpreter
    assert launch.needed(pinned), (
        f"the images pin Python {pinned}, which has the fix of python/cpython#142183: delete the launcher"
    )
    assert not launch.needed(launch.FIXED_IN) and not launch.needed((3, 14, 0))


# Calls a trivial function 2,000 times at every depth up to 900 frames (the recursion limit is 1,000)
# and prints the most page faults one depth cost. Where a call's frame is the first of a new chunk, a
# CPython before 3.13.13 maps the chunk and unmaps it again on every call: a fault per call.
PROBE = textwrap.dedent(
    """
    import resource, sys

    def leaf():
        pass

    def at_depth(n):
        if n:
            return at_depth(n - 1)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(2000):
            leaf()
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

    if __name__ == "__main__":
        print(max(at_depth(d) for d in range(900)), sys.argv[1:])
    """
)


def _run(tmp_path: Path, *command: str) -> tuple[int, list[str]]:
    (tmp_path / "chunkprobe.py").write_text(PROBE)
    out = subprocess.run(
        [sys.executable, *command],
        cwd=tmp_path,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split(" ", 1)
    return int(out[0]), ast.literal_eval(out[1])  # the probe prints its own argv list


def test_no_call_loop_under_the_launcher_faults_on_a_chunk_boundary(tmp_path: Path) -> None:
    worst, argv = _run(tmp_path, "-m", "common.runtime.launch", "chunkprobe", "app.handler")
    assert argv == ["app.handler"]  # the module sees the arguments `python -m chunkprobe` would give it
    assert worst < 100, f"{worst} page faults for 2,000 calls at one depth"
    # The probe has teeth: run as plain `python -m`, an interpreter without the fix (3.13.0-3.13.12:
    # the host's pyenv 3.13.0, the images' Debian 3.13.5) pays a page fault per call at some depth.
    plain, _ = _run(tmp_path, "-m", "chunkprobe")
    if sys.version_info < (3, 13, 13):
        assert plain >= 2000, f"only {plain} page faults without the launcher: the probe lost the boundary"
    assert worst <= plain


def test_the_module_runs_as_main_and_its_exit_status_is_the_process_one(tmp_path: Path) -> None:
    (tmp_path / "exits.py").write_text(
        "import sys\nassert __name__ == '__main__'\nsys.exit(int(sys.argv[1]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "common.runtime.launch", "exits", "3"],
        cwd=tmp_path,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert done.returncode == 3
    usage = subprocess.run(
        [sys.executable, "-m", "common.runtime.launch"],
        cwd=tmp_path,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        check=False,
        capture_output=True,
        text=True,
    )
    assert usage.returncode == 1 and "usage" in usage.stderr
