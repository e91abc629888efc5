"""A trace's tensor edges against PyTorch's execution trace of the same run: precision and recall.

PyTorch's ExecutionTraceObserver (Chakra's execution trace, "ET") records every op's input and
output tensors with their storage ids, from another hook than the profiler dfcompass records
with, so it is an independent graph. From it, per top-level aten op in order:

* an op *writes* a storage it outputs without having read it (a new tensor), or the one it takes
  in place (``op_`` writes its first argument, ``self``);
* an op *reads* the storages of its inputs (a storage of zero bytes is no buffer: left out);
* ``lift_fresh`` (what ``torch.tensor`` and ``as_tensor`` call) takes a new tensor: one an op
  just output (``torch.tensor`` of Python data: ``empty``, then ``to``), read as usual, or one made
  outside any op (numpy's buffer), which reads no op's output: ``lift_fresh`` writes it.

The observer keys storages by address and records no free, so a buffer made outside any op at a
freed tensor's address looks like that tensor's. A read with another dtype than the last write
(a Python number wrapped as a double, a numpy image) is such a buffer, not the writer's.

An edge of ours is *right* when its producer wrote and its consumer read one storage (at any
time: a storage can be written twice). *Recall* counts the last-writer edges (the writer a read
sees) that we found. The ops of the two graphs are aligned by name and order.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import ijson

from tc_analyses.errors import DfcompassError

ALIGN_WINDOW = 64  # ops skipped on either side to find the next common op


@dataclass(frozen=True)
class EtGraph:
    names: list[str]  # top-level aten ops, in order
    allowed: set[tuple[int, int]]  # (writer, reader) pairs of one storage
    last: set[tuple[int, int]]  # (last writer, reader) pairs
    truncated: bool = False  # the file ends early (its program died): the ops up to there


@dataclass
class EdgeCheck:
    ops_ours: int
    ops_et: int
    ops_matched: int
    edges: int  # our edges between matched ops (distinct producer, consumer pairs)
    false_edges: int
    last_writer_edges: int  # the observer's, between matched ops
    found: int
    duplicates: int  # edges with the same producer, consumer and tensor as another
    unmatched_edges: int  # our edges with an op the observer lacks (not counted either way)
    et_truncated: bool = False  # the execution trace ends early: ops after its end are unmatched
    false_examples: list[tuple[str, str, int]] = field(default_factory=list)  # producer op, consumer op, count
    missing_examples: list[tuple[str, str, int]] = field(default_factory=list)

    @property
    def precision(self) -> float | None:
        return (self.edges - self.false_edges) / self.edges if self.edges else None

    @property
    def recall(self) -> float | None:
        return self.found / self.last_writer_edges if self.last_writer_edges else None


def _tensors(value: Any) -> list[list[Any]]:
    """ET tensor values ([id, storage id, offset, numel, itemsize, device]), nested lists flattened."""
    if isinstance(value, list) and len(value) == 6 and isinstance(value[5], str) and all(
            isinstance(v, int) for v in value[:5]):
        return [value]
    if isinstance(value, list):
        return [t for v in value for t in _tensors(v)]
    return []


def _storages(values: list[Any], types: list[Any] | None = None) -> dict[int, str]:
    """Buffer key -> dtype of the tensors on it (the item size, e.g. ``8B``, where the types do not
    say). A dense tensor's key is its storage id (numel x itemsize > 0: a real buffer); a sparse
    tensor, which the observer gives no storage (id 0, no device), is known by its tensor id
    (negative keys); an undefined tensor looks the same but has no dtype and is left out."""
    keys: dict[int, str] = {}
    for position, value in enumerate(values):
        tensors = _tensors(value)
        dtypes = _DTYPE.findall(types[position]) if types and position < len(types) and isinstance(
            types[position], str) else []
        for k, t in enumerate(tensors):
            kind = dtypes[k] if len(dtypes) == len(tensors) else f"{t[4]}B"
            if t[3] * t[4] > 0:
                keys[t[1]] = kind
            elif t[1] == 0 and t[5] == "" and t[0] > 0 and not kind.startswith(_UNDEFINED):
                keys[-t[0]] = kind
    return keys


_DTYPE = re.compile(r"Tensor\(([^()]*(?:\([^)]*\))?)\)")
_UNDEFINED = "nullptr"  # an undefined tensor (an absent grad_input, weight=None): no buffer
FRESH_INPUT_OPS = frozenset({"aten::lift_fresh", "aten::lift", "aten::lift_fresh_copy"})


def read_et(path: Path) -> EtGraph:
    """The observer's top-level aten ops and their storage pairs. The file is streamed (an
    observer's trace of a long run is gigabytes): of each node only its tensors are kept. A file
    cut short (the observer writes as the program runs; a program that dies leaves it so) gives
    the ops up to the cut."""
    nodes: list[dict[str, Any]] = []
    truncated = False
    try:
        with open(path, "rb") as stream:
            try:
                for node in ijson.items(stream, "nodes.item", use_float=True):
                    nodes.append(_compact(node))
            except ijson.IncompleteJSONError as exc:
                if not nodes or "premature EOF" not in str(exc):
                    raise
                truncated = True
        if not nodes and not _has_nodes(Path(path)):
            raise KeyError("nodes")
        return replace(_graph(nodes), truncated=truncated)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, ijson.JSONError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else ""
        raise DfcompassError(f"{path}: not an execution trace ({type(exc).__name__}: {reason})") from exc


def _compact(node: dict[str, Any]) -> dict[str, Any]:
    """A node with what the graph reads: id, name, parent, and its tensors (other values None)."""
    def side(values: dict[str, Any]) -> dict[str, Any]:
        kept = [v if _tensors(v) else None for v in values["values"]]
        types = values.get("types") or []
        return {"values": kept, "types": [t if v is not None else "" for v, t in zip(kept, types)]}

    return {"id": node["id"], "name": node["name"], "ctrl_deps": node.get("ctrl_deps"),
            "inputs": side(node["inputs"]), "outputs": side(node["outputs"])}


def _has_nodes(path: Path) -> bool:
    """Whether the file has a "nodes" list at the top (an empty one is a trace with no ops)."""
    with open(path, "rb") as stream:
        return any(prefix == "nodes" and event == "start_array" for prefix, event, _ in ijson.parse(stream))


def _graph(nodes: list[dict[str, Any]]) -> EtGraph:
    by_id = {n["id"]: n for n in nodes}
    top = sorted((n for n in nodes if n["name"].startswith("aten::")
                  and not by_id.get(n.get("ctrl_deps"), {}).get("name", "").startswith("aten::")),
                 key=lambda n: n["id"])
    inner = _inner_outputs(nodes, by_id, {n["id"] for n in top})
    writers: dict[int, list[int]] = {}
    written_kind: dict[int, str] = {}  # storage -> dtype of its last write
    inner_writers: dict[int, list[int]] = {}
    inner_kind: dict[int, str] = {}
    aliases: dict[int, set[int]] = {}  # sparse tensor key -> the buffers it was built on
    allowed: set[tuple[int, int]] = set()
    last: set[tuple[int, int]] = set()
    output_at: dict[int, int] = {}  # tensor id -> the last op that output it
    for index, node in enumerate(top):
        inputs = node["inputs"]["values"]
        fresh = node["name"] in FRESH_INPUT_OPS and _made_outside_ops(inputs, output_at, writers)
        reads = {} if fresh else _storages(inputs, node["inputs"].get("types"))
        # A sparse tensor built from index and value tensors keeps their buffers: reading it
        # reads them too (allowed, not required).
        aliased = {buffer for key in reads if key < 0 for buffer in aliases.get(key, ())}
        for storage in reads.keys() | aliased:
            for writer in writers.get(storage, ()):
                allowed.add((writer, index))
        for storage, kind in reads.items():
            inner_last = inner_writers.get(storage, [-1])[-1]
            if storage in writers and written_kind[storage] == kind and writers[storage][-1] > inner_last:
                last.add((writers[storage][-1], index))
            elif inner_last >= 0 and inner_kind[storage] == kind:
                # An inner op wrote it since (batch norm's saved statistics, where an older add's output was).
                last.add((inner_last, index))
        written = {k: v for k, v in _storages(node["outputs"]["values"], node["outputs"].get("types")).items()
                   if k not in reads}
        if fresh:
            written.update(_storages(inputs[:1], node["inputs"].get("types", [])[:1]))
        if "sparse_coo_tensor" in node["name"] or "sparse_csr_tensor" in node["name"]:
            for key in written:
                if key < 0:
                    aliases[key] = {k for k in reads if k > 0}
        if node["name"].endswith("_") and inputs:  # in place: it writes `self`
            written.update(_storages(inputs[:1], node["inputs"].get("types", [])[:1]))
        for storage, kind in written.items():
            writers.setdefault(storage, []).append(index)
            written_kind[storage] = kind
        for tensor in _tensors(node["outputs"]["values"]):
            output_at[tensor[0]] = index
        # What its inner ops made (saved for backward: dropout's mask, nll_loss's total weight) may
        # be read later too; the observer lists them under the inner ops only. Allowed; required
        # where no op wrote the storage since.
        made_inside = inner.get(node["id"], {})
        for storage in made_inside.keys() - reads.keys() - written.keys():
            inner_writers.setdefault(storage, []).append(index)
            inner_kind[storage] = made_inside[storage]
        for storage in reads:
            for writer in inner_writers.get(storage, ()):
                if writer < index:
                    allowed.add((writer, index))
    return EtGraph([n["name"] for n in top], allowed, last)


def _made_outside_ops(inputs: list[Any], output_at: dict[int, int], writers: dict[int, list[int]]) -> bool:
    """Whether the first input of a fresh-tensor op was made outside any op: no op output that
    tensor since its buffer's last write (the observer reuses the ids of freed tensors too)."""
    tensors = _tensors(inputs[0]) if inputs else []
    if not tensors:
        return False
    tensor_id, storage = tensors[0][0], tensors[0][1]
    last_write = writers.get(storage, [-1])[-1]
    return last_write < 0 or output_at.get(tensor_id, -1) < last_write


