"""Inputs that would eat the machine or hang it (issue 37, items 2, 3 and 6): a metadata file that is
/dev/zero, a gzip bomb of a plan, JSON nested 200,000 deep, a long word in a metadata clock block.
Each gives one line naming the file, in bounded time and memory."""

from __future__ import annotations

import gzip
import re
import json
from pathlib import Path
from typing import Any

import pytest

import tracer.graph_program as graph_program
from tc_analyses.reader.metadata import read_metadata
from tracer.bounded_io import TooLarge, load_json, read_text
from tracer.graph_program import Plan, PlanError

DEEP = "[" * 200_000 + "]" * 200_000
ALL_CLASSES = Path(__file__).resolve().parents[1] / "data" / "traces" / "succeed" / "all-classes"


def _copy_trace(tmp_path: Path) -> Path:
    trace = tmp_path / "trace"
    trace.mkdir()
    for part in ALL_CLASSES.iterdir():
        (trace / part.name).write_bytes(part.read_bytes())
    return trace


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero on this system")
def test_a_metadata_file_that_never_ends_is_refused_in_one_line(tmp_path: Path, cli: Any) -> None:
    trace = _copy_trace(tmp_path)
    (trace / "metadata").unlink()
    (trace / "metadata").symlink_to("/dev/zero")  # before: read whole, 17.9 GB and the OOM killer
    done = cli("info", str(trace))
    assert done.exit_code == 1
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"dfcompass: error: {trace / 'metadata'}: ") and "over 64 MiB" in line


def test_a_long_word_in_a_clock_block_is_read_in_linear_time(tmp_path: Path) -> None:
    """`(\\w+)\\s*=` tried at every position of a 200,000-letter word backtracks 2e10 steps (the
    fuzzer's `info` ran past 300 s); anchored at a word's start it is one pass."""
    trace = tmp_path / "t"
    trace.mkdir()
    (trace / "metadata").write_text("/* CTF 1.8 */\nclock {\n\tfreq = 1000;\n\t" + "a" * 200_000 + "\n};\n")
    assert read_metadata(trace).clock_freq == 1000


def test_a_plan_that_is_a_gzip_bomb_stops_at_the_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(graph_program, "PLAN_LIMIT", 1 << 20)
    bomb = tmp_path / "plan.json.gz"
    bomb.write_bytes(gzip.compress(b'{"schedule": [' + b" " * (8 << 20) + b"]}"))  # 8 MiB from 8 KiB
    with pytest.raises(PlanError, match=r"plan\.json\.gz: .*a plan \(inflated\) over 1 MiB"):
        Plan.load(bomb)


def test_json_nested_200000_deep_is_malformed_json_not_a_crash(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(DEEP)
    with pytest.raises(PlanError, match="nested deeper than dfcompass reads"):
        Plan.load(plan)
    with pytest.raises(json.JSONDecodeError):
        load_json(plan, 1 << 20, "a plan")


def test_a_deep_graph_file_is_one_line(tmp_path: Path, cli: Any) -> None:
    graph = tmp_path / "graph.json"
    graph.write_text('{"directed": true, "nodes": ' + DEEP + "}")
    done = cli("recommend-placement", str(graph), "--devices", "cpu", "-o", str(tmp_path / "out"))
    assert done.exit_code in (1, 2)
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"dfcompass: error: {graph}: ") and "internal error" not in line


def test_gzip_members_and_damage(tmp_path: Path) -> None:
    two = tmp_path / "two.gz"
    two.write_bytes(gzip.compress(b'{"a": ') + gzip.compress(b"1}"))  # concatenated members read as one
    assert load_json(two, 1 << 20, "a plan") == {"a": 1}
    cut = tmp_path / "cut.gz"
    cut.write_bytes(gzip.compress(b'{"a": 1}' * 1000)[:40])
    with pytest.raises(OSError, match="truncated"):
        read_text(cut, 1 << 20, "a plan")
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (2 << 20))
    with pytest.raises(TooLarge) as raised:
        read_text(big, 1 << 20, "a plan")
    assert raised.value.filename == str(big)


@pytest.mark.parametrize("value", ["NaN", "Infinity", "1e308", str(2**200)])
def test_a_graph_cost_that_is_no_measurement_is_one_line(tmp_path: Path, cli: Any, value: str) -> None:
    """JSON Schema's `minimum` passes NaN, and a cost of 1e308 or 2^200 ns is no measurement: before,
    NaN and infinity ended in an internal error (int() of them), 2^200 in a plan of 10^51 years."""
    graph = tmp_path / "graph.json"
    graph.write_text('{"directed": true, "multigraph": false, "graph": {}, "nodes": ['
                     f'{{"id": "a", "costs": {{"cpu": {value}, "cuda:0": 100}}}}, '
                     '{"id": "b", "costs": {"cpu": 10, "cuda:0": 100}}], '
                     '"edges": [{"source": "a", "target": "b", "bytes": 100}]}')
    done = cli("recommend-placement", str(graph), "--devices", "cpu,cuda:0", "-o", str(tmp_path / "out"))
    assert done.exit_code == 1
    assert done.stderr.strip().splitlines() == [
        f"dfcompass: error: {graph}: node 'a': cost on cpu: {json.loads(value)!r} is not a number from 0 to 2^53"]


@pytest.mark.parametrize(("field", "value", "problem"), [
    ("device", "cpu:0/../../x", "device 'cpu:0/../../x' is not [host:]cpu or [host:]cuda:N"),
    ("device", "cpu:-1", "device 'cpu:-1' is not [host:]cpu or [host:]cuda:N"),
    ("start_ns", float("nan"), "start_ns nan is not a whole number of ns"),
    ("start_ns", "10", "start_ns '10' is not a whole number of ns"),
])
def test_a_plan_row_that_devices_would_refuse_is_refused_before_any_run(tmp_path: Path, field: str, value: Any,
                                                                        problem: str) -> None:
    """`--devices` refuses `cpu:-1` and path-like names; a plan handed to `verify` gave them to the
    program, and a NaN or string start was refused only after the whole re-run."""
    row = {"node": "mm", "op": "aten::mm", "device": "cuda:0", "start_ns": 0, "end_ns": 5, field: value}
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"schedule": [{"node": "add", "device": "cpu", "start_ns": 0, "end_ns": 1}, row]}))
    with pytest.raises(PlanError, match=re.escape(f"schedule[1]: {problem}")):
        Plan.load(plan)
    row[field] = {"device": "hostB:cuda:1", "start_ns": 10}[field]
    plan.write_text(json.dumps({"schedule": [row]}))
    assert Plan.load(plan).assignment == {"mm": row["device"]}
