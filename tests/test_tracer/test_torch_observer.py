"""The native op observer records what torch.profiler does, for the recorder's conversion.

The same deterministic program (a transformer training step with backward and Adam, an embedding,
indexing with a tensor) is recorded once per engine: the two traces must hold the same nodes (op, scope, step, order), the same allocations and
frees (sizes), and the same tensor edges (producer, consumer, tensor, bytes). Only addresses and
times differ between two runs, and the observer describes the tensors inside a list of optional
tensors (``aten::index``'s indices) that the profiler leaves out. Sparse tensors are left out of the
comparison: their edges follow TensorImpl addresses, which differ from run to run under either
engine (two profiler runs disagree there too); a sparse program is checked on its own.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytestmark = pytest.mark.torch
torch = pytest.importorskip("torch")

from tc_analyses.reader.fast import read_trace  # noqa: E402
from tc_analyses.reader.job import job_traces, single_trace  # noqa: E402
from tests.helpers import dfcompass_cmd, subprocess_env, transformer_training_step  # noqa: E402
from tracer import native  # noqa: E402
from tracer.torch_source import TorchRecorder  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
_TEXT = ("op", "name", "shapes", "dtypes")


@pytest.fixture(scope="module", autouse=True)
def _built() -> None:
    if native.op_observer(torch) is None:
        pytest.skip(f"the op observer is not built in {native.native_dir()} for this torch "
                    "(python -m tracer.native build; make setup does it)")


def _record(path: Path, engine: str, handoff: str, monkeypatch: pytest.MonkeyPatch, sparse: bool = False) -> Any:
    monkeypatch.setenv("DFCOMPASS_HANDOFF", handoff)
    step = transformer_training_step(torch, sparse)
    gc.collect()
    gc.disable()  # a collection frees tensors of reference cycles at a moment no two runs share
    try:
        with TorchRecorder(str(path), engine=engine) as recorder:
            assert recorder.engine == engine
            for _ in range(4):
                step()
                recorder.step()
    finally:
        gc.enable()
    assert recorder.windows_lost == 0
    return read_trace(path)


def _column(table: Any, name: str) -> np.ndarray:
    return np.asarray(table.text(name) if name in _TEXT else table[name])


def _edges(trace: Any) -> set[tuple[int, ...]]:
    edges = trace.table("tensor_edge")
    return set(zip(*(np.asarray(edges[c]).tolist() for c in ("producer", "consumer", "tensor_id", "bytes"))))


def _frees(trace: Any) -> list[int]:
    """The sizes of the frees of what the recording allocated, in order. A tensor made before the
    recording may be freed inside it or not, as the interpreter's references happen to go."""
    events = []
    for kind, name in ((0, "mem_alloc"), (1, "mem_free")):
        table = trace.table(name)
        events += [(ts, kind, addr, size) for ts, addr, size in zip(
            np.asarray(table["timestamp"]).tolist(), np.asarray(table["addr"]).tolist(),
            np.asarray(table["bytes"]).tolist())]
    live: set[int] = set()
    sizes = []
    for _ts, kind, addr, size in sorted(events):
        if kind == 0:
            live.add(addr)
        elif addr in live:
            live.discard(addr)
            sizes.append(size)
    return sizes


def _assert_same(profiled: Any, observed: Any) -> None:
    assert sorted(profiled.tables) == sorted(observed.tables)
    skip = {"timestamp", "addr", "total", "bytes_in_use"}  # this run's addresses and times
    for name, table in profiled.tables.items():
        other = observed.tables[name]
        if name in ("dfc:string_def", "dfc:mem_free"):
            continue  # the observer's extra argument texts are strings too; frees: below
        assert len(table) == len(other), name
        if name in ("dfc:tensor_edge", "dfc:node_args"):
            continue  # below: edges as a set, arguments with the observer's extra tensors
        for column in table.columns:
            if column not in skip:
                assert np.array_equal(_column(table, column), _column(other, column)), (name, column)
    assert _edges(profiled) == _edges(observed)
    assert _frees(profiled) == _frees(observed)
    ops = _column(profiled.table("node_begin"), "op")
    for column in ("shapes", "dtypes"):
        mine, theirs = _column(observed.table("node_args"), column), _column(profiled.table("node_args"), column)
        differ = mine != theirs
        # Only where the profiler leaves a list of optional tensors out: the indices of index and index_put_.
        assert set(ops[differ].tolist()) <= {"aten::index", "aten::index_put_", "aten::_index_put_impl_"}, ops[differ]


