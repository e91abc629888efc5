"""The columns behind :func:`tc_analyses.model.graph.build_graph`: executions folded onto graph nodes
and tensor edges onto graph edges with array operations (sort once, group once), so only the
graph's own nodes and edges are Python objects, never one per execution or per tensor edge."""

from __future__ import annotations

from collections.abc import Collection, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from tc_analyses.model import graph_keys as K
from tc_analyses.model.activity import Activity
from tc_analyses.model.graph_keys import EdgeKind
from tc_analyses.reader.fast import DfcTrace

Array = np.ndarray[Any, Any]


@dataclass
class Executions:
    """One row per dfc:node_begin (in the table's order, an analysis window applied)."""

    node_id: Array
    step: Array  # the activity's numbering where the execution was paired, else the recorded one
    name: Array  # codes into `texts`, shared by name, op and device: equal codes are equal texts
    op: Array
    device: Array
    texts: list[str]
    duration: Array  # of the paired run (0 where none)
    paired: Array  # whether the execution has its dfc:node_end
    shapes: Array  # codes into `texts` of the node_args of the execution, -1: none recorded
    dtypes: Array


@dataclass
class Folded:
    """Executions folded onto graph nodes: keyed by (name, op, device, occurrence in its step)."""

    kept: Array  # the rows in the chosen steps
    node: Array  # graph node of each kept row
    occurrence: Array  # of each row (all of them)
    first_row: Array  # per node, its first row among the kept rows
    shapes: Array  # per node: text codes (-1: none)
    dtypes: Array


def executions(trace: DfcTrace, activity: Activity, only: Collection[int] | None) -> Executions:
    begins = trace.table("node_begin")
    node_id = begins["node_id"].astype(np.int64)
    step = begins["step"].astype(np.int64)
    keep = np.ones(len(node_id), dtype=bool) if only is None else \
        np.isin(node_id, np.fromiter(only, dtype=np.int64, count=len(only)))
    texts: dict[str, int] = {}

    def codes(sids: Array, text_of: Any) -> Array:
        unique, inverse = np.unique(sids, return_inverse=True)
        mapped = np.array([texts.setdefault(text_of(s) or "", len(texts)) for s in unique.tolist()], dtype=np.int64)
        return mapped[inverse.reshape(-1)] if len(unique) else np.zeros(len(sids), dtype=np.int64)

    strings = begins.strings
    known = lambda sid: strings[sid] if 0 <= sid < len(strings) else None  # noqa: E731 - a damaged id is no text
    name, op = codes(begins["name"][keep], known), codes(begins["op"][keep], known)
    device = codes(begins["device"][keep], lambda index: activity.device(index).name)
    node_id, step = node_id[keep], step[keep]
    runs = activity.nodes
    run_at = _last_row_of(runs.column("node_id"), node_id)  # a node id paired twice: the last run, as a dict keeps
    paired = run_at >= 0
    step = np.where(paired, runs.column("step")[np.maximum(run_at, 0)] if len(runs) else 0, step)
    duration = np.zeros(len(node_id), dtype=np.int64)
    if len(runs):
        ends, starts = runs.column("end"), runs.column("start")
        duration[paired] = ends[run_at[paired]] - starts[run_at[paired]]
    args = trace.table("node_args")
    arg_at = _last_row_of(args["node_id"].astype(np.int64), node_id)
    shapes = np.full(len(node_id), -1, dtype=np.int64)
    dtypes = np.full(len(node_id), -1, dtype=np.int64)
    with_args = arg_at >= 0
    if with_args.any():
        shapes[with_args] = codes(args["shapes"], known)[arg_at[with_args]]
        dtypes[with_args] = codes(args["dtypes"], known)[arg_at[with_args]]
    return Executions(node_id, step, name, op, device, list(texts), duration, paired, shapes, dtypes)


def _last_row_of(ids: Array, wanted: Array) -> Array:
    """Per wanted id, the last row of `ids` holding it; -1 where none does."""
    if not len(ids):
        return np.full(len(wanted), -1, dtype=np.int64)
    order = np.argsort(ids, kind="stable")
    at = np.searchsorted(ids[order], wanted, side="right") - 1
    found = (at >= 0) & (ids[order][np.maximum(at, 0)] == wanted)
    return np.where(found, order[np.maximum(at, 0)], -1)