def _inner_outputs(nodes: list[dict[str, Any]], by_id: dict[int, dict[str, Any]],
                   top: set[int]) -> dict[int, dict[int, str]]:
    """Top-level op id -> the buffers that the ops inside it output."""
    owner: dict[int, int | None] = {i: i for i in top}  # node id -> its top-level op (memoised)

    def owner_of(node_id: int) -> int | None:
        chain = []
        while node_id not in owner:
            chain.append(node_id)
            parent = by_id.get(node_id, {}).get("ctrl_deps")
            if parent is None or parent == node_id or parent not in by_id or len(chain) > len(by_id):
                node_id = -1
                owner[-1] = None
                break
            node_id = parent
        found = owner[node_id]
        for link in chain:
            owner[link] = found
        return found

    made: dict[int, dict[int, str]] = {}
    for node in nodes:
        if node["id"] in top:
            continue
        parent = owner_of(node["id"])
        if parent is not None:
            made.setdefault(parent, {}).update(_storages(node["outputs"]["values"], node["outputs"].get("types")))
    return made


def align(ours: list[str], theirs: list[str], window: int = ALIGN_WINDOW) -> dict[int, int]:
    """Ops matched one to one by name and order: equal names advance both; else the smallest
    skip (up to `window` ops) on one side that makes the names equal. Linear in the op count."""
    matched: dict[int, int] = {}
    i = j = 0
    while i < len(ours) and j < len(theirs):
        if ours[i] == theirs[j]:
            matched[i] = j
            i, j = i + 1, j + 1
            continue
        for skip in range(1, window + 1):
            if j + skip < len(theirs) and ours[i] == theirs[j + skip]:
                j += skip
                break
            if i + skip < len(ours) and ours[i + skip] == theirs[j]:
                i += skip
                break
        else:
            i, j = i + 1, j + 1
    return matched


