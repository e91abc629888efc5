"""The results of the stream planner and its constants (see the package docstring)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from collections.abc import Iterator, Sequence
from typing import Any, overload

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


_OP_FIELDS = tuple(f.name for f in fields(PlannedOp))


class PlannedOps(Sequence[PlannedOp]):
    """The plan's ops, kept as one list per :class:`PlannedOp` field (in the fields' order); an op
    is made when it is asked for. A 333k-op plan's objects took 0.9 s that its text never needs.
    Equal to, hashed and printed as the tuple of its ops."""

    __slots__ = ("_columns",)

    def __init__(self, *columns: list[Any]) -> None:
        if len(columns) != len(_OP_FIELDS) or len({len(c) for c in columns}) > 1:
            raise ValueError(f"PlannedOps takes {len(_OP_FIELDS)} columns of one length")
        self._columns = columns

    def column(self, name: str) -> list[Any]:
        """The values of field `name`, one per op."""
        return self._columns[_OP_FIELDS.index(name)]

    def __len__(self) -> int:
        return len(self._columns[0])

    @overload
    def __getitem__(self, index: int) -> PlannedOp: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[PlannedOp, ...]: ...

    def __getitem__(self, index: int | slice) -> PlannedOp | tuple[PlannedOp, ...]:
        if isinstance(index, slice):
            return tuple(map(_op, zip(*(c[index] for c in self._columns))))
        return _op(tuple(c[index] for c in self._columns))

    def __iter__(self) -> Iterator[PlannedOp]:
        return map(_op, zip(*self._columns))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PlannedOps):
            return self._columns == other._columns
        return tuple(self) == other if isinstance(other, tuple) else NotImplemented

    def __hash__(self) -> int:
        return hash(tuple(self))

    def __repr__(self) -> str:
        return repr(tuple(self))

    def json_data(self) -> list[dict[str, Any]]:
        """Each op as the dict of its fields, made from the columns."""
        return [dict(zip(_OP_FIELDS, row)) for row in zip(*self._columns)]


def _op(row: tuple[Any, ...]) -> PlannedOp:
    # The frozen __init__ sets each field through object.__setattr__; filling the instance's dict
    # at once gives an equal op in less than half the time.
    made = object.__new__(PlannedOp)
    made.__dict__.update(zip(_OP_FIELDS, row))
    return made


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
    ops: PlannedOps  # in recorded order
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