def _groups(*keys: Array) -> tuple[Array, Array]:
    """(group of each row, in order of first appearance; and each group's first row)."""
    combined = _combined_key(keys)
    if combined is not None:  # one integer key, one sort
        distinct, inverse = np.unique(combined, return_inverse=True)
        first = np.empty(len(distinct), dtype=np.int64)
        rows = np.arange(len(inverse), dtype=np.int64)
        first[inverse[::-1]] = rows[::-1]  # the last write of each group is its first row
        rank = np.empty(len(first), dtype=np.int64)
        by_appearance = np.argsort(first, kind="stable")
        rank[by_appearance] = np.arange(len(first))
        return rank[inverse], first[by_appearance]
    rows = np.arange(len(keys[0]), dtype=np.int64)
    order = np.lexsort((rows, *reversed(keys)))
    changed = np.zeros(len(rows), dtype=bool)
    if len(rows):
        changed[0] = True
        for key in keys:
            changed[1:] |= key[order][1:] != key[order][:-1]
    sorted_group = np.cumsum(changed) - 1
    firsts = order[changed]  # first row of each group (rows ascending within a group)
    rank = np.empty(len(firsts), dtype=np.int64)
    rank[np.argsort(firsts, kind="stable")] = np.arange(len(firsts))
    group = np.empty(len(rows), dtype=np.int64)
    group[order] = rank[sorted_group]
    return group, np.sort(firsts)


def _combined_key(keys: tuple[Array, ...]) -> Array | None:
    """The keys as one mixed-radix integer (equal rows, equal keys; ordered as the keys), or None
    when a key is negative or the ranges' product does not fit 62 bits."""
    if not len(keys[0]) or any(int(key.min()) < 0 for key in keys):
        return None
    widths = [int(key.max()) + 1 for key in keys]
    if int(np.prod(np.array(widths, dtype=object))) >= 1 << 62:
        return None
    combined = keys[0].astype(np.int64)
    for key, width in zip(keys[1:], widths[1:]):
        combined = combined * width + key
    return combined


def fold(rows: Executions, steps: Collection[int] | None) -> Folded:
    """Each execution's occurrence index (earlier executions of its (step, name, op, device)) and
    graph node; the node's shapes: the first of its executions with shapes recorded, else the
    last with node_args, else one from an execution outside the chosen steps."""
    step_group, _ = _groups(rows.step, rows.name, rows.op, rows.device)
    occurrence = _rank_in_group(step_group)
    kept = np.ones(len(step_group), dtype=bool) if steps is None else \
        np.isin(rows.step, np.fromiter(steps, dtype=np.int64, count=len(steps)))
    keys = (rows.name, rows.op, rows.device, occurrence)
    node, first = _groups(*(key[kept] for key in keys))
    kept_rows = np.flatnonzero(kept)
    nodes = len(first)
    shapes, dtypes = np.full(nodes, -1, np.int64), np.full(nodes, -1, np.int64)
    empty = rows.texts.index("") if "" in rows.texts else -2
    has_args = rows.shapes[kept_rows] >= 0
    filled = has_args & (rows.shapes[kept_rows] != empty)
    last_any = _pick(node, has_args, last=True)
    first_filled = _pick(node, filled, last=False)
    chosen = np.where(first_filled >= 0, first_filled, last_any)
    shapes[chosen >= 0] = rows.shapes[kept_rows[chosen[chosen >= 0]]]
    dtypes[chosen >= 0] = rows.dtypes[kept_rows[chosen[chosen >= 0]]]
    spare = np.flatnonzero(~kept & (rows.shapes >= 0))  # outside the steps: shapes recorded in a warm-up
    if len(spare) and nodes:
        missing = (shapes < 0) | (shapes == empty)
        node_key, _ = _groups(*(np.concatenate([key[kept_rows[first]], key[spare]]) for key in keys))
        spare_group = node_key[nodes:]
        first_spare = np.full(int(node_key.max()) + 1, -1, dtype=np.int64)
        first_spare[spare_group[::-1]] = spare[::-1]  # the first spare row of each key
        from_spare = first_spare[node_key[:nodes]]
        take = missing & (from_spare >= 0)
        shapes[take], dtypes[take] = rows.shapes[from_spare[take]], rows.dtypes[from_spare[take]]
    return Folded(kept_rows, node, occurrence, first, shapes, dtypes)


def _rank_in_group(group: Array) -> Array:
    """Per row, how many earlier rows share its group."""
    order = np.argsort(group, kind="stable")
    starts = np.ones(len(group), dtype=bool)
    starts[1:] = group[order][1:] != group[order][:-1]
    index = np.arange(len(group), dtype=np.int64)
    rank = np.empty(len(group), dtype=np.int64)
    rank[order] = index - np.maximum.accumulate(np.where(starts, index, 0))
    return rank


