"""The extractor in its built image, as Lambda runs it: 256 MB, read-only root, no /dev/shm.

Each hostile file (tests/support/extraction.py) runs in a fresh container, so the container's memory
high-water
mark belongs to that file alone; the corpus runs in one container and must match the host RIE's
output byte for byte (same dependency set: AES PDFs open in both or in neither).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from deploy.functions import image_ref
from local.rie import RieProcess
from tests.docker.conftest import RunningImage
from tests.support import docgen
from tests.support.extraction import (
    CORPUS_ENV,
    CORPUS_INVOKE_TIMEOUT_S,
    FUNCTION_ENV,
    HOSTILE,
    Hostile,
    check_corpus_record,
    check_hostile,
    clear,
    corpus_files,
    empty_mail_bucket,  # noqa: F401 (the s3 fixture)
    outputs,
    record_for,
    require_corpus,
    sample_files,
    upload,
)

pytestmark = pytest.mark.docker
MB = 1024 * 1024
CORPUS = corpus_files()
# Lambda has no /dev/shm: a read-only one makes multiprocessing's semaphores fail here too.
LAMBDA_LIKE = {"tmpfs": {"/tmp": "rw,size=64m", "/dev/shm": "ro,size=64k"}}


def start(run_image: Any, moto_server: str, memory_mb: int = 256, env: dict[str, str] | None = None) -> Any:
    return run_image(
        image_ref("attachment-extractor"),
        host_network=True,
        mem_limit=f"{memory_mb}m",
        memswap_limit=f"{memory_mb}m",
        env={"AWS_ENDPOINT_URL": moto_server, **FUNCTION_ENV, **(env or {})},
        **LAMBDA_LIKE,
    )


def cgroup_memory(container: Any) -> tuple[int, int]:
    """(high-water mark in bytes, OOM kills) of the container's cgroup, v2 or v1."""
    script = (
        "if [ -f /sys/fs/cgroup/memory.peak ]; then cat /sys/fs/cgroup/memory.peak; "
        "grep '^oom_kill ' /sys/fs/cgroup/memory.events; else cat "
        "/sys/fs/cgroup/memory/memory.max_usage_in_bytes; "
        "grep '^oom_kill ' /sys/fs/cgroup/memory/memory.oom_control; fi"
    )
    out = container.exec_run(["sh", "-c", script]).output.decode().split()
    return int(out[0]), int(out[2])


@pytest.mark.parametrize("case", HOSTILE, ids=[c.name for c in HOSTILE])
def test_hostile_file_in_the_image(
    case: Hostile, run_image: Callable[..., RunningImage], moto_server: str, s3: Any
) -> None:
    data = case.data()
    running = start(run_image, moto_server, case.memory_mb, case.env)
    event = upload(s3, {case.name: data})
    started = time.monotonic()
    result = running.invoke(event, timeout=90)
    elapsed = time.monotonic() - started
    assert result["status"] == "ok", result
    check_hostile(case, *record_for(s3, case.name))
    peak, oom_kills = cgroup_memory(running.container)
    print(f"{case.name}: {elapsed:.1f} s, container peak {peak / MB:.0f} MB")
    assert elapsed < case.timeout_s, f"{case.name} took {elapsed:.1f} s"
    assert oom_kills == 0 and peak < case.memory_mb * MB, (peak, oom_kills)


def test_corpus_in_the_image_matches_the_host_byte_for_byte(
    rie_module: Callable[..., RieProcess], run_image: Callable[..., RunningImage], moto_server: str, s3: Any
) -> None:
    require_corpus(CORPUS)
    files = {p.name: p.read_bytes() for p in CORPUS}
    files.update({k: v for k, v in sample_files().items() if k != "bomb.docx"})
    files["aes.pdf"] = docgen.encrypt_pdf(docgen.make_pdf(["AES words"]), "", "AES-128")
    # Both runs with the corpus' budget: the outputs compared never depend on the machine's speed.
    host_fn = rie_module("attachment-extractor", env=CORPUS_ENV)
    for name, data in files.items():  # one S3 event per attachment, as S3 sends them
        host_fn.invoke(upload(s3, {name: data}), timeout=CORPUS_INVOKE_TIMEOUT_S)
    host = outputs(s3)
    clear(s3)
    running = start(run_image, moto_server, env=CORPUS_ENV)
    for name, data in files.items():
        running.invoke(upload(s3, {name: data}), timeout=CORPUS_INVOKE_TIMEOUT_S)
    inside = outputs(s3)
    for path in CORPUS:
        check_corpus_record(path, *record_for(s3, path.name))
    assert sorted(host) == sorted(inside) and len(host) == len(files)
    for key, (body, meta) in host.items():
        assert inside[key][0] == body, key
        strip = lambda m: {k: v for k, v in m.items() if k != "extraction-ms"}  # noqa: E731
        assert strip(inside[key][1]) == strip(meta), key
    peak, oom_kills = cgroup_memory(running.container)
    assert oom_kills == 0 and peak < 256 * MB, (peak, oom_kills)


def test_the_child_needs_no_shared_memory(run_image: Callable[..., RunningImage], moto_server: str) -> None:
    """With /dev/shm unusable (as on Lambda) multiprocessing.Queue fails, and the extractor's
    child (fork + pipe) still works: the tests above ran under exactly this condition."""
    running = start(run_image, moto_server)
    queue = running.container.exec_run(["python", "-c", "import multiprocessing; multiprocessing.Queue()"])
    assert queue.exit_code != 0 and b"Read-only file system" in queue.output, queue.output
    child = running.container.exec_run(
        [
            "python",
            "-c",
            "from common.extractor import isolate, pdf; import time; "
            "print(list(isolate.run(lambda: iter([('ok',)]), (), memory_bytes=1 << 26, "
            "deadline=time.monotonic() + 10))[0])",
        ]
    )
    assert child.exit_code == 0 and child.output.strip() == b"('ok',)", child.output
