"""Recorder cost: wall-clock ns per recorded event, final flush included. Target: <= 1 us per event.

Cases, all run alternately in one process (see :func:`_common.alternate`):

* ``floor``: a loop that only reads the clock (``time.monotonic_ns``); the least any recorded
  event can cost, since each one takes a timestamp.
* ``node off`` / ``node on``: ``with tracer.node("n", op="op"): pass`` without / inside a
  session. Two events per node (node_begin + node_end).
* ``low-level``: ``session.node_begin`` / ``session.node_end`` called directly, the path an
  instrumented runtime takes. Two events per node.
* ``edge off`` / ``edge on``: each node reads the previous node's output (``inputs=[...]``) and
  declares a new one (``n.output``). Three events per node (plus the edge) except the first.

A timed "on" run goes from just before the loop to just after ``session.stop()``, so the
flusher's packing and every packet write are inside the measurement. Each traced run's trace
is then read back and its event counts checked, so a run that dropped events fails loudly
instead of looking fast.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import tracer
from _common import Sample, Timings, alternate, log
from tc_analyses.reader.fast import read_trace

TARGET_NS_PER_EVENT = 1_000.0
_NODE_EVENTS = ("node_begin", "node_end", "tensor_edge")


class Tensor:
    """A stand-in for a tensor: weak-referenceable, with a size, as numpy arrays are."""

    __slots__ = ("nbytes", "__weakref__")

    def __init__(self, nbytes: int) -> None:
        self.nbytes = nbytes


@dataclass(frozen=True)
class Expected:
    """Events a traced case must have recorded."""

    node_begin: int
    node_end: int
    tensor_edge: int


class TraceDirs:
    """Fresh trace directories under one temporary root, removed as soon as they are checked."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="dfc-bench-"))
        self._n = 0

    def new(self) -> Path:
        self._n += 1
        return self.root / f"run-{self._n}"

    def cleanup(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


# ---------------------------------------------------------------------------- loops
# Each loop is a plain function of n so the interpreter does the same work in every case.

def _floor_loop(n: int) -> None:
    now = time.monotonic_ns
    for _ in range(n):
        now()


def _node_loop(n: int) -> None:
    node = tracer.node
    for _ in range(n):
        with node("n", op="op"):
            pass


def _lowlevel_loop(session: tracer.Session, n: int) -> None:
    begin, end = session.node_begin, session.node_end
    op, name, device = session.intern("op"), session.intern("n"), session.device("cpu")
    for _ in range(n):
        end(begin(op, name, device), device)


def _edge_loop(n: int) -> None:
    node = tracer.node
    previous = Tensor(1024)
    for _ in range(n):
        with node("n", op="op", inputs=[previous]) as scope:
            out = Tensor(1024)
            scope.output(out)
        previous = out


# ---------------------------------------------------------------------------- cases
def _untraced(loop: Callable[[int], None], n: int) -> Callable[[], Sample]:
    def run() -> Sample:
        t0 = time.perf_counter_ns()
        loop(n)
        return Sample((time.perf_counter_ns() - t0) / 1e9)

    return run


def _traced(dirs: TraceDirs, body: Callable[[tracer.Session], None], expected: Expected) -> Callable[[], Sample]:
    def run() -> Sample:
        path = dirs.new()
        session = tracer.Session(path, handle_signals=False).start()
        t0 = time.perf_counter_ns()
        body(session)
        session.stop()  # inside the timing: the final flush is part of the cost
        seconds = (time.perf_counter_ns() - t0) / 1e9
        errors = list(session.trace.errors) if session.trace is not None else []
        counts = _verify(path, expected, errors)
        shutil.rmtree(path, ignore_errors=True)
        return Sample(seconds, {"counts": counts})

    return run


def _verify(path: Path, expected: Expected, errors: list[str]) -> dict[str, int]:
    """Read the trace back; raise if any event is missing, extra or discarded."""
    if errors:
        raise RuntimeError(f"{path}: the session reported errors: {errors[:3]}")
    trace = read_trace(path)
    counts = {name: len(trace.table(name)) for name in _NODE_EVENTS}
    counts["discarded"] = trace.discarded
    wanted = {"node_begin": expected.node_begin, "node_end": expected.node_end,
              "tensor_edge": expected.tensor_edge, "discarded": 0}
    if counts != wanted:
        raise RuntimeError(f"{path}: recorded {counts}, expected {wanted}: the benchmark would time lost events")
    begin_ids = trace.table("node_begin")["node_id"]
    if (begin_ids != trace.table("node_end")["node_id"]).any():  # single thread: ids pair up in order
        raise RuntimeError(f"{path}: node_begin and node_end ids do not pair up")
    return counts


def build_cases(n: int, dirs: TraceDirs) -> dict[str, Callable[[], Sample]]:
    return {
        "floor": _untraced(_floor_loop, n),
        "node off": _untraced(_node_loop, n),
        "node on": _traced(dirs, lambda s: _node_loop(n), Expected(n, n, 0)),
        "low-level": _traced(dirs, lambda s: _lowlevel_loop(s, n), Expected(n, n, 0)),
        "edge off": _untraced(_edge_loop, n),
        "edge on": _traced(dirs, lambda s: _edge_loop(n), Expected(n, n, n - 1)),
    }


# ---------------------------------------------------------------------------- results
EVENTS_PER_NODE = {"node on": 2.0, "low-level": 2.0, "edge on": 3.0}


def summarize(timings: dict[str, Timings], n: int) -> dict[str, Any]:
    """ns per node and per event of each case's best run, ratios, and the verdict."""
    ns_per_node = {name: t.best.seconds * 1e9 / n for name, t in timings.items()}
    cases: dict[str, Any] = {}
    for name, t in timings.items():
        entry: dict[str, Any] = {"best_s": t.best.seconds, "all_s": t.all_seconds, "ns_per_node": ns_per_node[name]}
        if name in EVENTS_PER_NODE:
            events = t.best.extra["counts"]
            total = events["node_begin"] + events["node_end"] + events["tensor_edge"]
            entry["events_recorded"] = total
            entry["ns_per_event"] = t.best.seconds * 1e9 / total
            entry["verified"] = events
        cases[name] = entry
    floor = ns_per_node["floor"]
    headline = cases["node on"]["ns_per_event"]
    ratios = {
        "node_on_event_per_floor": headline / floor,
        "node_on_per_node_off": ns_per_node["node on"] / ns_per_node["node off"],
        "lowlevel_event_per_floor": cases["low-level"]["ns_per_event"] / floor,
        "edge_on_event_per_floor": cases["edge on"]["ns_per_event"] / floor,
        "edge_on_per_edge_off": ns_per_node["edge on"] / ns_per_node["edge off"],
    }
    # Cost tracing adds per event, the untraced loop's own work taken out.
    added = {
        "node": (ns_per_node["node on"] - ns_per_node["node off"]) / 2,
        "edge": (ns_per_node["edge on"] - ns_per_node["edge off"]) / 3,
    }
    targets = {name: cases[name]["ns_per_event"] <= TARGET_NS_PER_EVENT for name in EVENTS_PER_NODE}
    return {
        "nodes_per_run": n,
        "cases": cases,
        "ratios": ratios,
        "added_ns_per_event": added,
        "target_ns_per_event": TARGET_NS_PER_EVENT,
        "headline_ns_per_event": headline,
        "pass": targets["node on"],
        "pass_by_case": targets,
    }


def run(n: int = 200_000, rounds: int = 5) -> dict[str, Any]:
    log(f"recorder cost: {n} nodes per run, {rounds} alternating rounds of 6 cases")
    dirs = TraceDirs()
    try:
        timings = alternate(build_cases(n, dirs), rounds, log)
    finally:
        dirs.cleanup()
    return summarize(timings, n)
