"""`dfcompass recommend-placement`: plan, report and views from a trace or a graph file; clear errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from tc_analyses.reader import read_trace

TRACE = Path(__file__).resolve().parents[1] / "data" / "traces" / "succeed" / "all-classes"


def _graph_file(tmp_path: Path, nodes: list[dict[str, Any]], edges: list[dict[str, Any]]) -> Path:
    path = tmp_path / "graph.json"
    path.write_text(json.dumps({"directed": True, "multigraph": False, "graph": {}, "nodes": nodes, "edges": edges}))
    return path


def test_trace_input_writes_plan_report_and_views(cli: Any, tmp_path: Path) -> None:
    out = tmp_path / "plan"
    result = cli("recommend-placement", str(TRACE), "--devices", "cpu,cuda:0=H100", "-o", str(out))
    assert result.exit_code == 0, result.stderr
    plan = json.loads((out / "plan.json").read_text())
    assert set(plan["assignment"].values()) <= {"cpu", "cuda:0"} and plan["tasks"] == 3
    assert plan["predicted_makespan_ns"] > 0 and plan["replay_error"] <= 0.05
    assert plan["devices"][0]["model_is_default"] is True and any("cpu" in n for n in plan["notices"])
    for moved in plan["moved"]:
        assert moved["from_device"] != moved["to_device"] and "->" in moved["reason"]
    # the predicted schedule is a readable dfcompass trace, with analyses for it, and the plan graph
    predicted = read_trace(out / "predicted")
    assert len(predicted.table("node_begin")) == 3
    threads = predicted.table("thread_info").text("name").tolist()
    assert "cpu: moved here" in threads and "cuda:0: kept here" in threads
    assert (out / "views" / "xml" / "dataflow.xml").is_file() and (out / "graph.dot").is_file()
    assert "moved nodes:" in (out / "report.txt").read_text()


def test_graph_file_input_finds_the_better_device(cli: Any, tmp_path: Path) -> None:
    nodes = [{"id": "a", "costs": {"cpu": 1000, "cuda:0": 900}, "actual_device": "cpu"},
             {"id": "b", "costs": {"cpu": 500_000, "cuda:0": 10_000}, "actual_device": "cpu"},
             {"id": "c", "costs": {"cpu": 1000, "cuda:0": 900}, "actual_device": "cpu"}]
    edges = [{"source": "a", "target": "b", "bytes": 1024}, {"source": "b", "target": "c", "bytes": 1024}]
    result = cli("recommend-placement", str(_graph_file(tmp_path, nodes, edges)), "--devices", "cpu,cuda:0=H100",
                 "-o", str(tmp_path / "out"), "--format", "json")
    assert result.exit_code == 0, result.stderr
    plan = json.loads(result.stdout)
    assert plan["assignment"]["b"] == "cuda:0"  # 50x faster there, transfers are cheap
    assert plan["speedup"] > 1.0 and plan["predicted_makespan_ns"] < plan["actual_makespan_ns"]


def test_bad_inputs_give_one_line_errors(cli: Any, tmp_path: Path) -> None:
    cyclic = _graph_file(tmp_path, [{"id": "a", "costs": {"cpu": 1}}, {"id": "b", "costs": {"cpu": 1}}],
                         [{"source": "a", "target": "b"}, {"source": "b", "target": "a"}])
    missing = tmp_path / "m"
    missing.mkdir()
    partial = tmp_path / "p.json"
    partial.write_text(json.dumps({"directed": True, "multigraph": False, "graph": {},
                                   "nodes": [{"id": "a", "costs": {"cpu": 1}}], "edges": []}))
    cases = [
        ((str(cyclic), "--devices", "cpu"), "cycle"),
        ((str(TRACE), "--devices", "cpu,cuda:0=NoSuchGPU"), "NoSuchGPU"),
        ((str(missing), "--devices", "cpu"), "metadata"),
        ((str(partial), "--devices", "cpu,cuda:0"), "no cost on cuda:0"),
    ]
    for args, needle in cases:
        result = cli("recommend-placement", *args, "-o", str(tmp_path / "out"))
        assert result.exit_code in (1, 2), (args, result.stdout)
        assert result.stderr.count("\n") == 1 and needle in result.stderr and "Traceback" not in result.stderr, args


def test_a_trace_without_steps_says_so(cli: Callable[..., Any], tmp_path: Path) -> None:
    from tracer.builder import TraceBuilder

    trace = tmp_path / "nosteps"
    with TraceBuilder(trace, clock_offset_ns=0) as b:
        cpu = b.device("cpu", 10)
        for nid, (start, end) in enumerate(((100, 200), (200, 300))):
            b.add("node_begin", "1", start, nid, "aten::mm", f"n{nid}", cpu, 1, 0)
            b.add("node_end", "1", end, nid, cpu, 1)
        b.add("tensor_edge", "1", 200, 0, 1, 1, 64, cpu, cpu)
    result = cli("recommend-placement", trace, "--devices", "cpu,cuda:0", "-o", tmp_path / "out", "--format", "json")
    assert result.exit_code == 0, result.stderr
    notices = json.loads(result.stdout)["notices"]
    assert any("no step marks" in n for n in notices)
    stepped = cli("recommend-placement", TRACE, "--devices", "cpu,cuda:0", "-o", tmp_path / "o2", "--format", "json")
    assert not any("no step marks" in n for n in json.loads(stepped.stdout)["notices"])
