"""Placement problems from a graph file: a node-link JSON graph with each node's cost per device.

The format is the JSON Schema ``graph_file.schema.json`` beside this module
(``docs/graph-file.schema.json``; ``docs/placement.md`` has an example). A node's cost is null on a
device it may not run on; ``graph.links`` sets the transfer model of device pairs (latency and
bandwidth), the device table the others. A file that breaks the schema or the rules the schema
cannot say (a cycle, a node without a cost on one of the devices asked for) gives one line naming
the file, the place in it and the problem.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Annotated, Any, Callable, Iterable, Iterator, Literal

import msgspec

from tc_analyses.perf.devices import default_link
from tc_analyses.perf.problem import Cost, CostSource, Device, Link, PlacementError, PlacementProblem, Task
from tracer.bounded_io import GRAPH_LIMIT, load_json, read_bounded

SCHEMA = Path(__file__).with_name("graph_file.schema.json")


@cache
def _validator() -> Any:
    import jsonschema

    return jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text()))


@cache
def _compiled() -> Callable[[Any], Any]:
    import fastjsonschema

    return fastjsonschema.compile(json.loads(SCHEMA.read_text()))


def schema_error(data: Any) -> Any:
    """The first place where `data` breaks the schema (a jsonschema error), or None. The compiled
    validator says whether it does (0.1 s on 10k nodes, where jsonschema takes 3.5 s); jsonschema,
    the reference, says where, only for a file that fails."""
    import fastjsonschema

    try:
        _compiled()(data)
        return None
    except fastjsonschema.JsonSchemaException:
        return next(iter(sorted(_validator().iter_errors(data), key=lambda e: list(e.absolute_path))), None)


# The schema as msgspec types, for the files it accepts, decoded and checked in one pass (the
# schema check alone took 0.2 s of a 10k-node plan). They are never looser than the schema: what
# they refuse (an integer written 1.0, NaN, the edge list under "links") takes the schema's route,
# which accepts it or says where it breaks.
_Count = Annotated[int, msgspec.Meta(ge=0)]
_Amount = _Count | Annotated[float, msgspec.Meta(ge=0)]


class _LinkSpec(msgspec.Struct, forbid_unknown_fields=True):
    src: str
    dst: str
    latency_ns: _Amount
    gb_per_s: Annotated[int, msgspec.Meta(gt=0)] | Annotated[float, msgspec.Meta(gt=0)]


class _GraphSpec(msgspec.Struct):
    links: list[_LinkSpec] = []


class _NodeSpec(msgspec.Struct):
    id: str | int
    costs: dict[str, _Amount | None]
    name: str | msgspec.UnsetType = msgspec.UNSET
    op: str | msgspec.UnsetType = msgspec.UNSET
    actual_device: str | msgspec.UnsetType = msgspec.UNSET
    memory_bytes: _Count | msgspec.UnsetType = msgspec.UNSET


class _EdgeSpec(msgspec.Struct):
    source: str | int
    target: str | int
    bytes: _Count | msgspec.UnsetType = msgspec.UNSET


class _FileSpec(msgspec.Struct):
    nodes: list[_NodeSpec]
    edges: list[_EdgeSpec] = []
    links: Any = msgspec.UNSET  # networkx's older key for the edges: the schema's route reads it
    directed: Literal[True] = True
    multigraph: Literal[False] | msgspec.UnsetType = msgspec.UNSET
    graph: _GraphSpec = msgspec.field(default_factory=_GraphSpec)


_NODE_ATTRIBUTES = ("costs", "name", "op", "actual_device", "memory_bytes")
_DECODER = msgspec.json.Decoder(_FileSpec)


def _typed_graph(text: bytes) -> _FileSpec | None:
    """The file as the schema's types, or None where the schema's route must decide. msgspec skips
    the keys it does not read without checking their UTF-8, so the whole text is checked first."""
    try:
        text.decode("utf-8")
        spec = _DECODER.decode(text)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return None
    return spec if spec.links is msgspec.UNSET else None


def _entries_of(spec: _FileSpec) -> tuple[list[tuple[Any, dict[str, Any]]], list[tuple[Any, Any, dict[str, Any]]]]:
    """(id, attributes) per node and (source, target, attributes) per edge, with the keys the file gave."""
    unset = msgspec.UNSET
    nodes = [(n.id, {k: v for k in _NODE_ATTRIBUTES if (v := getattr(n, k)) is not unset}) for n in spec.nodes]
    edges = [(e.source, e.target, {} if e.bytes is unset else {"bytes": e.bytes}) for e in spec.edges]
    return nodes, edges


def read_graph_file(path: Path) -> dict[str, Any]:
    """The file's JSON, checked against the schema; PlacementError (one line) otherwise."""
    try:
        data = load_json(path, GRAPH_LIMIT, "a graph file")
    except OSError as exc:
        raise PlacementError(f"{path}: {exc.strerror or exc}") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise PlacementError(f"{path}: not a node-link JSON graph ({' '.join(str(exc).split())})") from None
    error = schema_error(data)
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "the top level"
        raise PlacementError(f"{path}: {where}: {' '.join(error.message.split())[:200]} "
                             "(see docs/graph-file.schema.json)")
    return dict(data)


