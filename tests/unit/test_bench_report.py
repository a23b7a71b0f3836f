"""docs/development.md's figures are the rendering of the committed bench/results.json
(bench/report.py), so the page cannot show a figure the last run did not produce."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import report

RUN = {
    "measured": {
        "flow": "2026-12-01T10:00:00Z",
        "cost": "2026-12-02T09:00:00Z",
        "senders": "2026-12-01T11:00:00Z",
    },
    "latency": {
        "receipt_to_forward": {"p50_s": 0.2, "p95_s": 0.4},
        "reply_to_send": {"p50_s": 0.1, "p95_s": 0.3},
    },
    "burst": {
        "mails": 1000,
        "lost": 0,
        "dlq": 1,
        "duplicates": 0,
        "minutes_to_last_forward": 7.5,
        "bottleneck": "inbound-handler: busy 400 s of the 450 s (one instance locally)",
    },
    "cost": {"per_1000_mails_usd": 0.3, "plain_forwarder_per_1000_mails_usd": 0.29},
    "senders": {"full_vs_floor": 0.9},
}


def test_the_page_shows_the_committed_results() -> None:
    page = report.DOC.read_text(encoding="utf-8")
    assert report.RESULTS.exists(), "bench/results.json is the record the figures come from"
    assert report.updated(page, report.load()) == page, (
        "docs/development.md's figures differ from bench/results.json: run `python -m bench report`"
    )


def test_each_figure_shows_its_value_and_the_day_it_was_measured() -> None:
    section = report.render(RUN)
    assert section.startswith(report.BEGIN) and section.endswith(report.END)
    assert "| p50 0.2 s, p95 0.4 s | p95 ≤ 2 s | 2026-12-01 |" in section
    assert "1,000 mails: 0 lost, 1 in a DLQ, 0 duplicates; the last forward after 7.5 min" in section
    # the cost combines two sections: both days are shown
    assert "| $0.3 | a plain SES forwarder: $0.29 | 2026-12-01, 2026-12-02 |" in section
    assert "`latency.receipt_to_forward.p50_s\\|p95_s`" in section  # a bare | would split the cell
    assert "transcribed" not in section


def test_what_a_run_did_not_produce_is_not_measured_yet() -> None:
    section = report.render(RUN)  # no images section
    cold = next(line for line in section.splitlines() if "cold_net_vs_baseline" in line)
    assert f"| {report.NOT_MEASURED} | handlers ≤ 1.3, senders ≤ 1.2 | — |" in cold
    empty = report.render({})
    # seven figures, the plain forwarder's cost and grep's time beside search
    assert empty.count(report.NOT_MEASURED) == 9
    partial = report.render({"images": {"functions": {"ack-sender": {"cold_net_vs_baseline": 1.1}}}})
    assert f"inbound-handler {report.NOT_MEASURED}" in partial and "ack-sender 1.1" in partial


def test_the_search_figure_shows_the_query_the_sync_and_grep() -> None:
    run = {
        "measured": {"search": "2026-12-03T08:00:00Z"},
        "search": {
            "query_p95_s": 0.01,
            "conversations": 10000,
            "attachments": 2000,
            "sync_s": 50.5,
            "resync_s": 0.9,
            "resync_read": 0,
            "grep": {"p95_s": 0.3},
        },
    }
    line = next(x for x in report.render(run).splitlines() if "search.query_p95_s" in x)
    assert (
        "query p95 0.01 s; sync of 10,000 conversations and 2,000 texts 50.5 s, again 0.9 s (0 read)" in line
    )
    assert "grep -r over the same text: p95 0.3 s | 2026-12-03 |" in line


def test_a_page_without_the_markers_is_refused() -> None:
    with pytest.raises(ValueError, match="markers"):
        report.updated("# Development\n\nno figures here\n", RUN)


def test_write_rewrites_only_the_section(tmp_path: Path) -> None:
    doc = tmp_path / "development.md"
    doc.write_text(f"before\n{report.BEGIN}\nSTALE FIGURE\n{report.END}\nafter\n", encoding="utf-8")
    assert report.write(RUN, doc) is True
    text = doc.read_text(encoding="utf-8")
    assert text.startswith("before\n") and text.endswith("\nafter\n") and "STALE FIGURE" not in text
    assert report.write(RUN, doc) is False  # already current


def test_a_partial_run_does_not_build_on_transcribed_figures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Transcribed figures lack the details a section combines with another's (the cost needs the
    calls per mail), so a partial run starts afresh from them; a real run's file is kept."""
    import bench.__main__ as bench_main

    results = tmp_path / "results.json"
    monkeypatch.setattr(bench_main, "RESULTS", results)
    results.write_text(json.dumps({"transcribed": "by hand", "cost": {"per_1000_mails_usd": 0.3}}))
    assert bench_main.previous(["flow"]) == {}
    results.write_text(json.dumps(RUN))
    assert bench_main.previous(["flow"]) == RUN
    assert bench_main.previous(list(bench_main.SECTIONS)) == {}  # a full run starts afresh anyway
