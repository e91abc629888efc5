"""Graph files pose any placement problem: links per device pair, devices a node may not use,
the optimiser of choice; a bad file is one line naming the file and the place in it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tc_analyses.analyses.placement.graph_file import SCHEMA, problem_from_graph_file, read_graph_file
from tc_analyses.analyses.placement.recommend import recommend
from tc_analyses.perf.devices import parse_devices
from tc_analyses.perf.problem import PlacementError
from tests.helpers import REPO_ROOT

GRAPHS = REPO_ROOT / "tests" / "data" / "graphs"
DEVICES = "cpu,cuda:0"


def _problem(name: str = "forbidden-and-links.json") -> Any:
    return problem_from_graph_file(GRAPHS / name, parse_devices(DEVICES))


@pytest.mark.parametrize("algorithm", ["heft", "search", "milp", "auto"])
def test_no_optimiser_uses_a_forbidden_device(algorithm: str) -> None:
    result, plan = recommend(_problem(), "g", algorithm=algorithm)
    assert result.assignment["load"] == result.assignment["decode"] == "cpu"
    assert result.algorithm in {"heft": {"heft"}, "search": {"heft+search"}, "milp": {"milp"},
                                "auto": {"heft", "milp"}}[algorithm]  # auto: the best, HEFT on a tie
    assert result.predicted_makespan_ns == max(s.end_ns for s in plan.schedule)


def test_the_file_sets_the_links() -> None:
    problem = _problem()
    link = problem.links[("cpu", "cuda:0")]
    assert link.source == "graph file" and link.time_ns(1_000_000) == 5_000 + 80_000  # 1 MB at 12.5 GB/s
    # conv on the GPU saves 380 us against 2 x 85 us of copies: it moves; the result says why.
    result, _ = recommend(problem, "g")
    assert result.assignment["conv"] == "cuda:0" and result.links["cpu->cuda:0"] == "graph file"


def test_every_committed_graph_file_follows_the_schema() -> None:
    assert json.loads(SCHEMA.read_text())["title"] and (REPO_ROOT / "docs" / "graph-file.schema.json").resolve() == SCHEMA
    for path in sorted(GRAPHS.glob("*.json")):
        assert read_graph_file(path)["nodes"], path


@pytest.mark.parametrize("text, message", [
    ('{"nodes": [{"id": "a", "costs": {"cpu": -1, "cuda:0": 1}}]}', "nodes/0/costs/cpu: -1 is less than the minimum"),
    ('{"nodes": [{"id": "a", "costs": {"cpu": "fast", "cuda:0": 1}}]}', "nodes/0/costs/cpu: 'fast' is not of type"),
    ('{"nodes": [{"id": "a"}]}', "nodes/0: 'costs' is a required property"),
    ('{"nodes": [{"id": "a", "costs": {"cpu": null, "cuda:0": null}}]}', "may run on none of cpu, cuda:0"),
    ('{"graph": {"links": [{"src": "cpu", "dst": "tpu", "latency_ns": 1, "gb_per_s": 1}]},'
     ' "nodes": [{"id": "a", "costs": {"cpu": 1, "cuda:0": 1}}]}', "cpu -> tpu is not a pair of --devices"),
    ('[1, 2]', "the top level: [1, 2] is not of type 'object'"),
    ('{"nodes": [', "not a node-link JSON graph"),
    # bytes msgspec would skip unchecked, and the older "links" route's errors in file order
    (b'{"nodes": [{"id": 1, "costs": {"cpu": 1, "cuda:0": 1}, "x": "\xff"}]}',
     "not a node-link JSON graph ('utf-8' codec can't decode byte 0xff"),
    (b'{"nodes": [{"id": 1, "name": "\xed\xa0\x80", "costs": {"cpu": 1, "cuda:0": 1}}]}',
     "not a node-link JSON graph ('utf-8' codec can't decode byte 0xed"),
    (b'{"nodes": [], "links": [{"source": {}, "target": 1}, {"target": 2}]}',
     "not a node-link JSON graph (unhashable type: 'dict')"),
    (b'{"nodes": [], "links": [{"source": 1, "target": 1}, {"target": 2}]}', "not a node-link JSON graph ('source')"),
], ids=["negative", "not-a-number", "no-costs", "nowhere", "link-device", "not-an-object", "truncated",
        "bad-utf8-in-a-key-not-read", "bad-utf8-in-a-name", "links-unhashable-first", "links-missing-key"])
def test_a_bad_file_is_one_line_naming_the_place(tmp_path: Path, text: str | bytes, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(PlacementError) as caught:
        problem_from_graph_file(path, parse_devices(DEVICES))
    assert str(caught.value).startswith(f"{path}: ") and message in str(caught.value)
    assert "\n" not in str(caught.value)


def _breakages() -> list[Any]:
    """Documents that break the schema in each way it can be broken, and a few that do not."""
    node: dict[str, Any] = {"id": "a", "costs": {"cpu": 1, "cuda:0": 2}}
    link: dict[str, Any] = {"src": "cpu", "dst": "cuda:0", "latency_ns": 1, "gb_per_s": 1}
    good = [{"nodes": [node]}, {"nodes": [node], "edges": []}, {"directed": True, "nodes": [node], "graph": {"links": [link]}}]
    bad: list[Any] = [[], "x", None, {}, {"nodes": {}}, {"nodes": [1]}, {"nodes": [{"costs": {}}]},
                      {"directed": False, "nodes": [node]}, {"multigraph": True, "nodes": [node]},
                      {"nodes": [node], "graph": {"links": [{**link, "gb_per_s": 0}]}},
                      {"nodes": [node], "graph": {"links": [{**link, "latency_ns": -1}]}},
                      {"nodes": [node], "graph": {"links": [{**link, "extra": 1}]}},
                      {"nodes": [node], "graph": {"links": [{"src": "cpu"}]}}]
    for key, value in [("cpu", -1), ("cpu", "1"), ("cpu", True), ("cpu", [])]:
        bad.append({"nodes": [{**node, "costs": {**node["costs"], key: value}}]})
    for key, value in [("id", None), ("id", []), ("memory_bytes", -5), ("memory_bytes", "big"), ("name", 3),
                       ("op", 3), ("costs", [])]:
        bad.append({"nodes": [{**node, key: value}]})
    for edge in [{"source": "a"}, {"source": "a", "target": "a", "bytes": -1}, {"source": "a", "target": "a", "bytes": "x"},
                 {"source": True, "target": "a"}, {"source": "a", "target": 1.5}]:
        bad.append({"nodes": [node], "edges": [edge]})
    bad += [{"nodes": [node], "graph": {"links": [{**link, "gb_per_s": -0.5}]}}, {"nodes": [node], "graph": 3},
            {"nodes": [node], "graph": {"links": None}}, {"nodes": [node], "edges": {}}, {"nodes": [{**node, "id": 1.5}]}]
    good += [{"nodes": [{**node, "x": [1], "costs": {"cpu": 0.5, "cuda:0": None}}], "graph": {"name": "g"}, "other": 1}]
    return [(doc, True) for doc in good] + [(doc, False) for doc in bad]


@pytest.mark.parametrize("doc, valid", _breakages())
def test_the_compiled_validator_agrees_with_jsonschema(doc: Any, valid: bool) -> None:
    """The fast checks decide alone only when a file is valid: they must never pass what jsonschema
    fails (the typed decoder may refuse a valid file: the schema's route then reads it)."""
    from tc_analyses.analyses.placement.graph_file import _compiled, _typed_graph, _validator, schema_error

    reference = next(iter(_validator().iter_errors(doc)), None)
    if valid:
        assert reference is None and schema_error(doc) is None
        _compiled()(doc)
        assert _typed_graph(json.dumps(doc).encode()) is not None
    else:
        assert reference is not None and schema_error(doc) is not None
        with pytest.raises(Exception):
            _compiled()(doc)
        assert _typed_graph(json.dumps(doc).encode()) is None


def test_the_algorithm_option(cli: Any, tmp_path: Path) -> None:
    for algorithm, expected in (("heft", "heft"), ("milp", "milp")):
        result = cli("recommend-placement", GRAPHS / "forbidden-and-links.json", "--devices", DEVICES,
                     "--algorithm", algorithm, "-o", tmp_path / algorithm, "--format", "json")
        assert result.exit_code == 0, result.stderr
        assert json.loads(result.stdout)["algorithm"] == expected
    bad = cli("recommend-placement", GRAPHS / "forbidden-and-links.json", "--devices", DEVICES, "--algorithm", "ga",
              "-o", tmp_path / "x")
    assert bad.exit_code == 2 and bad.stderr.count("\n") == 1


def test_node_link_reading_matches_networkx() -> None:
    """Graph files are read without building a networkx graph; nodes, edges and their order are
    what nx.node_link_graph gives (duplicates, nodes only an edge names, parallel edges)."""
    import random

    import networkx as nx

    from tc_analyses.analyses.placement.graph_file import _entries_from_json, _entries_of, _node_link, _typed_graph

    rng = random.Random(1)
    for _ in range(300):
        n = rng.randint(0, 8)
        ids = [rng.choice([i, str(i)]) for i in range(n)] + [99]
        nodes = [{"id": rng.choice(ids), "costs": {"cpu": rng.randint(0, 5)}, "name": str(rng.random())}
                 for _ in range(rng.randint(0, n + 2))]
        edges = [{"source": rng.choice(ids + [77]), "target": rng.choice(ids + [78]), "bytes": rng.randint(0, 9),
                  **({"x": 1} if rng.random() < .3 else {})} for _ in range(rng.randint(0, 10))]
        data: dict[str, object] = {"directed": True, "nodes": nodes, "edges": edges}
        if rng.random() < .5:
            data["multigraph"] = False
        graph = nx.node_link_graph(data, directed=True, edges="edges")
        multigraph = "multigraph" not in data
        read_nodes, read_edges = _node_link(Path("g.json"), *_entries_from_json(data), multigraph)
        assert list(read_nodes.items()) == list(graph.nodes(data=True))
        assert read_edges == list(graph.edges(data=True))
        typed = _typed_graph(json.dumps(data).encode())  # the typed route: the same, less the keys it does not read
        assert typed is not None
        typed_nodes, typed_edges = _node_link(Path("g.json"), *_entries_of(typed), multigraph)
        assert list(typed_nodes.items()) == list(graph.nodes(data=True))
        assert typed_edges == [(u, v, {k: a for k, a in attrs.items() if k != "x"})
                               for u, v, attrs in graph.edges(data=True)]


def _mutated(rng: Any) -> Any:
    """A graph document with one to three values replaced by a random JSON value (valid or not)."""
    values: list[Any] = [None, True, False, 0, 1, -1, 2.0, 0.5, -0.0, 2**70, "", "a", "cpu", [], [1], {}, {"a": 1}]
    doc: dict[str, Any] = {"directed": True, "multigraph": False,
                           "graph": {"links": [{"src": "cpu", "dst": "cuda:0", "latency_ns": 5, "gb_per_s": 1.5}]},
                           "nodes": [{"id": "a", "name": "n", "op": "mm", "actual_device": "cpu", "memory_bytes": 4,
                                      "costs": {"cpu": 1, "cuda:0": 2.5}},
                                     {"id": 2, "costs": {"cpu": None, "cuda:0": 3}}],
                           "edges": [{"source": "a", "target": 2, "bytes": 8}]}
    for _ in range(rng.randint(1, 2)):
        holder: Any = doc
        while True:  # walk down to a random container, then replace one of its entries
            keys = list(holder) if isinstance(holder, dict) else list(range(len(holder)))
            if not keys:
                break
            key = rng.choice(keys)
            if isinstance(holder[key], (dict, list)) and holder[key] and rng.random() < .7:
                holder = holder[key]
                continue
            alike = [v for v in values if type(v) is type(holder[key])]  # often the same kind: deeper checks
            holder[key] = rng.choice(alike if alike and rng.random() < .5 else values)
            break
    return doc


def test_the_typed_decoder_never_passes_what_the_schema_fails(tmp_path: Path) -> None:
    """Random breakages of a full document: what the typed decoder accepts, the schema accepts, and
    the problem read from it equals the schema route's (tasks, costs, edges, links; same errors)."""
    import random

    from tc_analyses.analyses.placement import graph_file

    rng = random.Random(7)
    path, accepted = tmp_path / "g.json", 0
    for _ in range(800):
        doc = _mutated(rng)
        text = json.dumps(doc)
        typed = graph_file._typed_graph(text.encode())
        if typed is None:
            continue
        accepted += 1
        assert graph_file.schema_error(doc) is None, text
        path.write_text(text)
        outcomes = []
        for decoder in (graph_file._typed_graph, lambda _: None):  # the typed route, then the schema's
            graph_file_typed, graph_file._typed_graph = graph_file._typed_graph, decoder
            try:
                problem = problem_from_graph_file(path, parse_devices(DEVICES))
                outcomes.append((problem.tasks, problem.costs, problem.edges, problem.links, problem.forbidden))
            except PlacementError as exc:
                outcomes.append(str(exc))
            finally:
                graph_file._typed_graph = graph_file_typed
        assert outcomes[0] == outcomes[1], text
    assert accepted > 100
