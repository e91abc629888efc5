"""Table-driven cases for the headless Trace Compass XML engine (tests/cases/README.md).

Each folder under tests/cases/ is one case: a tiny event list, one analysis and the state
system (and segments) Trace Compass builds from them, worked out by hand from
../shared/docs/tracecompass-xml.md. Adding a case adds files only.

Under ``pytest --update-golden`` expected.csv / segments.csv are rewritten from the engine's
output: check the new files by hand before committing them. error.txt is never rewritten.
"""

from __future__ import annotations

import csv
import difflib
import io
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Iterator

import pytest
from lxml import etree

from tc_analyses.analyses.states import rows
from tc_analyses.engine.state_system import StateSystem
from tc_analyses.engine.xml_pattern import Pattern, Segment
from tc_analyses.engine.xml_provider import StateProvider
from tc_analyses.errors import DfcompassError

CASES = Path(__file__).resolve().parent / "cases"
ANALYSIS_TAGS = ("stateProvider", "pattern")


def _case_dirs() -> list[Path]:
    return sorted(p for p in CASES.iterdir() if (p / "analysis.xml").is_file()) if CASES.is_dir() else []


def read_events(path: Path) -> Iterator[tuple[str, int, dict[str, Any]]]:
    """events.jsonl: one {"name", "ts", "fields"} object per line, in time order."""
    last = None
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        record = json.loads(line)
        name, ts, fields = record["name"], record["ts"], record.get("fields", {})
        assert isinstance(name, str) and isinstance(ts, int) and isinstance(fields, dict), f"{path}:{number}"
        assert last is None or ts >= last, f"{path}:{number}: events must be in time order"
        last = ts
        yield name, ts, fields


def load_analysis(path: Path) -> Any:
    """The one stateProvider or pattern of an analysis.xml, compiled."""
    root = etree.parse(str(path)).getroot()
    found = [e for e in root if e.tag in ANALYSIS_TAGS]
    assert len(found) == 1, f"{path}: a case holds exactly one stateProvider or pattern"
    return StateProvider(found[0]) if found[0].tag == "stateProvider" else Pattern(found[0])


def trace_events(case: Path, tmp: Path) -> Iterator[tuple[str, int, dict[str, Any]]]:
    """trace.json: a real dfcompass CTF trace to build (clock offset, and events per stream file),
    read back the way `dfcompass states` reads it: Trace Compass's time base and event order."""
    from tc_analyses.engine.events import iter_events
    from tc_analyses.reader import read_trace
    from tracer import schema
    from tracer.builder import TraceBuilder

    spec = json.loads((case / "trace.json").read_text(encoding="utf-8"))
    with TraceBuilder(tmp / "trace", clock_offset_ns=spec["clock_offset_ns"]) as builder:
        for event in spec["events"]:
            cls = schema.BY_SHORT[event["class"]]
            builder.add(cls.short, event["stream"], event["ts"], *(event["fields"][f] for f in cls.field_names))
    return iter_events(read_trace(tmp / "trace"))


def run_case(case: Path) -> tuple[str, str | None]:
    """(states CSV, segments CSV or None) of the case's analysis over its events (events.jsonl), or
    over the trace its trace.json builds."""
    import tempfile

    analysis = load_analysis(case / "analysis.xml")
    if (case / "trace.json").is_file():
        with tempfile.TemporaryDirectory() as tmp:
            events: Iterator[tuple[str, int, dict[str, Any]]] = iter(list(trace_events(case, Path(tmp))))
    else:
        events = read_events(case / "events.jsonl")
    segments: list[Segment] | None = None
    if isinstance(analysis, Pattern):
        segments, ss = analysis.run(events)
    else:
        ss = analysis.run(events)
    return states_csv({analysis.id: ss}), None if segments is None else segments_csv(segments)


def states_csv(systems: dict[str, StateSystem]) -> str:
    """The rows ``dfcompass states --csv`` writes (the same ``rows()``): path,start,end,value,
    attributes in path order, null values empty, an empty string as two quotes. Lines end with \n here (the CLI's csv module
    writes \r\n); the comparison ignores that difference."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["path", "start", "end", "value"])
    for row in rows(SimpleNamespace(systems=systems)):  # type: ignore[arg-type]  # rows() reads .systems only
        writer.writerow([row.path, row.start, row.end, "" if row.value is None else row.value or _EMPTY])
    return out.getvalue().replace(_EMPTY, '""')  # as the CLI writes an empty string, apart from null


_EMPTY = "\ue000empty\ue000"  # marks an empty string for the csv module, which writes it as null


def segments_csv(segments: list[Segment]) -> str:
    """name,start,end,content-json of every segment, in the order the pattern emitted them."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["name", "start", "end", "content-json"])
    for seg in segments:
        writer.writerow([seg.name, seg.start, seg.end, json.dumps(seg.content, sort_keys=True, separators=(",", ":"))])
    return out.getvalue()


