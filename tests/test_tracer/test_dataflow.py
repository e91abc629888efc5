"""The dataflow API: exact producer-to-consumer edges from object identity."""

from __future__ import annotations

import gc
import queue
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tracer
from tc_analyses.reader.fast import read_trace
from tests.helpers import check_string_defs, edges_by_name, node_names, rows
from tracer import dataflow, schema
from tracer.session import Session, active_session


class Blob:
    """A small weakly referenceable object."""

    __slots__ = ("payload", "__weakref__")

    def __init__(self, payload: int = 0) -> None:
        self.payload = payload


def _edge_rows(trace: Any) -> list[tuple[str, str, int, int, int]]:
    names = node_names(trace)
    edges = trace.table("tensor_edge")
    return sorted((names[p], names[c], b, s, d) for p, c, b, s, d in
                  rows(edges, "producer", "consumer", "bytes", "src_device", "dst_device"))


def test_chain(make_trace: Any) -> None:
    def body(_: Session) -> None:
        with tracer.node("a") as a:
            x = Blob()
            a.output(x)
        with tracer.node("b", inputs=[x]) as b:
            y = Blob()
            b.output(y)
        with tracer.node("c", inputs=[y]):
            pass

    trace = read_trace(make_trace(body))
    assert edges_by_name(trace) == [("a", "b"), ("b", "c")]
    edges = trace.table("tensor_edge")
    assert len(set(edges["tensor_id"].tolist())) == 2
    begins = dict(zip(trace.table("node_begin")["node_id"].tolist(), trace.table("node_begin")["timestamp"].tolist()))
    # an edge is recorded at its consumer's start, after the producer began
    for p, c, ts in rows(edges, "producer", "consumer", "timestamp"):
        assert begins[p] < begins[c] <= ts


def test_diamond_fan_out_fan_in(make_trace: Any) -> None:
    @tracer.traced(op="load")
    def load() -> np.ndarray:
        return np.ones(8, dtype=np.float32)

    @tracer.traced(op="left")
    def left(x: np.ndarray) -> np.ndarray:
        return x + 1

    @tracer.traced(op="right")
    def right(x: np.ndarray) -> np.ndarray:
        return x * 2

    @tracer.traced(op="join")
    def join(a: np.ndarray, *, b: np.ndarray) -> np.ndarray:
        return a + b

    def body(_: Session) -> None:
        x = load()
        assert join(left(x), b=right(x)).tolist() == [4.0] * 8

    trace = read_trace(make_trace(body))
    short = lambda n: n.rsplit(".", 1)[-1]  # noqa: E731  (names are qualnames)
    assert sorted((short(p), short(c)) for p, c in edges_by_name(trace)) == [
        ("left", "join"), ("load", "left"), ("load", "right"), ("right", "join")]
    assert sorted(set(trace.table("node_begin").text("op").tolist())) == ["join", "left", "load", "right"]


