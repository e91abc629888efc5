"""GraphML written from columns is, byte for byte, what networkx writes for the same graph.

``write_graphml_columns`` streams a large plan's graph without a networkx graph (a 333k-op plan
took 26 s through networkx); its file must stay the one users' tools (Gephi, yEd,
``networkx.read_graphml``) read today: checked on hostile names and mixed scalar types, and on the
plan views of committed traces with the size threshold lowered so both routes run.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import networkx as nx
import pytest

from tc_analyses.analyses.parallelism import plan_trace
from tc_analyses.export import parallelism_views, placement_views
from tc_analyses.export.graph_formats import write_graphml, write_graphml_columns
from tc_analyses.inputs import TraceInputs

DATA = Path(__file__).resolve().parents[1] / "data" / "traces"
ODD = ["<tag>", "a & b", 'say "hi"', "it's", "ünïcødé ☃", "[re]+(x)?*", "tab\there", ""]


def test_odd_names_and_types_match_networkx(tmp_path: Path) -> None:
    nodes = [0, 1, "n2", 3, 'id "\t\r\n" <&>']
    node_data = {"op": [ODD[i] for i in range(4)] + [None], "count": [1, None, -2**40, 7, None],
                 "ratio": [0.5, 1e-9, 3.0, None, None], "ok": [True, False, None, True, None], "never": [None] * 5,
                 "name": [*ODD[4:7], "line\r\nbreak ]]>", None]}
    edges = ([0, 0, 1, 3], [1, "n2", 3, 'id "\t\r\n" <&>'])
    edge_data = {"bytes": [8, None, 16, None], "sync": [True, None, None, None]}
    graph_data = {"source": "trace <&> 'x'", "empty": None}
    g: nx.DiGraph = nx.DiGraph()
    g.graph.update(graph_data)
    for i, n in enumerate(nodes):
        g.add_node(n, **{k: c[i] for k, c in node_data.items()})
    for i, (u, v) in enumerate(zip(*edges)):
        g.add_edge(u, v, **{k: c[i] for k, c in edge_data.items()})
    write_graphml(g, tmp_path / "networkx.graphml")
    write_graphml_columns(tmp_path / "columns.graphml", nodes, node_data, edges, edge_data, graph_data)
    assert (tmp_path / "columns.graphml").read_bytes() == (tmp_path / "networkx.graphml").read_bytes()


@pytest.mark.parametrize("trace", ["tf/keras-cnn", "jobs/ddp-2rank/vm-18735"])
def test_a_large_plans_graph_is_the_networkx_one(trace: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    inputs = TraceInputs(DATA / trace)
    plan = plan_trace(inputs.trace, graph=inputs.graph_table, activity=inputs.activity)
    monkeypatch.setattr(placement_views, "DRAWN_GRAPH_NODES", 1)  # the networkx route writes .gz too
    parallelism_views.write_plan_view(plan, DATA / trace, tmp_path / "networkx")
    monkeypatch.setattr(parallelism_views, "DRAWN_GRAPH_NODES", 1)  # now the columns route
    written = parallelism_views.write_plan_view(plan, DATA / trace, tmp_path / "columns")
    assert written["graph.graphml.gz"] == tmp_path / "columns" / "graph.graphml.gz"
    columns = gzip.decompress((tmp_path / "columns" / "graph.graphml.gz").read_bytes())
    assert columns == gzip.decompress((tmp_path / "networkx" / "graph.graphml.gz").read_bytes())
    assert nx.read_graphml(tmp_path / "columns" / "graph.graphml.gz").number_of_nodes() == len(plan.ops)


def test_a_character_xml_cannot_hold_fails_as_networkx_fails(tmp_path: Path) -> None:
    g: nx.DiGraph = nx.DiGraph()
    g.add_node(0, op="bell\x07")
    with pytest.raises(ValueError) as networkx_error:
        write_graphml(g, tmp_path / "networkx.graphml")
    with pytest.raises(ValueError) as columns_error:
        write_graphml_columns(tmp_path / "columns.graphml", [0], {"op": ["bell\x07"]}, ([], []), {})
    assert str(columns_error.value) == str(networkx_error.value)


def test_keys_are_numbered_as_networkx_meets_them(tmp_path: Path) -> None:
    """The first node lacks "a": networkx meets "b" first, so "b" is d0."""
    node_data = {"a": [None, 1], "b": [2, 3]}
    g: nx.DiGraph = nx.DiGraph()
    g.add_node(0, b=2)
    g.add_node(1, a=1, b=3)
    write_graphml(g, tmp_path / "networkx.graphml")
    write_graphml_columns(tmp_path / "columns.graphml", [0, 1], node_data, ([], []), {})
    assert (tmp_path / "columns.graphml").read_bytes() == (tmp_path / "networkx.graphml").read_bytes()


def test_a_column_of_several_types_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="several types: bool, int"):
        write_graphml_columns(tmp_path / "x.graphml", [0, 1], {"flag": [True, 1]}, ([], []), {})
