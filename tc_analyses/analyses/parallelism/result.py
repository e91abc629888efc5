"""The results of the stream planner and its constants (see the package docstring)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Iterable

from tc_analyses.analyses.result import Finding

STREAM, THREAD = "stream", "thread"
DEFAULT_GPU_STREAMS = 4  # a few concurrent kernels fill an SM partition; more mostly add syncs
DEFAULT_SYNC_NS = {STREAM: 2_000, THREAD: 5_000}  # event record + wait; a cross-thread handoff
MODEL_NOTE = ("modelled: every {lane} is an independent processor (no contention for SMs, memory bandwidth "
              "or cores), each op costs its measured mean, each sync {sync} ns; the speedup is an upper bound")

Node = Any  # a graph node: int for graphs built from traces



@dataclass(frozen=True)
class PlannedOp:
    """One op of the plan: where it runs and what it waits for."""

    node: Node  # graph node id
    op: str
    name: str
    stream: int  # lane index: stream 0 / thread 0 is the lane of the heaviest chain
    order: int  # position on its lane
    chain: int  # Nimble chain index (chains are numbered heaviest first)
    work_ns: int  # its cost: mean GPU time launched (GPU) or mean duration (CPU)
    start_ns: int  # predicted start in the plan, from the step's start
    end_ns: int
    baseline_start_ns: int  # start on the single lane, recorded order
    waits_for: tuple[Node, ...]  # producers on other lanes whose event this op waits on
    records_event: bool  # a consumer on another lane waits for this op
    on_critical_path: bool

    @classmethod
    def from_columns(cls, *columns: Iterable[Any]) -> tuple[PlannedOp, ...]:
        """One op per row of `columns` (the fields' values, in the fields' order). The frozen
        ``__init__`` sets each field through ``object.__setattr__``: 1.3 s of a 333k-op plan; filling
        each instance's dict at once gives equal ops in 0.5 s."""
        names = tuple(f.name for f in fields(cls))
        new = object.__new__

        def op(row: tuple[Any, ...]) -> PlannedOp:
            made = new(cls)
            made.__dict__.update(zip(names, row))
            return made

        return tuple(map(op, zip(*columns, strict=True)))


@dataclass(frozen=True)
class SyncEdge:
    producer: Node
    consumer: Node
    src_stream: int
    dst_stream: int
    bytes: int  # bytes of the tensor edge (0 when the dependency passes through contracted ops)


@dataclass(frozen=True)
class LaneSummary:
    stream: int
    label: str  # "stream 0" or "thread 0"
    ops: int
    work_ns: int  # sum of its ops' work
    chains: tuple[int, ...]


@dataclass(frozen=True)
class StreamPlan:
    source: str  # trace path, "" for a graph without one
    device: str  # the device planned
    lane: str  # "stream" (GPU) or "thread" (CPU)
    work: str  # "gpu time launched" or "op duration"
    nodes: int
    edges: int  # dependencies among the planned ops (after contraction)
    components: int  # weakly connected parts of the planned DAG
    reduced_edges: int  # after the transitive reduction
    matching: int  # size of the maximum matching
    chains: tuple[tuple[Node, ...], ...]  # heaviest first; each a path of the reduced DAG
    streams: int  # lanes used = min(chains, max_streams)
    max_streams: int
    sync_ns: int
    syncs: int  # synchronisations the plan needs
    redundant_syncs: int  # cross-lane edges implied by lane order and other syncs (after a merge)
    ops: tuple[PlannedOp, ...]  # in recorded order
    sync_edges: tuple[SyncEdge, ...]
    lanes: tuple[LaneSummary, ...]
    dependencies: tuple[tuple[Node, Node], ...]  # the reduced edges
    total_work_ns: int
    critical_path_ns: int
    critical_path: tuple[Node, ...]
    ideal_speedup: float  # total work / critical path: unlimited lanes, free syncs
    width: int | None  # most pairwise independent ops (Dilworth); None when too large to compute
    peak_concurrency: int  # most ops running at once with unlimited lanes, free syncs (ASAP)
    baseline_ns: int  # one lane, recorded order
    plan_ns: int  # the plan, simulated
    speedup: float  # baseline_ns / plan_ns
    model: str  # what the prediction assumes ("modelled: ...")
    unattributed_ns: int  # GPU time no op of the graph launched (GPU plans); 0 otherwise
    findings: tuple[Finding, ...]
