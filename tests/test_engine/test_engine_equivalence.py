"""Differential test: every way the engine can run gives the reference run's intervals and segments.

The reference is the plain event-by-event interpreter over every event of the trace
(``engine="events"``). The default run gives each analysis only the events it handles and runs
state providers on columns where it can (tc_analyses/engine/columnar.py); both must build the
same state systems, interval for interval, and the same segments, on real traces our tracer made
(the all-classes trace, the processes of the DDP job) and on the Kineto imports of the
shared traces, with the analyses generated for each trace.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tc_analyses.engine import build
from tc_analyses.engine.run import BuiltAnalyses
from tc_analyses.export.tracecompass import render_xml
from tc_analyses.inputs import TraceInputs
from tests.test_analyses.test_states_on_lttng import XML as LTTNG_XML

DATA = Path(__file__).resolve().parents[1] / "data"
JOB = DATA / "traces" / "jobs" / "ddp-2rank"
# the all-classes trace, and the job's 3 processes that ran the model (the 4th is the launcher)
TRACES = [DATA / "traces" / "succeed" / "all-classes",
          *sorted(p for p in JOB.iterdir() if any(p.glob("node_begin-*")))]


def snapshot(built: BuiltAnalyses) -> dict[str, Any]:
    """Everything a run produces, as plain data: every attribute's intervals, every segment."""
    systems = {aid: {path: [(i.start, i.end, i.value) for i in intervals] for path, intervals in ss.items()}
               for aid, ss in built.systems.items()}
    segments = {pid: [(s.start, s.end, s.name, sorted(s.content.items())) for s in segs]
                for pid, segs in built.segments.items()}
    return {"systems": systems, "segments": segments, "span": (built.first_ts, built.last_ts)}


def generated_xml(trace: Path, out: Path) -> list[Path]:
    files = []
    for name, data in render_xml(TraceInputs(trace).facts).items():
        (out / name).write_bytes(data)
        files.append(out / name)
    return files


def assert_same_as_reference(trace: Path, files: list[Path]) -> BuiltAnalyses:
    reference = snapshot(build(trace, files, engine="events"))
    built = build(trace, files)
    assert snapshot(built) == reference
    spilled = build(trace, files, spill_bytes=0)  # every state system read back from a mapped file
    assert all(isinstance(ss.columns(path)[0], memoryview) for ss in spilled.systems.values() for path in ss.paths()
               if len(ss.columns(path)[0]))
    assert snapshot(spilled) == reference
    return built


@pytest.mark.parametrize("trace", TRACES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_generated_analyses_on_our_traces(trace: Path, tmp_path: Path) -> None:
    built = assert_same_as_reference(trace, generated_xml(trace, tmp_path))
    assert sum(len(list(ss.paths())) for ss in built.systems.values()) > 10


@pytest.mark.slow
def test_generated_analyses_on_kineto_imports(shared_dir: Path, tmp_path: Path) -> None:
    from tracer.importers import import_kineto

    files = sorted((shared_dir / "traces" / "kineto").glob("*/*.json.gz"))
    assert files
    for file in files:
        out = tmp_path / file.name.replace(".json.gz", "")
        import_kineto(file, out)
        xml = tmp_path / f"{out.name}-xml"
        xml.mkdir()
        assert_same_as_reference(out, generated_xml(out, xml))


# the tracef workers provider of test_states_on_lttng, and a pattern pairing consecutive events
TRACEF_XML = LTTNG_XML.replace("</tmfxml>", """
  <pattern id="tracef.pairs" version="1"><patternHandler>
    <action id="seg"><segment><segType segName="pair"/></segment></action>
    <fsm id="pair" multiple="true"><state id="a">
      <transition event="lttng_ust_tracef:event" target="b"/></state>
      <state id="b"><transition event="lttng_ust_tracef:event" target="done" action="seg"/></state>
      <final id="done"/></fsm></patternHandler></pattern></tmfxml>""")


@pytest.mark.slow
def test_hand_written_analyses_on_an_lttng_trace(shared_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("bt2", reason="babeltrace2's Python bindings are not installed")
    xml = tmp_path / "tracef.xml"
    xml.write_text(TRACEF_XML)
    built = assert_same_as_reference(shared_dir / "traces" / "lttng" / "ust-tracef-local", [xml])
    assert len(built.segments["tracef.pairs"]) > 1000


def _case_run(case: Path, columnar: bool) -> tuple[str, Any]:
    """("ok", intervals) or ("error", type) of the case's state provider, one engine or the other."""
    from tc_analyses.engine.columnar import run_columnar
    from tc_analyses.engine.columnar_pattern import run_columnar_pattern
    from tc_analyses.engine.events import rows_of
    from tc_analyses.engine.xml_pattern import Pattern
    from tc_analyses.errors import DfcompassError
    from tests.test_cases import load_analysis, read_events, trace_events

    if (case / "trace.json").is_file():
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            events = list(trace_events(case, Path(tmp)))
    else:
        events = list(read_events(case / "events.jsonl"))
    span = (events[0][1], max(e[1] for e in events))
    segments: list[Any] = []
    try:
        analysis = load_analysis(case / "analysis.xml")
        if isinstance(analysis, Pattern):
            found, ss = run_columnar_pattern(analysis, rows_of(events), span) if columnar else analysis.run(events)
            segments = [(s.start, s.end, s.name, sorted(s.content.items())) for s in found]
        else:
            ss = run_columnar(analysis, rows_of(events), span) if columnar else analysis.run(events)
    except DfcompassError as exc:
        return "error", type(exc).__name__
    return "ok", ({path: [(i.start, i.end, i.value) for i in intervals] for path, intervals in ss.items()}, segments)


def test_engine_cases_on_columns() -> None:
    """Every case of tests/cases that the columnar engines take gives the interpreter's state
    system and segments (or fails as it does); the rest they must refuse, not get wrong."""
    from tc_analyses.engine.columnar import NotColumnar
    from tests.test_cases import _case_dirs

    taken, refused = [], []
    for case in _case_dirs():
        try:
            got = _case_run(case, columnar=True)
        except NotColumnar:
            refused.append(case.name)
            continue
        assert got == _case_run(case, columnar=False), case.name
        taken.append(case.name)
    # the constructs columns cover (fields, queries, conditions, stacks, increments, mappings,
    # begin/end patterns...)
    assert len(taken) >= 25 and any(name.startswith("pattern-") for name in taken), (taken, refused)
    assert {"pattern-open-at-end", "pattern-abandon-overwrites"} <= set(taken)  # the history's end time
    assert {"sp-future-time", "sp-update", "pattern-stored-fields"} <= set(refused)


def test_intervals_built_in_small_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The columnar engine turns the write log into intervals a chunk of writes at a time (cut where
    an attribute ends): with chunks of a few writes, the result is still the reference's."""
    from tc_analyses.engine import columns

    monkeypatch.setattr(columns, "_CHUNK", 3)
    trace = TRACES[0]
    built = assert_same_as_reference(trace, generated_xml(trace, tmp_path))
    assert set(built.engines.values()) >= {"columns"}