def problem_from_graph_file(path: Path, devices: list[Device]) -> PlacementProblem:
    """The placement problem a graph file poses on `devices`."""
    try:
        typed = _typed_graph(read_bounded(path, GRAPH_LIMIT, "a graph file"))
    except OSError as exc:
        raise PlacementError(f"{path}: {exc.strerror or exc}") from None
    if typed is not None:
        nodes, edge_list = _node_link(path, *_entries_of(typed), multigraph=typed.multigraph is msgspec.UNSET)
        link_specs: list[dict[str, Any]] = [
            {"src": k.src, "dst": k.dst, "latency_ns": k.latency_ns, "gb_per_s": k.gb_per_s} for k in typed.graph.links]
    else:
        data = read_graph_file(path)
        nodes, edge_list = _node_link(path, *_entries_from_json(data), multigraph=data.get("multigraph", True))
        link_specs = data.get("graph", {}).get("links", [])
    names = [d.name for d in devices]
    ids = {node: i for i, node in enumerate(nodes)}
    tasks, costs, forbidden = [], {}, set()
    for node, attrs in nodes.items():
        node_costs = attrs.get("costs") or {}
        missing = [d for d in names if d not in node_costs]
        if missing:
            raise PlacementError(f"{path}: node {node!r} has no cost on {', '.join(missing)}")
        if all(node_costs[d] is None for d in names):
            raise PlacementError(f"{path}: node {node!r} may run on none of {', '.join(names)}")
        tasks.append(Task(ids[node], str(attrs.get("name", node)), str(attrs.get("op", "")),
                          attrs.get("actual_device"), _amount(path, f"node {node!r}: memory_bytes",
                                                              attrs.get("memory_bytes", 0))))
        for device in names:
            if node_costs[device] is None:
                forbidden.add((ids[node], device))
            else:
                cost = _amount(path, f"node {node!r}: cost on {device}", node_costs[device])
                costs[(ids[node], device)] = Cost(cost, CostSource.MEASURED)
    edges = {(ids[u], ids[v]): _amount(path, f"edge {u!r} -> {v!r}: bytes", a.get("bytes", 0)) for u, v, a in edge_list}
    links = {(a.name, b.name): default_link(a, b) for a in devices for b in devices if a.name != b.name}
    for spec in link_specs:
        if (spec["src"], spec["dst"]) not in links:
            raise PlacementError(f"{path}: graph/links: {spec['src']} -> {spec['dst']} is not a pair of "
                                 f"--devices ({', '.join(names)})")
        where = f"graph/links: {spec['src']} -> {spec['dst']}"
        latency = _amount(path, f"{where}: latency_ns", spec["latency_ns"])
        rate = float(spec["gb_per_s"])
        if not 1e-9 <= rate <= AMOUNT_LIMIT:
            raise PlacementError(f"{path}: {where}: gb_per_s {rate!r} is not a rate from 1e-9 to 2^53 GB/s")
        links[(spec["src"], spec["dst"])] = Link(float(latency), rate, "graph file")
    problem = PlacementProblem(tasks, devices, costs, edges, links, forbidden=frozenset(forbidden))
    try:
        problem.topological_order()
    except PlacementError:
        raise PlacementError(f"{path}: the graph has a cycle; placement needs a DAG") from None
    return problem


