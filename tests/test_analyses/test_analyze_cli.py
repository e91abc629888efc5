"""`dfcompass analyze` and `dfcompass states` on the committed all-classes trace (values known by construction)."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from tc_analyses.export.tracecompass import render_xml
from tc_analyses.reader import read_trace

TRACE = Path(__file__).resolve().parents[1] / "data" / "traces" / "succeed" / "all-classes"
SPAN = 32_003  # first event at 998 ns, last at 33_000 ns


def test_analyze_json_summary(cli: Any) -> None:
    result = cli("analyze", str(TRACE), "--format", "json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["span_ns"] == SPAN and data["lost_events"] == 0
    busy = {(b["device"], b["queue"]): b for b in data["busy"]}
    # the GPU queue runs memcpy (300 ns), memset (50 ns) and the kernel (1000 ns) in each of 3 steps
    assert busy[("cuda:0", "7")]["busy_ns"] == 3 * 1_350 == busy[("cuda:0", "")]["busy_ns"]
    assert busy[("cpu", "")]["busy_ns"] == 3 * 800  # the loader's read nodes
    assert busy[("cpu", "")]["percent"] == round(100 * 2_400 / SPAN, 3)
    top = {n["op"]: n for n in data["top_nodes"]}
    assert top["read"] == {"op": "read", "count": 3, "total_ns": 2_400, "max_ns": 800}
    assert data["top_nodes"][0]["op"] == "read"
    assert data["memory_peak"] == {"cpu": 12_288}


def test_analyze_text_has_every_section(cli: Any) -> None:
    result = cli("analyze", str(TRACE))
    assert result.exit_code == 0, result.stderr
    for heading in ("busy (share of the time span):", "top nodes by total time:", "memory peak per device:",
                    "lost events: 0"):
        assert heading in result.stdout


def test_states_csv_and_point_query(cli: Any, tmp_path: Path) -> None:
    xml = tmp_path / "api.xml"
    xml.write_bytes(render_xml()["api.xml"])
    out = tmp_path / "states.csv"
    result = cli("states", str(TRACE), "--xml", str(xml), "--path", "Threads/100/API/*", "--csv", str(out))
    assert result.exit_code == 0, result.stderr
    with open(out, newline="") as f:
        table = [row[1:] for row in csv.reader(f)]  # the first column names the analysis
    assert table[0] == ["path", "start", "end", "value"]
    # Times in Trace Compass's time base: the clock values plus the CTF clock offset.
    offset = read_trace(TRACE).metadata.clock_offset_ns
    first_calls = [(r[0], int(r[1]) - offset, int(r[2]) - offset, r[3]) for r in table[1:] if r[3]][:2]
    assert first_calls == [("Threads/100/API/1", 11010, 11049, "cudaMemcpyAsync"),
                           ("Threads/100/API/1", 11110, 11119, "cudaMemsetAsync")]
    assert any(r[3] == "" for r in table[1:])  # null intervals are empty cells
    at = cli("states", str(TRACE), "--xml", str(xml), "--path", "Threads/100/API/1", "--at", str(11130 + offset))
    assert at.exit_code == 0 and "cudaLaunchKernel" in at.stdout and len(at.stdout.splitlines()) == 1


def test_bad_xml_and_mismatched_trace_give_one_line_errors(cli: Any, tmp_path: Path) -> None:
    broken = tmp_path / "broken.xml"
    broken.write_text('<tmfxml><stateProvider id="x" version="1"><eventHandler eventName="e"><stateChange>'
                      '<stateAttribute type="location" value="nowhere"/><stateValue type="null"/>'
                      '</stateChange></eventHandler></stateProvider></tmfxml>')
    result = cli("states", str(TRACE), "--xml", str(broken))
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1 and "broken.xml:1" in result.stderr and "unknown location 'nowhere'" in result.stderr
    other = tmp_path / "other.xml"
    other.write_text('<tmfxml><stateProvider id="y" version="1"><eventHandler eventName="sched_switch"><stateChange>'
                     '<stateAttribute type="constant" value="a"/><stateValue type="long" value="1"/>'
                     '</stateChange></eventHandler></stateProvider></tmfxml>')
    result = cli("analyze", str(TRACE), "--xml", str(other))
    assert result.exit_code == 1 and f"none of the analyses of {other} found events they handle" in result.stderr


def test_an_analysis_whose_values_are_all_null_still_ran(cli: Any, tmp_path: Path) -> None:
    """It handled events: Trace Compass shows its attribute, with no state, and so does `states`
    (before: "none of the analyses found events they handle", exit 1; issue 37, item 9)."""
    xml = tmp_path / "nulls.xml"
    xml.write_text('<tmfxml><stateProvider id="n" version="1"><eventHandler eventName="dfc:kernel_begin">'
                   '<stateChange><stateAttribute type="constant" value="k"/><stateValue type="null"/>'
                   '</stateChange></eventHandler></stateProvider></tmfxml>')
    out = tmp_path / "states.csv"
    result = cli("states", str(TRACE), "--xml", str(xml), "--csv", str(out))
    assert result.exit_code == 0, result.stderr
    with open(out, newline="") as f:
        rows = [row for row in csv.reader(f)][1:]
    assert rows and {row[1] for row in rows} == {"k"} and {row[4] for row in rows} == {""}


def test_schema_invalid_xml_names_file_and_line(cli: Any, tmp_path: Path, tc_xsd: Path) -> None:
    bad = tmp_path / "bad.xml"
    bad.write_text('<tmfxml>\n<stateProvider id="x">\n<eventHandler eventName="e"><stateChange>'
                   '<stateAttribute type="constant" value="a"/><stateValue type="null"/></stateChange>'
                   '</eventHandler></stateProvider></tmfxml>')  # the required version is missing
    result = cli("states", str(TRACE), "--xml", str(bad), "--xsd", str(tc_xsd))
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and f"{bad}:2:" in result.stderr and "version" in result.stderr