def _pick(group: Array, mask: Array, last: bool) -> Array:
    """Per group, the first (or last) row index where mask holds; -1 where none does."""
    out = np.full(int(group.max()) + 1 if len(group) else 0, -1, dtype=np.int64)
    rows = np.flatnonzero(mask)
    if last:
        out[group[rows]] = rows
    else:
        out[group[rows[::-1]]] = rows[::-1]
    return out


@dataclass(frozen=True)
class NodeColumns:
    """Per graph node (in node order): its key, execution counts and duration statistics."""

    name: Array  # codes into the executions' texts
    op: Array
    device: Array
    occurrence: Array
    executions: Array
    measured: Array  # executions with their end event
    total_ns: Array  # sum of the measured durations
    low: Array  # the lower and upper middle durations (the median's parts)
    high: Array
    p10: Array
    p90: Array
    smallest: Array
    largest: Array
    shapes: Array  # codes (-1: none)
    dtypes: Array
    offsets: Array  # node i's measured durations are durations[offsets[i]:offsets[i + 1]]
    durations: Array  # recorded order within each node

    def __len__(self) -> int:
        return len(self.name)

    def mean_ns(self) -> Array:
        """``round(total / measured)`` per node (0 where none measured), as Python rounds it."""
        has = self.measured > 0
        quotient = np.divide(self.total_ns, self.measured, out=np.zeros(len(has)), where=has)
        mean = np.rint(quotient).astype(np.int64)
        # Past 2**53 numpy rounds the total to a float before dividing, Python divides exactly first.
        for row in np.flatnonzero(has & (np.abs(self.total_ns) >= 1 << 53)).tolist():
            mean[row] = round(int(self.total_ns[row]) / int(self.measured[row]))
        return mean

    def median_ns(self) -> Array:
        """The median measured duration per node (0 where none measured): the middle one, or the
        two middle ones' mean rounded half to even, as Python's ``round`` does."""
        middle = np.rint((self.low + self.high) / 2).astype(np.int64)
        median = np.where(self.measured % 2 == 1, self.low, middle)
        return np.where(self.measured > 0, median, 0)


