import json
import subprocess
import sys
import textwrap

from common.runtime.log import safe_fields


def test_reserved_logrecord_keys_are_renamed() -> None:
    assert safe_fields({"filename": "cv.pdf", "module": "x", "name": "n", "sender": "s"}) == {
        "filename_": "cv.pdf",
        "module_": "x",
        "name_": "n",
        "sender": "s",
    }


def test_logging_a_reserved_key_does_not_raise_and_lines_are_flushed() -> None:
    """Runs in a fresh interpreter: mypylogger reads its environment at import time."""
    code = textwrap.dedent("""
        import os, sys
        from common.runtime.log import configure, get_logger, flush
        configure(service="unit", environment="test")
        log = get_logger("unit")
        for i in range(200):
            log.info("attachment stored", extra={"filename": "cv.pdf", "i": i})
        flush(log)
        os._exit(0)  # skip atexit: only flush() may have written the lines
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    lines = [json.loads(line) for line in out.splitlines()]
    assert len(lines) == 200
    assert lines[0]["filename_"] == "cv.pdf" and lines[0]["filename"] == "<string>"
    assert lines[-1]["i"] == 199 and lines[-1]["service"] == "unit" and lines[-1]["environment"] == "test"
