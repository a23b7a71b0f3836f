"""The parsing caps (docs/security.md#parsing-caps): each case (tests/support/caps.py) through
inbound-handler under
the real RIE on the host, against moto in its own process: outcome, wall time of the invocation and
the peak RSS of the function's runtime process (Linux VmHWM, reset before each invocation), and its
CPU time, also as Lambda's CPU share at the function's memory would stretch it (tests/support/caps.py).

"over" cases are the attacks the caps exist for, each past one cap (each must be quarantined unparsed,
with the reason); "just under" cases are the most a sender can make the parser do without hitting a
cap. Each case is run ``ROUNDS`` times; the table shows the slowest time and the highest peak.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from deploy.functions import BY_NAME
from local.env import local_env
from local.rie import RieProcess, free_port
from tests.support import caps
from tests.support import mailgen as g

ROUNDS = 3


def run() -> dict[str, Any]:
    from common.aws import client
    from local import events
    from tests.support.sendload import emulator_process

    if not caps.can_measure():
        return {"skipped": "peak RSS is read from Linux /proc"}
    env = local_env()
    with emulator_process(env) as cfg, tempfile.TemporaryDirectory() as tmp:
        import os

        fn = RieProcess(
            "inbound-handler",
            free_port(),
            {**env, "AWS_ENDPOINT_URL": os.environ["AWS_ENDPOINT_URL"]},
            Path(tmp) / "inbound-handler.log",
        ).start()
        try:

            def receipt(raw: bytes, mid: str) -> dict[str, Any]:
                client("s3").put_object(Bucket=cfg.bucket, Key=f"staging/{mid}", Body=raw)
                return events.receipt_event(raw, mid, [cfg.public_email])

            fn.invoke(receipt(g.from_field("Warm <warm@corp.example>"), "warm" + "0" * 36))
            rows = []
            for n, case in enumerate(caps.CASES):
                raw = case.build()
                runs = [caps.measure(fn, receipt(raw, f"cap{n:03d}r{r}" + "0" * 32)) for r in range(ROUNDS)]
                result = runs[-1].result
                rows.append(
                    {
                        "case": case.name,
                        "bytes": len(raw),
                        "outcome": result.get("status"),
                        "reason": result.get("reason", ""),
                        "expected": case.status,
                        "seconds": round(max(m.seconds for m in runs), 3),
                        "cpu_seconds": round(max(m.cpu_seconds for m in runs), 3),
                        "lambda_cpu_seconds": round(
                            caps.lambda_seconds(
                                max(m.cpu_seconds for m in runs), BY_NAME["inbound-handler"].memory_mb
                            ),
                            1,
                        ),
                        "peak_rss_mb": round(max(m.peak_mb for m in runs), 1),
                        "baseline_rss_mb": round(min(m.baseline_mb for m in runs), 1),
                    }
                )
        finally:
            fn.stop()
    return {"function_memory_mb": BY_NAME["inbound-handler"].memory_mb, "rounds": ROUNDS, "cases": rows}


def table(r: dict[str, Any]) -> str:
    if "skipped" in r:
        return f"skipped: {r['skipped']}"
    lines = [
        f"{'case':<78} {'size':>9} {'outcome':<12} {'time':>7} {'CPU':>6} {'Lambda':>7} {'peak RSS':>9}",
        "-" * 136,
    ]
    for row in r["cases"]:
        ok = "" if row["outcome"] == row["expected"] else f"  (expected {row['expected']})"
        lines.append(
            f"{row['case'][:78]:<78} {row['bytes'] / 1024:>7.0f}KB {row['outcome']:<12} "
            f"{row['seconds']:>6.2f}s {row['cpu_seconds']:>5.2f}s {row['lambda_cpu_seconds']:>6.1f}s "
            f"{row['peak_rss_mb']:>7.0f}MB{ok}"
        )
    lines.append(
        f"function memory {r['function_memory_mb']} MB; runtime baseline "
        f"{min(row['baseline_rss_mb'] for row in r['cases']):.0f} MB; worst of {r['rounds']} runs each"
    )
    return "\n".join(lines)