def test_traced_links_each_element_of_a_returned_tuple(make_trace: Any) -> None:
    @tracer.traced(op="split", name="split")
    def split(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return x[:2].copy(), x[2:].copy()

    @tracer.traced(op="use", name="use")
    def use(x: np.ndarray) -> None:
        return None

    def body(_: Session) -> None:
        a, b = split(np.arange(6))
        use(a)
        use(b)

    trace = read_trace(make_trace(body))
    assert edges_by_name(trace) == [("split", "use"), ("split", "use")]


def test_input_nobody_produced_gives_no_edge(make_trace: Any) -> None:
    def body(_: Session) -> None:
        external = np.zeros(4)
        with tracer.node("reader", inputs=[external, Blob(), (1, 2), "text", 42]):
            pass

    trace = read_trace(make_trace(body))
    assert len(trace.table("tensor_edge")) == 0
    assert len(trace.table("node_begin")) == 1


def test_cross_thread_edges(make_trace: Any) -> None:
    def body(_: Session) -> None:
        q: queue.Queue[Any] = queue.Queue()

        def producer() -> None:
            for i in range(5):
                with tracer.node(f"produce{i}") as n:
                    item = np.full(3, i)
                    n.output(item)
                q.put(item)
            q.put(None)

        def consumer() -> None:
            i = 0
            while (item := q.get()) is not None:
                with tracer.node(f"consume{i}", inputs=[item]):
                    pass
                i += 1

        threads = [threading.Thread(target=producer, name="producer"), threading.Thread(target=consumer, name="consumer")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    trace = read_trace(make_trace(body))
    assert edges_by_name(trace) == [(f"produce{i}", f"consume{i}") for i in range(5)]
    begins = trace.table("node_begin")
    tid_of = dict(zip(begins.text("name").tolist(), begins["tid"].tolist()))
    threads = trace.table("thread_info")
    thread_name = dict(zip(threads["tid"].tolist(), threads.text("name").tolist()))
    assert {thread_name[tid_of[f"produce{i}"]] for i in range(5)} == {"producer"}
    assert {thread_name[tid_of[f"consume{i}"]] for i in range(5)} == {"consumer"}


def test_freed_output_does_not_link_to_a_new_object_with_its_id(make_trace: Any) -> None:
    reused: list[bool] = []

    def body(_: Session) -> None:
        with tracer.node("producer") as n:
            old = Blob(1)
            n.output(old)
        old_id = id(old)
        del old, n
        gc.collect()
        keep = []
        for _ in range(10_000):  # CPython hands the freed block out again almost at once
            new = Blob(2)
            if id(new) == old_id:
                break
            keep.append(new)
        reused.append(id(new) == old_id)
        with tracer.node("consumer", inputs=[new]):
            pass

    trace = read_trace(make_trace(body))
    assert reused == [True], "test premise: a new object got the freed object's id()"
    assert edges_by_name(trace) == []


def test_live_output_with_same_class_still_links(make_trace: Any) -> None:
    def body(_: Session) -> None:
        with tracer.node("producer") as n:
            obj = Blob()
            n.output(obj)
        gc.collect()
        with tracer.node("consumer", inputs=[obj]):
            pass

    assert edges_by_name(read_trace(make_trace(body))) == [("producer", "consumer")]


def test_non_weakrefable_outputs_are_linked(make_trace: Any) -> None:
    def body(_: Session) -> None:
        with tracer.node("make_tuple") as n:
            pair = (object(), "pair")
            n.output(pair)
        with tracer.node("make_bytes") as n:
            data = b"x" * 100
            n.output(data)
        with tracer.node("use", inputs=[pair, data]):
            pass

    trace = read_trace(make_trace(body))
    assert edges_by_name(trace) == [("make_bytes", "use"), ("make_tuple", "use")]
    sizes = dict((p, b) for p, _, b, _, _ in _edge_rows(trace))
    assert sizes == {"make_tuple": schema.UNKNOWN_BYTES, "make_bytes": 100}


def test_strong_references_are_bounded(make_trace: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dataflow, "STRONG_LIMIT", 3)

    def body(_: Session) -> None:
        made = []
        for i in range(4):
            with tracer.node(f"p{i}") as n:
                item = (i, object())
                n.output(item)
            made.append(item)
        with tracer.node("c", inputs=made):
            pass

    assert edges_by_name(read_trace(make_trace(body))) == [("p1", "c"), ("p2", "c"), ("p3", "c")]


def test_latest_producer_wins(make_trace: Any) -> None:
    def body(_: Session) -> None:
        buf = np.zeros(16, dtype=np.int64)
        with tracer.node("fill") as n:
            n.output(buf)
        with tracer.node("update", inputs=[buf]) as n:
            buf += 1
            n.output(buf)
        with tracer.node("read", inputs=[buf]):
            pass

    assert edges_by_name(read_trace(make_trace(body))) == [("fill", "update"), ("update", "read")]


def test_bytes_and_devices(make_trace: Any) -> None:
    def body(_: Session) -> None:
        with tracer.node("host", device="cpu") as n:
            x = np.zeros((4, 5), dtype=np.float64)
            n.output(x)
        with tracer.node("gpu0", device="cuda:0", inputs=[x]) as n:
            y = np.zeros(7, dtype=np.int16)
            n.output(y, bytearray(33), memoryview(bytes(12)))
        with tracer.node("gpu1", device="cuda:1", inputs=[y]):
            pass

    trace = read_trace(make_trace(body))
    devices = trace.table("device_info")
    index = dict(zip(devices.text("name").tolist(), devices["device"].tolist()))
    assert sorted(index) == ["cpu", "cuda:0", "cuda:1"]
    assert sorted(index.values()) == [0, 1, 2]
    kinds = dict(zip(devices.text("name").tolist(), zip(devices.text("kind").tolist(), devices["ordinal"].tolist())))
    assert kinds == {"cpu": ("cpu", 0), "cuda:0": ("cuda", 0), "cuda:1": ("cuda", 1)}
    assert _edge_rows(trace) == [
        ("gpu0", "gpu1", 7 * 2, index["cuda:0"], index["cuda:1"]),
        ("host", "gpu0", 4 * 5 * 8, index["cpu"], index["cuda:0"]),
    ]
    begins = trace.table("node_begin")
    ends = trace.table("node_end")
    assert dict(zip(begins.text("name").tolist(), begins["device"].tolist())) == {
        "host": index["cpu"], "gpu0": index["cuda:0"], "gpu1": index["cuda:1"]}
    assert sorted(rows(ends, "node_id", "device")) == sorted(rows(begins, "node_id", "device"))
    check_string_defs(trace)


def test_step_field(make_trace: Any) -> None:
    def body(_: Session) -> None:
        with tracer.node("before"):
            pass
        for i in (0, 7):
            with tracer.step(i):
                with tracer.node(f"in{i}"):
                    pass
        with tracer.node("after"):
            pass

    trace = read_trace(make_trace(body))
    begins = trace.table("node_begin")
    assert dict(zip(begins.text("name").tolist(), begins["step"].tolist())) == {
        "before": schema.NO_STEP, "in0": 0, "in7": 7, "after": schema.NO_STEP}
    assert trace.table("step_begin")["step"].tolist() == [0, 7]
    assert trace.table("step_end")["step"].tolist() == [0, 7]
    sb, se = trace.table("step_begin")["timestamp"].tolist(), trace.table("step_end")["timestamp"].tolist()
    stamp = dict(zip(begins.text("name").tolist(), begins["timestamp"].tolist()))
    assert sb[0] < stamp["in0"] < se[0] < sb[1] < stamp["in7"] < se[1]


def test_nodes_nest_and_pair_up(make_trace: Any) -> None:
    def body(_: Session) -> None:
        with tracer.node("outer"):
            for _ in range(3):
                with tracer.node("inner"):
                    pass

    trace = read_trace(make_trace(body))
    begins, ends = trace.table("node_begin"), trace.table("node_end")
    assert begins["node_id"].tolist() == [0, 1, 2, 3]
    assert ends["node_id"].tolist() == [1, 2, 3, 0]
    start = dict(rows(begins, "node_id", "timestamp"))
    assert all(start[i] < ts for i, ts in rows(ends, "node_id", "timestamp"))


def test_exception_inside_a_node_still_ends_it(make_trace: Any) -> None:
    def body(_: Session) -> None:
        with pytest.raises(KeyError):
            with tracer.node("fails"):
                raise KeyError("x")

    trace = read_trace(make_trace(body))
    assert len(trace.table("node_begin")) == len(trace.table("node_end")) == 1


def test_api_is_a_noop_without_a_session(tmp_path: Path) -> None:
    assert active_session() is None

    @tracer.traced(op="double")
    def double(x: list[int]) -> list[int]:
        return [v * 2 for v in x]

    with tracer.step(1):
        with tracer.node("idle", inputs=[1, 2]) as n:
            n.output(np.zeros(3))
            assert double([1, 2]) == [2, 4]
    assert n.node_id == -1
    assert list(tmp_path.iterdir()) == []
    assert active_session() is None


def test_embedded_pipeline_dataflow(make_trace: Any) -> None:
    from tracer.workloads import pipeline

    steps = 3
    trace = read_trace(make_trace(lambda _: pipeline.run(steps=steps)))
    per_step = [("dense1", "relu"), ("head_a", "merge"), ("head_b", "merge"), ("load_batch", "normalize"),
                ("merge", "softmax"), ("normalize", "dense1"), ("relu", "head_a"), ("relu", "head_b"),
                ("softmax", "loss")]
    assert edges_by_name(trace) == sorted(per_step * steps)
    begins = trace.table("node_begin")
    threads = trace.table("thread_info")
    thread_of = dict(zip(threads["tid"].tolist(), threads.text("name").tolist()))
    tids = {name: {thread_of[t] for t, n in zip(begins["tid"].tolist(), begins.text("name").tolist()) if n == name}
            for name in set(begins.text("name").tolist())}
    assert tids["load_batch"] == {"loader"}
    assert tids["normalize"] == {threading.main_thread().name}
    assert all(t.startswith("head") for t in tids["head_a"] | tids["head_b"])
    inside = dict(zip(begins.text("name").tolist(), begins["step"].tolist()))
    assert inside["loss"] == steps - 1
    check_string_defs(trace)
