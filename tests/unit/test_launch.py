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


def test_the_minor_version_dev_names_is_the_one_the_os_image_pins() -> None:
    pin = re.search(r"^PYTHON_MINOR=(\S+)$", (REPO / "scripts" / "os-image.sh").read_text(), re.M)
    assert pin and pin.group(1) == IMAGE_PYTHON


def test_the_launcher_is_needed_below_the_fix_only() -> None:
    """Whether the images still need it is read from the interpreter they run, not from a pin
    (tests/docker/test_images.py: the launcher is deleted once that interpreter has the fix)."""
    assert launch.needed((3, 13, 5)) and launch.needed((3, 13, 12))
    assert not launch.needed(launch.FIXED_IN) and not launch.needed((3, 14, 0))
    assert launch.needed() == (sys.version_info[:3] < launch.FIXED_IN)  # this interpreter's own version


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
