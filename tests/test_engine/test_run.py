"""engine.build: the same analyses from a trace path and from the trace already read."""

from __future__ import annotations

from pathlib import Path

import pytest

from tc_analyses.analyses.states import rows
from tc_analyses.analyses.summary import summarize
from tc_analyses.engine import BuiltAnalyses, build
from tc_analyses.export.tracecompass import render_xml
from tc_analyses.export.tracecompass.facts import trace_facts
from tc_analyses.reader import read_trace

TRACE = Path(__file__).resolve().parents[1] / "data" / "traces" / "succeed" / "all-classes"


@pytest.fixture(scope="module")
def xml_files(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    out = tmp_path_factory.mktemp("xml")
    for name, data in render_xml(trace_facts(TRACE)).items():
        (out / name).write_bytes(data)
    return sorted(out.glob("*.xml"))


def _counts(built: BuiltAnalyses) -> tuple[object, ...]:
    return built.path, built.first_ts, built.last_ts, built.events, built.lost, built.classes


def test_a_read_trace_builds_what_its_path_builds(xml_files: list[Path]) -> None:
    from_path = build(TRACE, xml_files)
    from_trace = build(read_trace(TRACE), xml_files)
    assert _counts(from_trace) == _counts(from_path)
    assert from_trace.path == str(TRACE)
    assert rows(from_trace) == rows(from_path) and len(rows(from_path)) > 100
    assert from_trace.segments == from_path.segments and any(from_path.segments.values())
    assert summarize(from_trace) == summarize(from_path)


def test_trace_facts_of_a_read_trace_are_those_of_its_path() -> None:
    assert trace_facts(read_trace(TRACE)) == trace_facts(TRACE)


def test_rows_at_a_time_are_the_intervals_holding_then(xml_files: list[Path]) -> None:
    built = build(TRACE, xml_files, spill_bytes=0)  # read back from mapped files, as large runs are
    every = rows(built)
    times = sorted({r.start for r in every})
    for t in (times[0], times[len(times) // 3], times[-1], times[-1] + 10**12):
        assert rows(built, at=t) == [r for r in every if r.start <= t <= r.end]
    assert rows(built, "*/Threads/*", at=times[1]) == [r for r in rows(built, "*/Threads/*")
                                                       if r.start <= times[1] <= r.end]