def test_the_observer_records_what_the_profiler_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    profiled = _record(tmp_path / "profiler", "profiler", "0", monkeypatch)
    observed = _record(tmp_path / "observer", "observer", "0", monkeypatch)
    _assert_same(profiled, observed)
    # What the comparison covers: edges (backward and in-place ones too), frees, module scopes
    # (record_function_fast records under the observer) and the user's steps.
    assert len(observed.table("tensor_edge")) > 1000 and len(observed.table("mem_free")) > 1000
    ops = set(_column(observed.table("node_begin"), "op").tolist())
    assert {"aten::embedding_backward", "aten::index", "aten::linear", "aten::add_"} <= ops
    names = set(_column(observed.table("node_begin"), "name").tolist())
    assert any(name.startswith("TransformerEncoder") for name in names), sorted(names)[:10]
    assert any(name.endswith("(backward)") for name in names)
    assert len(observed.table("step_begin")) == 5
    index_args = _column(observed.table("node_args"), "dtypes")[
        _column(observed.table("node_begin"), "op") == "aten::index"]
    assert all("int64" in dtypes for dtypes in index_args)  # the indices tensor is described


def test_sparse_tensors_have_their_edges(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    observed = _record(tmp_path / "observer", "observer", "0", monkeypatch, sparse=True)
    nodes = observed.table("node_begin")
    ops = dict(zip(np.asarray(nodes["node_id"]).tolist(), _column(nodes, "op").tolist()))
    into = {ops[consumer] for producer, consumer, _, _ in _edges(observed) if ops[producer] == "aten::to_sparse"}
    assert "aten::matmul" in into, into  # the sparse tensor made by to_sparse is multiplied
    embedding_grads = {ops[c] for p, c, _, _ in _edges(observed) if ops[p] == "aten::embedding_backward"}
    assert embedding_grads, "the sparse gradient reaches the optimizer"


def test_windows_converted_in_fork_children_equal_those_converted_here(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    here = _record(tmp_path / "here", "observer", "0", monkeypatch)
    children = _record(tmp_path / "children", "observer", "1", monkeypatch)
    _assert_same(here, children)


def test_without_the_built_observer_the_profiler_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(native, "_loaded", {"observer": None})
    monkeypatch.setattr("tracer.torch_source.op_observer", lambda torch: None)
    recorder = TorchRecorder(str(tmp_path / "t"), engine="observer")
    assert recorder.engine == "profiler"


def test_the_program_sees_no_profiler_and_can_open_its_own(tmp_path: Path) -> None:
    """Under the observer, torch reports no profiler enabled; a program that opens its own profiler
    gets its events, and our trace keeps the ops before and after its block."""
    program = tmp_path / "own_profiler.py"
    program.write_text(textwrap.dedent("""
        import torch
        from tracer.torch_source import TorchRecorder

        x = torch.randn(8, 8)
        with TorchRecorder(__import__("sys").argv[1], engine="observer") as rec:
            assert rec.engine == "observer"
            assert not torch.autograd._profiler_enabled()
            for _ in range(3):
                torch.mm(x, x).relu()
            rec.step()
            with torch.profiler.profile() as prof:
                torch.mm(x, x).sigmoid()
            assert any(e.name == "aten::sigmoid" for e in prof.events())
            torch.mm(x, x).tanh()
            rec.step()
        print("done")
    """))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DFCOMPASS_HANDOFF": "0"}
    done = subprocess.run([sys.executable, str(program), str(tmp_path / "trace")], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    ops = _column(read_trace(tmp_path / "trace").table("node_begin"), "op").tolist()
    assert ops.count("aten::relu") == 3 and "aten::tanh" in ops
    assert "aten::sigmoid" not in ops  # inside the program's own profile only, as with the profiler engine


def test_record_takes_the_engine_and_the_trace_says_which_recorded(tmp_path: Path) -> None:
    program = tmp_path / "train.py"
    program.write_text(textwrap.dedent("""
        import torch
        model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            optimizer.zero_grad()
            model(torch.randn(4, 8)).sum().backward()
            optimizer.step()
    """))
    engines = {}
    for engine in ("observer", "profiler"):
        job = tmp_path / engine
        done = subprocess.run([*dfcompass_cmd(), "record", "--torch-engine", engine, "--no-calibrate", "-o", str(job),
                               "--", sys.executable, str(program)], env=subprocess_env(), capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
        (trace,) = job_traces(job)
        recorded = read_trace(trace.path)
        engines[engine] = recorded.metadata.env.get("torch_engine")
        ops = _column(recorded.table("node_begin"), "op").tolist()
        assert ops.count("aten::linear") == 6 and len(recorded.table("tensor_edge")) > 0, ops
    assert engines == {"observer": "observer", "profiler": "profiler"}


def test_a_compiled_program_shows_its_graph_calls(tmp_path: Path) -> None:
    """torch.compile marks a graph's call and its compile scopes only when it believes a profiler is
    on: the observer sets that belief (torch.autograd.profiler._is_profiler_enabled) while it runs,
    so its trace holds the graph calls and, like the profiler engine's, no op of compile time."""
    steps = 3
    found = {}
    for engine in ("observer", "profiler"):
        job = tmp_path / engine
        done = subprocess.run([*dfcompass_cmd(), "record", "--torch-engine", engine, "--no-calibrate", "-o", str(job),
                               "--", sys.executable, str(ROOT / "tests" / "torch_programs" / "compiled.py"), "cnn",
                               "default", "cpu", str(steps)], env=subprocess_env(), capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
        recorded = read_trace(single_trace(job))  # the program's, beside inductor's compile workers
        assert recorded.metadata.env.get("torch_engine") == engine
        found[engine] = _column(recorded.table("node_begin"), "op").tolist()
    ops = found["observer"]
    assert ops.count("inductor::compiled_graph") >= 2 * (steps - 1), ops  # forward and backward graphs per step
    # Compile time runs aten ops on fake tensors (dynamo's checks, inductor's lowering): none is a node.
    assert set(ops) <= set(found["profiler"]), set(ops) - set(found["profiler"])


def test_dataloader_workers_record_what_the_profiler_engine_does(tmp_path: Path) -> None:
    """Fork children of the program (two DataLoader workers): each starts an observer of its own (the
    parent's, inherited, records nothing) and holds the ops and edges the profiler engine gives it."""
    counts = {}
    for engine in ("observer", "profiler"):
        job = tmp_path / engine
        done = subprocess.run([*dfcompass_cmd(), "record", "--torch-engine", engine, "--no-calibrate", "-o", str(job),
                               "--", sys.executable, str(ROOT / "tests" / "torch_programs" / "loader_workers.py")],
                              env=subprocess_env(), capture_output=True, text=True, timeout=600)
        assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
        traces = [read_trace(trace.path) for trace in job_traces(job)]
        assert {trace.metadata.env.get("torch_engine") for trace in traces} == {engine}
        counts[engine] = sorted((len(t.table("node_begin")), len(t.table("tensor_edge")), t.discarded) for t in traces)
    assert len(counts["observer"]) == 3 and all(nodes > 0 for nodes, _, _ in counts["observer"])
    assert counts["observer"] == counts["profiler"]


@pytest.mark.parametrize("options, why", [({"active": 2}, "a scheduled recording"), ({"all_threads": True}, "all_threads"),
                                          ({"engine": "obsrver"}, "unknown PyTorch engine")])
def test_an_observer_that_cannot_record_says_why_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                             options: dict[str, Any], why: str) -> None:
    recorder = TorchRecorder(str(tmp_path / "t"), **{"engine": "observer", **options})
    assert recorder.engine == "profiler"
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and why in lines[0] and "torch.profiler records" in lines[0], lines


def test_the_trace_holds_the_ops_observed_and_their_calibrated_cost(tmp_path: Path) -> None:
    """The cost line's estimate inside the ops: every op the observer recorded (nodes and the ops
    inside them), times what it adds to one op, calibrated when the recording started."""
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
    with TorchRecorder(str(tmp_path / "t"), engine="observer") as recorder:
        for _ in range(3):
            model(torch.randn(4, 8)).sum()
            recorder.step()
    env = read_trace(tmp_path / "t").metadata.env
    nodes = recorder.nodes_recorded
    assert nodes > 0 and isinstance(env["recorder_ops"], int) and env["recorder_ops"] > nodes  # linear's inner ops
    assert 0 < int(env["recorder_op_ns"]) < 100_000
