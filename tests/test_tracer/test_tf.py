"""The TensorFlow source: real TensorFlow runs (in subprocesses), checked against their GraphDefs.

TensorFlow never loads in the test process: each program records in a child process and dumps
its reference graph as JSON beside the trace.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

import pytest

from tc_analyses.reader import read_trace
from tests.helpers import check_packets
from tracer.fork_chain import wait_for_converters

pytestmark = [pytest.mark.tf, pytest.mark.slow]
if importlib.util.find_spec("tensorflow") is None:
    pytest.skip("tensorflow is not installed (pip install -e '.[tf]')", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]
PROGRAMS = ROOT / "tests" / "tf_programs"


def _run(*command: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})}
    done = subprocess.run([str(c) for c in command], env=environment, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


@pytest.fixture(scope="module")
def cnn(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    folder = tmp_path_factory.mktemp("tf-cnn")
    _run(sys.executable, PROGRAMS / "record_cnn.py", folder / "trace", folder / "graphs.json")
    return folder / "trace", json.loads((folder / "graphs.json").read_text())


def _nodes(trace: Path) -> dict[int, dict[str, Any]]:
    t = read_trace(trace)
    begin = t.table("node_begin")
    return {int(i): {"op": op, "name": name, "step": int(step), "device": int(dev)}
            for i, op, name, step, dev in zip(begin["node_id"], begin.text("op"), begin.text("name"), begin["step"],
                                               begin["device"])}


def _edges(trace: Path) -> list[tuple[int, int, int, int]]:
    e = read_trace(trace).table("tensor_edge")
    return list(zip(*(e[k].tolist() for k in ("producer", "consumer", "tensor_id", "bytes"))))


def _links(trace: Path) -> set[tuple[int, int]]:
    links = read_trace(trace).table("node_link")
    return {(int(s), int(t)) for s, t, k in zip(links["source"], links["target"], links.text("kind")) if k == "control"}


def _graph_of(names: set[str], graphs: list[dict[str, Any]]) -> dict[str, Any]:
    return max(graphs, key=lambda g: (len(names & g.keys()), -len(g)))


def test_cnn_training_edges_are_the_graphdefs_edges(cnn: tuple[Path, dict[str, Any]]) -> None:
    """Per training step (one run of Keras's train function): every recorded edge is an input in the
    GraphDef that ran, and every GraphDef input between two nodes that ran is recorded."""
    trace, reference = cnn
    nodes = _nodes(trace)
    edges = _edges(trace)
    links = _links(trace)
    steps = sorted({n["step"] for n in nodes.values() if n["step"] != 0xFFFFFFFF})
    assert steps == [0, 1, 2, 3, 4]
    checked = 0
    for step in steps[2:]:  # 0-1: eager inference; 2-4: model.fit's steps
        # the train function's run (tf.data's own small functions run in the step too)
        graph = _graph_of({n["name"] for n in nodes.values() if n["step"] == step
                           and n["name"].startswith("StatefulPartitionedCall/")}, reference["graphs"])
        in_step = {i: n for i, n in nodes.items() if n["step"] == step and n["name"] in graph}
        names = {n["name"]: i for i, n in in_step.items()}
        assert len(names) == len(in_step) > 40, "a node ran twice in one training step"
        expected = set()
        for name, consumer in names.items():
            for text in graph.get(name, {"inputs": []})["inputs"]:
                source = text.lstrip("^").split(":")[0]
                if source in names:
                    expected.add((names[source], consumer, text.startswith("^")))
        recorded = {(p, c, (p, c) in links) for p, c, _, _ in edges if c in in_step}
        data_pairs = {(p, c) for p, c, control in expected if not control}
        # A control input already implied by a data input between the same pair adds no edge.
        expected = {(p, c, control) for p, c, control in expected if not (control and (p, c) in data_pairs)}
        assert recorded == expected, (step, sorted(recorded ^ expected)[:10])
        checked += len(expected)
    assert checked >= 3 * 50  # the train function has well over 50 edges per step


def test_one_edge_per_producer_consumer_and_tensor(cnn: tuple[Path, dict[str, Any]]) -> None:
    trace, _ = cnn
    edges = _edges(trace)
    data = [(p, c, t) for p, c, t, _ in edges if t]
    assert len(data) == len(set(data))
    assert sum(1 for *_, nbytes in edges if nbytes > 0) >= 0.8 * len(data)  # static shapes give most sizes


def test_edge_bytes_are_the_tensor_sizes(cnn: tuple[Path, dict[str, Any]]) -> None:
    """The first conv's fused output: batch 16 x 26 x 26 x 8 float32."""
    trace, _ = cnn
    nodes = _nodes(trace)
    sizes = {nbytes for p, _, _, nbytes in _edges(trace) if nodes[p]["name"].endswith("conv1_1/Relu")}
    assert sizes == {16 * 26 * 26 * 8 * 4}


def test_eager_ops_are_nodes_inside_their_dispatch(cnn: tuple[Path, dict[str, Any]], cli: Callable[..., Any]) -> None:
    trace, _ = cnn
    nodes = _nodes(trace)
    eager = [n for n in nodes.values() if n["step"] in (0, 1)]
    assert {"Conv2D", "MaxPool", "MatMul", "Relu"} <= {n["op"] for n in eager}
    t = read_trace(trace)
    begin, end = t.table("annotation_begin"), t.table("annotation_end")
    span = dict(zip(end["annotation_id"].tolist(), end["timestamp"].tolist()))
    dispatch = sum(span[i] - s for i, s, name in zip(begin["annotation_id"].tolist(), begin["timestamp"].tolist(),
                                                   begin.text("name")) if name.startswith("tf.eager "))
    result = cli("eager-overhead", trace, "--include-last-step", "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)["result"]
    # framework + kernel time is the dispatches' time (all matched: each dispatch holds its kernel)
    assert data["unmatched"] == 0 and data["executions"] > 40
    assert data["host_ns"] + data["kernel_ns"] == dispatch
    assert data["steps"][0]["step"] == 0 and data["steps"][0]["ops"] > 5


def test_tf_trace_through_the_downstream_commands(cnn: tuple[Path, dict[str, Any]], cli: Callable[..., Any],
                                                  tmp_path: Path, tc_xsd: Path) -> None:
    trace, _ = cnn
    built = cli("build-analyses", trace, "-o", tmp_path / "xml", "--validate", "--xsd", tc_xsd)
    assert built.exit_code == 0, built.output
    analyzed = cli("analyze", trace, "--format", "json")
    assert analyzed.exit_code == 0, analyzed.output
    sections = json.loads(analyzed.stdout)
    assert sections["top_nodes"], "no nodes in the summary"
    placed = cli("recommend-placement", trace, "--devices", "cpu,cuda:0=H100", "-o", tmp_path / "placement",
                 "--step-kind", "1")
    assert placed.exit_code == 0, placed.output
    assert (tmp_path / "placement" / "report.txt").is_file()


def test_control_edges_against_the_concrete_function(tmp_path: Path) -> None:
    """Grappler off: the graph that ran is the concrete function's, dumped by the program itself."""
    _run(sys.executable, PROGRAMS / "control_edges.py", tmp_path / "trace", tmp_path / "graph.json")
    graph = json.loads((tmp_path / "graph.json").read_text())
    assert "^MatMul" in graph["Square"]["inputs"]
    nodes = _nodes(tmp_path / "trace")
    links = _links(tmp_path / "trace")
    per_step: dict[int, dict[str, int]] = defaultdict(dict)
    for i, n in nodes.items():
        per_step[n["step"]][n["name"]] = i
    assert sorted(per_step) == [0, 1, 2]
    for names in per_step.values():
        assert {"MatMul", "Square", "Relu", "add"} <= set(names)
        expected = {(names[t.lstrip("^").split(":")[0]], names[c]) for c in names
                    for t in graph.get(c, {"inputs": []})["inputs"] if t.lstrip("^").split(":")[0] in names}
        recorded = {(p, c) for p, c, _, _ in _edges(tmp_path / "trace") if c in names.values()}
        assert recorded == expected
        assert (names["MatMul"], names["Square"]) in links


def test_record_starts_the_tf_recorder_on_import(tmp_path: Path) -> None:
    _run(sys.executable, "-m", "tc_analyses.cli", "record", "-o", tmp_path / "job", "--", "python", "-m",
         "tracer.workloads.tf_models", "--steps-train", "2", "--steps-infer", "1")
    traces = [p for p in (tmp_path / "job").iterdir() if p.is_dir()]
    assert len(traces) == 1
    nodes = _nodes(traces[0])
    assert any(n["name"].startswith("StatefulPartitionedCall/") for n in nodes.values())
    assert _edges(traces[0])


def test_record_makes_each_keras_batch_a_step(tmp_path: Path) -> None:
    """A program that marks no steps: under record, each training batch is one, its nodes in it."""
    done = _run(sys.executable, "-m", "tc_analyses.cli", "record", "-o", tmp_path / "job", "--", "python",
                PROGRAMS / "plain_fit.py")
    [cost] = [line for line in done.stderr.splitlines() if "recording took" in line]
    assert "over 6 steps" in cost  # the recorder's own cost line, per Keras batch
    trace = next(p for p in (tmp_path / "job").iterdir() if p.is_dir())
    assert read_trace(trace).table("step_end")["step"].tolist() == list(range(6))
    per_step = _per_step(trace)
    assert all(per_step[step][1] for step in range(6))  # each batch's function run, with its edges
    trained = [[name for name in per_step[step][0] if name.startswith("StatefulPartitionedCall/")] for step in range(6)]
    assert trained[0] and all(names == trained[0] for names in trained)  # tf.data's prefetching varies


@pytest.mark.parametrize("mode", ["refresh", "keep", "late"])
def test_functions_that_ran_before_recording(tmp_path: Path, mode: str) -> None:
    """The runtime gives a function's graphs when it instantiates it: by default the recorder has
    functions that ran before it instantiated again; with refresh_graphs=False they keep no edges.
    The tensors' bytes come from the function's graph, registered when it was made or, when the
    recorder was imported after that ("late"), found on the heap."""
    done = _run(sys.executable, PROGRAMS / "warm_function.py", tmp_path / "trace", mode)
    if mode != "keep":
        assert f"heap scans: {int(mode == 'late')}" in done.stdout
    nodes = _nodes(tmp_path / "trace")
    names = {n["name"]: i for i, n in nodes.items()}
    assert {"MatMul", "Relu", "mul"} <= set(names)
    edges = {(p, c): nbytes for p, c, _, nbytes in _edges(tmp_path / "trace")}
    if mode == "keep":
        assert edges == {}
    else:  # 16 x 16 float32 each
        assert edges == {(names["MatMul"], names["Relu"]): 1024, (names["Relu"], names["mul"]): 1024}


def test_record_lets_the_program_configure_tf_and_run_its_own_profiler(tmp_path: Path) -> None:
    done = _run(sys.executable, "-m", "tc_analyses.cli", "record", "-o", tmp_path / "job", "--", "python",
                PROGRAMS / "configures_and_profiles.py")
    assert "dfcompass records TensorFlow up to here" in done.stderr
    traces = [p for p in (tmp_path / "job").iterdir() if p.is_dir()]
    nodes = _nodes(traces[0])
    assert sum(1 for n in nodes.values() if n["name"] == "MatMul") == 3  # the calls before the program's profiler
    assert _edges(traces[0])


def test_while_loop_edges_stay_in_their_iteration(tmp_path: Path) -> None:
    _run(sys.executable, PROGRAMS / "while_loop.py", tmp_path / "trace")
    t = read_trace(tmp_path / "trace")
    begin, end = t.table("node_begin"), t.table("node_end")
    names = dict(zip(begin["node_id"].tolist(), begin.text("name")))
    starts = dict(zip(begin["node_id"].tolist(), begin["timestamp"].tolist()))
    ends = dict(zip(end["node_id"].tolist(), end["timestamp"].tolist()))
    edges = _edges(tmp_path / "trace")
    assert sum(1 for n in names.values() if n.endswith("MatMul")) == 6
    into_mul = [(p, c) for p, c, _, _ in edges if names[c].endswith("/mul") and names[p].endswith("MatMul")]
    assert len(into_mul) == 6  # each iteration's mul gets one MatMul
    # Its own iteration's, when both ran inside their executor frame (the frame gives iter_num); an
    # op handed to another pool thread has no frame, and takes the last MatMul that ended before it.
    assert len({p for p, _ in into_mul}) >= 4
    assert all(ends[p] <= starts[c] for p, c, _, _ in edges)  # no edge points back in time


def test_two_windows_on_one_session_keep_their_dispatches_apart(tmp_path: Path, cli: Callable[..., Any]) -> None:
    _run(sys.executable, PROGRAMS / "two_windows.py", tmp_path / "trace")
    begin = read_trace(tmp_path / "trace").table("annotation_begin")
    assert len(set(begin["annotation_id"].tolist())) == len(begin) == 6
    result = cli("eager-overhead", tmp_path / "trace", "--format", "json")
    data = json.loads(result.stdout)["result"]
    assert data["executions"] == 6 and data["unmatched"] == 0


def _per_step(trace: Path) -> dict[int, tuple[list[str], list[tuple[str, str, int]]]]:
    """Each step's node names and its edges by (producer name, consumer name, bytes), sorted."""
    nodes = _nodes(trace)
    steps: dict[int, tuple[list[str], list[tuple[str, str, int]]]] = defaultdict(lambda: ([], []))
    for node in nodes.values():
        steps[node["step"]][0].append(node["name"])
    for producer, consumer, _, nbytes in _edges(trace):
        steps[nodes[consumer]["step"]][1].append((nodes[producer]["name"], nodes[consumer]["name"], nbytes))
    return {step: (sorted(names), sorted(edges)) for step, (names, edges) in steps.items()}


@pytest.mark.parametrize("handoff", ["0", "1"])
def test_windows_cut_at_step_ends_record_what_one_profile_records(tmp_path: Path, handoff: str) -> None:
    """A window per step (the profiler restarted at each step end), converted here or in fork
    children, against one profile for the run: the same nodes and edges in every step; a function's
    graph, reported once by the runtime, still gives edges in later windows."""
    counts = {mode: json.loads(_run(sys.executable, PROGRAMS / "windows.py", tmp_path / mode, mode,
                                    env={"DFCOMPASS_HANDOFF": handoff}).stdout) for mode in ("each", "one")}
    assert counts["each"]["windows"] == 7 and counts["one"]["windows"] == 1  # six cuts and the stop
    assert counts["each"]["handed_off"] == (6 if handoff == "1" else 0) and counts["each"]["lost"] == 0
    assert counts["each"]["edges"] == counts["one"]["edges"] > 0 and counts["each"]["unmatched_runs"] == 0
    each, one = _per_step(tmp_path / "each"), _per_step(tmp_path / "one")
    assert sorted(each) == list(range(6)) and each == one
    assert all(edges for _, edges in each.values())
    ids = read_trace(tmp_path / "each").table("node_begin")["node_id"].tolist()
    assert len(ids) == len(set(ids))  # children number from blocks shared with the program


@pytest.mark.parametrize("handoff", ["0", "1"])
def test_a_killed_program_keeps_its_finished_windows(tmp_path: Path, handoff: str) -> None:
    """SIGKILL in the fifth step: the four steps before it are on disk, readable without repair,
    also when their windows were still converting in children (which outlive the program), beside
    a CPU burner (bounded: one core for at most 60 s)."""
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "TF_CPP_MIN_LOG_LEVEL": "2", "DFCOMPASS_HANDOFF": handoff}
    spin = "import time\nend = time.monotonic() + 60\nwhile time.monotonic() < end: pass"
    burner = subprocess.Popen([sys.executable, "-c", spin])
    try:
        done = subprocess.run([sys.executable, str(PROGRAMS / "windows.py"), str(tmp_path / "kill"), "kill"],
                              env=environment, capture_output=True, text=True, timeout=300)
        assert done.returncode == -9, done.stderr[-2000:]
        assert wait_for_converters(tmp_path / "kill")
    finally:
        burner.kill()
        burner.wait()
    check_packets(tmp_path / "kill")  # whole packets only: Trace Compass opens it without repair
    if shutil.which("babeltrace2") is not None:
        subprocess.run(["babeltrace2", "--output-format=dummy", str(tmp_path / "kill")], check=True,
                       capture_output=True)
    _run(sys.executable, PROGRAMS / "windows.py", tmp_path / "one", "one")
    kept, whole = _per_step(tmp_path / "kill"), _per_step(tmp_path / "one")
    assert sorted(kept) == [0, 1, 2, 3]
    assert all(kept[step] == whole[step] for step in kept)


@pytest.mark.parametrize("refresh", [True, False])
def test_every_recording_of_a_warm_function_traces_its_cheap_ops(tmp_path: Path, refresh: bool) -> None:
    """Once a function has run without TF's profiler, TF's executor stops tracing its cheap ops; each
    recording clears the kernel cache at its start, so the second of two recordings (with untraced
    calls before each) holds every op and edge of the first. Without the clear (refresh_graphs=False)
    the edges are lost, and the second recording loses the ops too."""
    _run(sys.executable, PROGRAMS / "repeated_recordings.py", tmp_path, "refresh" if refresh else "keep")
    chain = [("ReadVariableOp", "MatMul"), ("MatMul", "Relu"), ("Relu", "mul"), ("mul", "add")]
    for trace in ("first", "second"):
        nodes = _nodes(tmp_path / trace)
        per_name = defaultdict(int)
        for node in nodes.values():
            per_name[node["name"].rsplit("/", 1)[-1]] += 1
        edges = [(nodes[p]["name"].rsplit("/", 1)[-1], nodes[c]["name"].rsplit("/", 1)[-1])
                 for p, c, _, _ in _edges(tmp_path / trace)]
        if refresh:
            assert per_name == {"ReadVariableOp": 3, "MatMul": 3, "Relu": 3, "mul": 3, "add": 3}, (trace, per_name)
            assert sorted(edges) == sorted(chain * 3), trace
        else:
            assert edges == []
            if trace == "second":  # TF 2.21 traces none of them; fewer than all is the point
                assert sum(per_name.values()) < 15