def _compare(golden: Path, actual: str, update: bool) -> str | None:
    """None when `golden` holds `actual`; else a diff, with the new text in <golden>.actual."""
    stale = golden.with_name(golden.name + ".actual")
    if update:
        golden.write_text(actual, encoding="utf-8", newline="")
        stale.unlink(missing_ok=True)
        return None
    expected = golden.read_text(encoding="utf-8") if golden.is_file() else None
    if expected is not None and expected.replace("\r\n", "\n") == actual.replace("\r\n", "\n"):
        stale.unlink(missing_ok=True)
        return None
    stale.write_text(actual, encoding="utf-8", newline="")
    if expected is None:
        return f"{golden} is missing (the engine's output is in {stale.name})"
    diff = difflib.unified_diff(expected.splitlines(), actual.splitlines(), f"{golden.name} (expected)",
                                f"{stale.name} (actual)", lineterm="")
    return f"{golden} differs from the engine's output ({stale}):\n" + "\n".join(diff)


@pytest.mark.parametrize("case", _case_dirs(), ids=lambda p: p.name)
def test_case(case: Path, update_golden: bool) -> None:
    error = case / "error.txt"
    if error.is_file():
        expected_error = error.read_text(encoding="utf-8").strip()
        assert expected_error, f"{error} is empty"
        with pytest.raises(DfcompassError) as info:
            run_case(case)
        message = str(info.value)
        assert expected_error in message, f"expected an error containing {expected_error!r}, got {message!r}"
        assert "\n" not in message.strip(), "analysis errors are one line"
        return
    states, segments = run_case(case)
    problems = [_compare(case / "expected.csv", states, update_golden)]
    if segments is not None:
        problems.append(_compare(case / "segments.csv", segments, update_golden))
    else:
        assert not (case / "segments.csv").exists(), "segments.csv is for pattern cases"
    failures = [p for p in problems if p]
    if failures:
        pytest.fail("\n\n".join(failures), pytrace=False)


def test_there_are_cases() -> None:
    assert len(_case_dirs()) >= 30
    for case in CASES.iterdir():
        if case.is_dir():
            assert (case / "analysis.xml").is_file(), case
            assert (case / "events.jsonl").is_file() != (case / "trace.json").is_file(), case  # one of the two


@pytest.mark.parametrize("case", _case_dirs(), ids=lambda p: p.name)
def test_case_analysis_is_valid_for_trace_compass(case: Path, tc_xsd: Path) -> None:
    """Every case's XML passes Trace Compass's own schema, so it could be imported as is."""
    schema = etree.XMLSchema(etree.parse(str(tc_xsd)))
    doc = etree.parse(str(case / "analysis.xml"))
    assert schema.validate(doc), "\n".join(f"line {e.line}: {e.message}" for e in schema.error_log)


def test_the_csv_is_the_one_dfcompass_states_writes(cli: Any, tmp_path: Path) -> None:
    """states_csv() writes the rows `dfcompass states --csv` writes, on a real trace."""
    from tc_analyses.engine import build

    trace = Path(__file__).resolve().parent / "data" / "traces" / "succeed" / "all-classes"
    xml = CASES / "sp-lost-events" / "analysis.xml"  # counts every event by name
    out = tmp_path / "states.csv"
    result = cli("states", trace, "--xml", xml, "--csv", out)
    assert result.exit_code == 0, result.stderr
    lines = out.read_text(encoding="utf-8").replace("\r\n", "\n").splitlines(keepends=True)
    # The CLI's first column names the analysis: one analysis here, the same id on every row.
    assert lines[0] == "analysis,path,start,end,value\n"
    analysis_id = lines[1].split(",", 1)[0]
    assert all(line.startswith(analysis_id + ",") for line in lines[1:])
    written = "path,start,end,value\n" + "".join(line.split(",", 1)[1] for line in lines[1:])
    assert written == states_csv(build(trace, [xml]).systems)
    assert written.count("\n") > 10
