"""A CUDA graph replay's outputs (torch.compile's reduce-overhead) get their edges.

A replay writes its static outputs into the graph's memory pool without an allocation the profiler
shows; the caching allocator shows a free there (the previous generation's outputs). Without a GPU
the window is built by hand from the events the H200 recording showed (tests/data/traces/cuda/
h200-compiled/cnn-reduce-overhead: the forward replay node launched cudaGraphLaunch and only freed
memory; the readers of its outputs got no edge)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

from tc_analyses.reader import read_trace  # noqa: E402
from tracer.batch import Batch  # noqa: E402
from tracer.session import Session  # noqa: E402
from tracer.torch_convert import _WindowWriter  # noqa: E402
from tracer.torch_events import _Collector, _Node  # noqa: E402

OUTPUT, PARAMETER, EAGER = 0x7F0000001000, 0x7F0000009000, 0x7F0000005000


def _meta(ptr: int) -> SimpleNamespace:
    return SimpleNamespace(storage_data_ptr=ptr, impl_ptr=ptr + 8, device="cuda:0", dtype=torch.float32,
                           sizes=[4, 4], layout="torch.strided")


def _write(path: Path, collectors: list[_Collector]) -> Path:
    """The collectors' windows written in turn by one window writer (as the recorder does)."""
    writer = _WindowWriter(torch)
    session = Session(str(path)).start()
    try:
        for window, collector in enumerate(collectors):
            batch = Batch(session, 0, 0)
            writer.write_nodes(batch, collector, window)
            batch.flush()
    finally:
        session.stop()
    return session.path


def _op_edges(path: Path) -> set[tuple[str, str]]:
    trace = read_trace(path)
    names = dict(zip(trace.table("node_begin")["node_id"].tolist(), trace.table("node_begin").text("op").tolist()))
    edges = trace.table("tensor_edge")
    return {(names[p], names[c]) for p, c in zip(edges["producer"].tolist(), edges["consumer"].tolist())}


def _edges(tmp_path: Path, replays: bool) -> set[tuple[str, str]]:
    collector = _Collector(torch)
    graph = _Node(1_000, 2_000, 1, "inductor::compiled_graph", "", "Sequential [graph k]", 0, [_meta(PARAMETER)],
                  replays=replays)
    graph.device = "cuda:0"
    collector.nodes = [
        graph,
        _Node(3_000, 3_100, 1, "aten::pow", "Tensor_Scalar", "pow", 0, [_meta(OUTPUT), 2]),  # the replay's output
        _Node(4_000, 4_100, 1, "aten::mul", "Tensor", "mul", 0, [_meta(PARAMETER), _meta(PARAMETER)]),  # made before
        _Node(2_400, 2_600, 1, "aten::add", "Tensor", "add", 0, [_meta(PARAMETER), _meta(PARAMETER)],
              allocations={7: [1, 64, EAGER, 2_500]}),  # an eager output at an address freed before
        _Node(5_000, 5_100, 1, "aten::neg", "", "neg", 0, [_meta(EAGER)]),  # reads add's output
    ]
    # The previous generation's output freed inside the replay; an eager buffer freed before it and allocated again.
    collector.memory = [(500, 1, "cuda:0", EAGER, -64, 0), (1_500, 1, "cuda:0", OUTPUT, -64, 0),
                        (2_500, 1, "cuda:0", EAGER, 64, 64)]
    return _op_edges(_write(tmp_path / ("replay" if replays else "plain"), [collector]))


def test_a_replays_output_has_its_edge(tmp_path: Path) -> None:
    assert _edges(tmp_path, replays=True) == {("inductor::compiled_graph", "aten::pow"), ("aten::add", "aten::neg")}


def test_without_a_replay_freed_memory_is_no_ones_output(tmp_path: Path) -> None:
    assert _edges(tmp_path, replays=False) == {("aten::add", "aten::neg")}


def test_an_address_freed_in_an_earlier_window_is_the_replays(tmp_path: Path) -> None:
    """Streaming windows end each step: the previous generation's outputs are freed in one window
    and the next replay's readers run in the next (the 6-step H200 run)."""
    first = _Collector(torch)
    first.nodes = [_Node(100, 200, 1, "aten::mul", "Tensor", "mul", 0, [_meta(PARAMETER), _meta(PARAMETER)])]
    first.memory = [(150, 1, "cuda:0", OUTPUT, -64, 0)]
    second = _Collector(torch)
    graph = _Node(1_000, 2_000, 1, "inductor::compiled_graph", "", "Sequential [graph k]", 1, [_meta(PARAMETER)],
                  replays=True)
    second.nodes = [graph, _Node(3_000, 3_100, 1, "aten::detach", "", "detach", 1, [_meta(OUTPUT)])]
    assert _op_edges(_write(tmp_path / "two", [first, second])) == {("inductor::compiled_graph", "aten::detach")}


def test_each_replay_of_a_graph_writes_its_static_outputs_again(tmp_path: Path) -> None:
    """A graph replays into the same addresses every step, with no memory event at all after the
    first: the reader after the second replay reads the second replay's output (the 6-step H200
    run gave it to the first)."""
    windows = []
    for window in range(2):
        collector = _Collector(torch)
        base = 10_000 * window
        collector.nodes = [_Node(base + 1_000, base + 2_000, 1, "inductor::compiled_graph", "", "G [graph k]",
                                 window, [_meta(PARAMETER)], replays=True),
                           _Node(base + 3_000, base + 3_100, 1, "aten::pow", "Tensor_Scalar", "pow", window,
                                 [_meta(OUTPUT), 2])]
        collector.memory = [(1_500, 1, "cuda:0", OUTPUT, -64, 0)] if window == 0 else []
        windows.append(collector)
    trace = read_trace(_write(tmp_path / "again", windows))
    begins = trace.table("node_begin")
    start = dict(zip(begins["node_id"].tolist(), begins["timestamp"].tolist()))
    edges = trace.table("tensor_edge")
    pairs = sorted((start[p], start[c]) for p, c in zip(edges["producer"].tolist(), edges["consumer"].tolist()))
    assert [(b - a) for a, b in pairs] == [2_000, 2_000]  # each pow from the replay just before it