AMOUNT_LIMIT = 2**53  # ns (104 days) or bytes (9 PB), exact in float64: past it a cost or size is no measurement


def _amount(path: Path, where: str, value: Any) -> int:
    """A cost (ns) or size (bytes) as an int; NaN, infinity and values past AMOUNT_LIMIT (the schema
    cannot refuse them: JSON Schema's bounds pass NaN) are a one-line PlacementError."""
    number = float(value)
    if not 0 <= number <= AMOUNT_LIMIT:  # NaN fails both comparisons
        raise PlacementError(f"{path}: {where}: {value!r} is not a number from 0 to 2^53")
    return int(value)


def _entries_from_json(data: dict[str, Any]) -> tuple[Iterator[tuple[Any, dict[str, Any]]],
                                                                   Iterator[tuple[Any, Any, dict[str, Any]]]]:
    """(id, attributes) per node and (source, target, attributes) per edge of a node-link JSON
    graph (the edges under "edges", else networkx's older "links")."""
    key = "edges" if "edges" in data else "links"  # read as _node_link takes them: its errors come in file order
    nodes = ((entry["id"], {k: v for k, v in entry.items() if k != "id"}) for entry in data.get("nodes", []))
    edges = ((entry["source"], entry["target"], {k: a for k, a in entry.items() if k not in ("source", "target")})
             for entry in data.get(key, []))
    return nodes, edges


def _node_link(path: Path, node_entries: Iterable[tuple[Any, dict[str, Any]]],
               edge_entries: Iterable[tuple[Any, Any, dict[str, Any]]],
               multigraph: bool) -> tuple[dict[Any, dict[str, Any]], list[tuple[Any, Any, dict[str, Any]]]]:
    """(node -> attributes, edges) of a node-link graph, as networkx's node_link_graph reads it: nodes
    in file order, then those only an edge names (no attributes); edges by source node, then target,
    in the order first given; a graph without "multigraph": false keeps every parallel edge, one
    with it merges their attributes."""
    nodes: dict[Any, dict[str, Any]] = {}
    adjacency: dict[Any, dict[Any, list[dict[str, Any]]]] = {}
    try:
        for node, attrs in node_entries:
            nodes.setdefault(_hashable(node), {}).update(attrs)
        for source, target, attrs in edge_entries:
            u, v = _hashable(source), _hashable(target)
            nodes.setdefault(u, {})
            nodes.setdefault(v, {})
            parallel = adjacency.setdefault(u, {}).setdefault(v, [])
            if multigraph or not parallel:
                parallel.append(attrs)
            else:
                parallel[0].update(attrs)
    except (KeyError, TypeError) as exc:  # an entry without its keys, an unhashable id: the "links" route
        raise PlacementError(f"{path}: not a node-link JSON graph ({' '.join(str(exc).split())})") from None
    edges = [(u, v, attrs) for u in nodes for v, parallel in adjacency.get(u, {}).items() for attrs in parallel]
    return nodes, edges


def _hashable(value: Any) -> Any:
    """A node id as networkx keeps it: a JSON list becomes a tuple."""
    return tuple(_hashable(v) for v in value) if isinstance(value, list) else value
