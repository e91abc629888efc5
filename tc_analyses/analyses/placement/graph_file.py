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
from typing import Any, Callable

from tc_analyses.perf.devices import default_link
from tc_analyses.perf.problem import Cost, CostSource, Device, Link, PlacementError, PlacementProblem, Task

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


def read_graph_file(path: Path) -> dict[str, Any]:
    """The file's JSON, checked against the schema; PlacementError (one line) otherwise."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
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
    data = read_graph_file(path)
    nodes, edge_list = _node_link(path, data)
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
                          attrs.get("actual_device"), int(attrs.get("memory_bytes", 0))))
        for device in names:
            if node_costs[device] is None:
                forbidden.add((ids[node], device))
            else:
                costs[(ids[node], device)] = Cost(int(node_costs[device]), CostSource.MEASURED)
    edges = {(ids[u], ids[v]): int(a.get("bytes", 0)) for u, v, a in edge_list}
    links = {(a.name, b.name): default_link(a, b) for a in devices for b in devices if a.name != b.name}
    for spec in data.get("graph", {}).get("links", []):
        if (spec["src"], spec["dst"]) not in links:
            raise PlacementError(f"{path}: graph/links: {spec['src']} -> {spec['dst']} is not a pair of "
                                 f"--devices ({', '.join(names)})")
        links[(spec["src"], spec["dst"])] = Link(float(spec["latency_ns"]), float(spec["gb_per_s"]),
                                                 "graph file")
    problem = PlacementProblem(tasks, devices, costs, edges, links, forbidden=frozenset(forbidden))
    try:
        problem.topological_order()
    except PlacementError:
        raise PlacementError(f"{path}: the graph has a cycle; placement needs a DAG") from None
    return problem


def _node_link(path: Path, data: dict[str, Any]) -> tuple[dict[Any, dict[str, Any]], list[tuple[Any, Any, dict[str, Any]]]]:
    """(node -> attributes, edges) of a node-link graph, as networkx's node_link_graph reads it: nodes
    in file order, then those only an edge names (no attributes); edges by source node, then target,
    in the order first given; a graph without "multigraph": false keeps every parallel edge, one
    with it merges their attributes."""
    key = "edges" if "edges" in data else "links"
    multigraph = data.get("multigraph", True)
    nodes: dict[Any, dict[str, Any]] = {}
    adjacency: dict[Any, dict[Any, list[dict[str, Any]]]] = {}
    try:
        for entry in data.get("nodes", []):
            nodes.setdefault(_hashable(entry["id"]), {}).update((k, v) for k, v in entry.items() if k != "id")
        for entry in data.get(key, []):
            u, v = _hashable(entry["source"]), _hashable(entry["target"])
            nodes.setdefault(u, {})
            nodes.setdefault(v, {})
            parallel = adjacency.setdefault(u, {}).setdefault(v, [])
            attrs = {k: a for k, a in entry.items() if k not in ("source", "target")}
            if multigraph or not parallel:
                parallel.append(attrs)
            else:
                parallel[0].update(attrs)
    except (KeyError, TypeError) as exc:
        raise PlacementError(f"{path}: not a node-link JSON graph ({' '.join(str(exc).split())})") from None
    edges = [(u, v, attrs) for u in nodes for v, parallel in adjacency.get(u, {}).items() for attrs in parallel]
    return nodes, edges


def _hashable(value: Any) -> Any:
    """A node id as networkx keeps it: a JSON list becomes a tuple."""
    return tuple(_hashable(v) for v in value) if isinstance(value, list) else value
