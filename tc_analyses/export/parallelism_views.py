"""A stream plan as files Trace Compass opens next to the real run.

Reuses the placement views (:mod:`tc_analyses.export.placement_views`): the plan becomes a
placement problem with one device per lane (``stream 0``, ``stream 1``... or ``thread N``), and
every op's "actual device" is lane 0, the single lane of the baseline. So in the predicted trace

* ``stream 0: kept here`` holds the ops that stay on the first lane, and ``stream K: moved here``
  the ops the plan moves to lane K, labelled ``name (from stream 0)``;
* each sync is a ``dfc:tensor_edge`` from the producer to the consumer on another lane;
* timestamps start at the real trace's first op, so an experiment of both traces lines them up.

``out_dir`` receives ``predicted/`` (the CTF trace), ``views/`` (its Trace Compass analyses),
``graph.dot``/``graph.graphml`` (the planned ops coloured by lane) and ``plan.json``/``report.txt``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import networkx as nx

from tc_analyses.analyses.parallelism import StreamPlan, plan_placement
from tc_analyses.export.json_text import dumps_indented
from tc_analyses.export.parallelism_plan import plan_json, plan_text
from tc_analyses.export.graph_formats import write_graphml_columns
from tc_analyses.export.placement_views import (DRAWN_GRAPH_NODES, write_plan, write_plan_graph,
                                                  write_predicted_trace)
from tc_analyses.model import graph_keys as K
from tc_analyses.perf.problem import Placement

DEFAULT_START_NS = 1_000  # when there is no real trace to line up with


def _real_trace_clock(trace_path: str | os.PathLike[str] | None) -> tuple[int, int]:
    """(first op's begin, clock offset) of the real trace, to line the predicted one up with it."""
    if trace_path is None or not Path(trace_path).is_dir():
        return DEFAULT_START_NS, 0
    from tc_analyses.reader import read_trace  # noqa: PLC0415 - only when there is a trace

    trace = read_trace(trace_path)
    begins = trace.table("node_begin")["timestamp"]
    start = int(begins.min()) if len(begins) else DEFAULT_START_NS
    return start, int(trace.metadata.clock_offset_ns)


def _plan_graph(plan: StreamPlan) -> nx.DiGraph:
    """The planned ops and the dependencies the plan keeps (reduced edges), with op and name."""
    g: nx.DiGraph[Any] = nx.DiGraph()
    for op in plan.ops:
        g.add_node(op.node, **{K.OP: op.op, K.NAME: op.name, K.MEAN_NS: op.work_ns, "stream": op.stream,
                                "order": op.order})
    g.add_edges_from(plan.dependencies)
    for e in plan.sync_edges:
        g.edges[e.producer, e.consumer]["sync"] = True
    return g


def _write_large_plan_graph(plan: StreamPlan, path: Path) -> Path:
    """What write_plan_graph writes for a plan past DRAWN_GRAPH_NODES ops (the GraphML of
    :func:`_plan_graph` with each op's lane as its device), from the plan's columns."""
    ops = plan.ops
    label = {lane.stream: lane.label for lane in plan.lanes}
    device = [label[s] for s in ops.column("stream")]
    syncs = {(e.producer, e.consumer) for e in plan.sync_edges}
    tails, heads = [u for u, _ in plan.dependencies], [v for _, v in plan.dependencies]
    write_graphml_columns(path, ops.column("node"),
                          {K.OP: ops.column("op"), K.NAME: ops.column("name"), K.MEAN_NS: ops.column("work_ns"),
                           "stream": ops.column("stream"), "order": ops.column("order"),
                           "recommended_device": device, "device": device},
                          (tails, heads), {"sync": [True if edge in syncs else None for edge in plan.dependencies]})
    return path


def write_plan_view(plan: StreamPlan, trace_path: str | os.PathLike[str] | None, out_dir: Path) -> dict[str, Path]:
    """Write the predicted schedule (CTF trace + Trace Compass analyses), the plan graph and the plan.

    Returns the paths written, by kind: ``predicted``, ``views``, ``graph.dot``, ``graph.graphml``,
    ``plan.json``, ``report.txt``; above 2,000 ops, ``graph.graphml.gz`` instead of the drawings and
    ``plan.json.gz`` instead of ``plan.json``.
    """
    from tc_analyses.export.tracecompass import write_output  # noqa: PLC0415 - heavy, only here
    from tc_analyses.export.tracecompass.facts import trace_facts  # noqa: PLC0415

    out_dir.mkdir(parents=True, exist_ok=True)
    problem, placement = plan_placement(plan)
    start, offset = _real_trace_clock(trace_path if trace_path is not None else (plan.source or None))
    predicted = write_predicted_trace(out_dir / "predicted", problem, placement, start, offset)
    write_output(out_dir / "views", trace_facts(predicted))
    if len(plan.ops) > DRAWN_GRAPH_NODES:
        graph_files = [_write_large_plan_graph(plan, out_dir / "graph.graphml.gz")]
    else:
        index = {op.node: i for i, op in enumerate(plan.ops)}
        # write_plan_graph keys the assignment by task id; map it back to the graph's node ids.
        by_node = Placement({op.node: placement.assignment[index[op.node]] for op in plan.ops},
                            placement.makespan_ns, placement.schedule, placement.algorithm)
        graph_files = write_plan_graph(out_dir, _plan_graph(plan), by_node)
    data = plan_json(plan)
    if plan.lane == "thread":  # a plan `dfcompass verify` can apply: each thread a CPU lane
        data.update(runnable_plan(plan))
    plan_file = write_plan(out_dir, dumps_indented(data) + "\n", len(plan.ops))
    (out_dir / "report.txt").write_text(plan_text(plan))
    return {"predicted": predicted, "views": out_dir / "views", **{p.name: p for p in graph_files},
            plan_file.name: plan_file, "report.txt": out_dir / "report.txt"}


def runnable_plan(plan: StreamPlan) -> dict[str, Any]:
    """The keys of a placement plan.json that graph programs apply (tracer/graph_program.py): each
    op's lane as device ``cpu:N``, in the predicted start order, and the predicted makespan."""
    rows = sorted(plan.ops, key=lambda op: (op.start_ns, op.end_ns, op.stream, op.order))
    return {"schedule": [{"node": op.name, "op": op.op, "device": f"cpu:{op.stream}", "start_ns": op.start_ns,
                          "end_ns": op.end_ns, "ns": op.work_ns} for op in rows],
            "predicted_makespan_ns": plan.plan_ns, "speedup": plan.speedup, "measured_step_ns": None}