def check_edges(trace: Path, et_path: Path) -> EdgeCheck:
    """Compare `trace`'s tensor edges with the execution trace at `et_path` (same run)."""
    from tc_analyses.reader import read_trace

    et = read_et(et_path)
    t = read_trace(trace)
    begin = t.table("node_begin")
    order = sorted(zip(begin["timestamp"].tolist(), begin["node_id"].tolist(), begin.text("op")))
    index = {node: i for i, (_, node, _) in enumerate(order)}
    names = [op for _, _, op in order]
    edges = t.table("tensor_edge")
    triples = list(zip(edges["producer"].tolist(), edges["consumer"].tolist(), edges["tensor_id"].tolist()))
    pairs = {(index[p], index[c]) for p, c, _ in triples if p in index and c in index}
    to_et = align(names, et.names)
    mapped = {(to_et[p], to_et[c]) for p, c in pairs if p in to_et and c in to_et}
    matched = set(to_et.values())
    last = {(p, c) for p, c in et.last if p in matched and c in matched}
    false = mapped - et.allowed
    missing = last - mapped
    return EdgeCheck(
        ops_ours=len(names), ops_et=len(et.names), ops_matched=len(to_et), edges=len(mapped),
        false_edges=len(false), last_writer_edges=len(last), found=len(last & mapped),
        duplicates=len(triples) - len(set(triples)), unmatched_edges=len(pairs) - sum(
            1 for p, c in pairs if p in to_et and c in to_et), et_truncated=et.truncated,
        false_examples=_examples(false, et.names), missing_examples=_examples(missing, et.names))


def _examples(pairs: set[tuple[int, int]], names: list[str], top: int = 5) -> list[tuple[str, str, int]]:
    counts = Counter((names[p], names[c]) for p, c in pairs)
    return [(p, c, n) for (p, c), n in counts.most_common(top)]