def node_columns(rows: Executions, nodes: Folded) -> NodeColumns:
    """The :class:`NodeColumns` of the folded executions: sort once, group once."""
    kept = nodes.kept
    duration = rows.duration[kept]
    paired = rows.paired[kept]
    count = np.bincount(nodes.node, minlength=len(nodes.first_row))
    measured = np.bincount(nodes.node[paired], minlength=len(nodes.first_row))
    in_order = np.lexsort((np.arange(len(kept)), nodes.node))  # each node's executions, in recorded order
    in_order = in_order[paired[in_order]]
    by_value = np.lexsort((duration[in_order], nodes.node[in_order]))
    ascending = duration[in_order][by_value]
    offsets = np.concatenate([[0], np.cumsum(measured)]).astype(np.int64)
    sums = np.zeros(len(measured), dtype=np.int64)
    np.add.at(sums, nodes.node[paired], duration[paired])
    n = measured
    at = lambda index: ascending[np.clip(offsets[:-1] + index, 0, max(len(ascending) - 1, 0))] \
        if len(ascending) else np.zeros(len(n), np.int64)  # noqa: E731
    first = nodes.first_row
    return NodeColumns(
        name=rows.name[kept][first], op=rows.op[kept][first], device=rows.device[kept][first],
        occurrence=nodes.occurrence[kept][first], executions=count, measured=n, total_ns=sums,
        low=at((n - 1) // 2), high=at(n // 2),
        p10=at(np.round(0.1 * (n - 1)).astype(np.int64)), p90=at(np.round(0.9 * (n - 1)).astype(np.int64)),
        smallest=at(np.zeros(len(n), np.int64)), largest=at(n - 1), shapes=nodes.shapes, dtypes=nodes.dtypes,
        offsets=offsets, durations=duration[in_order])


def node_attributes(columns: NodeColumns, texts: list[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """(node, attributes) of every graph node, in node order."""
    recorded = columns.durations.tolist()
    unmatched = (columns.executions - columns.measured).tolist()
    rows = zip(range(len(columns)), columns.name.tolist(), columns.op.tolist(), columns.device.tolist(),
               columns.occurrence.tolist(), columns.executions.tolist(), columns.measured.tolist(),
               columns.total_ns.tolist(), columns.low.tolist(), columns.high.tolist(), columns.p10.tolist(),
               columns.p90.tolist(), columns.smallest.tolist(), columns.largest.tolist(), unmatched,
               columns.shapes.tolist(), columns.dtypes.tolist(), columns.offsets.tolist())
    for node, name, op, device, k, execs, m, total, lo, hi, q10, q90, least, most, lost, shape, dtype, begin in rows:
        has = m > 0
        median = (lo if m % 2 else round((lo + hi) / 2)) if has else 0
        device_name = texts[device]
        yield node, {
            K.OP: texts[op], K.NAME: texts[name], K.DEVICE: device_name, K.OCCURRENCE: k, K.EXECUTIONS: execs,
            K.DURATIONS_NS: recorded[begin:begin + m],
            K.MEAN_NS: round(total / m) if has else 0, K.MEDIAN_NS: median,
            K.P10_NS: q10 if has else 0, K.P90_NS: q90 if has else 0,
            K.MIN_NS: least if has else 0, K.MAX_NS: most if has else 0,
            # Measured on its own device only when every execution has its end event.
            K.MEASURED: {device_name: has and lost == 0},
            K.INPUT_SHAPES: texts[shape] if shape >= 0 else "", K.INPUT_DTYPES: texts[dtype] if dtype >= 0 else "",
        }


Edge = tuple[int, int, dict[str, Any]]


@dataclass(frozen=True)
class EdgeColumns:
    """Tensor edges aggregated per (producer node, consumer node), in order of first appearance."""

    producer: Array
    consumer: Array
    bytes: Array  # the largest step's bytes
    count: Array  # tensor edges folded into it
    src_device: Array  # codes into the executions' texts
    dst_device: Array

    def __len__(self) -> int:
        return len(self.producer)

    def tuples(self, texts: list[str]) -> list[Edge]:
        """``(u, v, attributes)`` of each edge, as the graph holds them."""
        return [(a, b, {K.KIND: EdgeKind.DATA if s == d else EdgeKind.TRANSFER, K.BYTES: size, K.COUNT: n,
                        K.SRC_DEVICE: texts[s], K.DST_DEVICE: texts[d]})
                for a, b, size, n, s, d in zip(self.producer.tolist(), self.consumer.tolist(), self.bytes.tolist(),
                                               self.count.tolist(), self.src_device.tolist(),
                                               self.dst_device.tolist())]


def edge_columns(trace: DfcTrace, rows: Executions, nodes: Folded) -> tuple[EdgeColumns, EdgeColumns]:
    """(edges within a step, edges between steps), each aggregated per (producer node, consumer
    node) in order of first appearance: bytes summed per step, the largest step kept."""
    table = trace.table("tensor_edge")
    ids = rows.node_id[nodes.kept]
    node_of = _last_row_of(ids, table["producer"].astype(np.int64)), _last_row_of(ids, table["consumer"].astype(np.int64))
    present = (node_of[0] >= 0) & (node_of[1] >= 0)  # an end not recorded: lost events, a partial trace
    at_u, at_v = node_of[0][present], node_of[1][present]
    u, v = nodes.node[at_u], nodes.node[at_v]
    step_u, step_v = rows.step[nodes.kept][at_u], rows.step[nodes.kept][at_v]
    nbytes = table["bytes"].astype(np.int64)[present]
    same = step_u == step_v
    useful = ~same | (u != v)  # an execution feeding itself carries no dependency
    u, v, step_v, nbytes, same = u[useful], v[useful], step_v[useful], nbytes[useful], same[useful]
    device = rows.device[nodes.kept][nodes.first_row]
    out: list[EdgeColumns] = []
    for part in (same, ~same):
        pu, pv, ps, pb = u[part], v[part], step_v[part], nbytes[part]
        pair, first = _groups(pu, pv)
        per_step, _ = _groups(pair, ps)
        step_bytes = np.zeros(int(per_step.max()) + 1 if len(per_step) else 0, dtype=np.int64)
        np.add.at(step_bytes, per_step, pb)
        pair_of_step = np.zeros(len(step_bytes), dtype=np.int64)
        pair_of_step[per_step] = pair
        largest = np.zeros(len(first), dtype=np.int64)
        np.maximum.at(largest, pair_of_step, step_bytes)
        count = np.bincount(pair, minlength=len(first))
        out.append(EdgeColumns(pu[first], pv[first], largest, count, device[pu[first]], device[pv[first]]))
    return out[0], out[1]
