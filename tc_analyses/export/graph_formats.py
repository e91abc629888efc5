"""Computation graph files: GraphML (through networkx) and Graphviz DOT (written here).

Both take the ``nx.DiGraph`` of :func:`tc_analyses.model.graph.build_graph`. GraphML holds only
scalars, so lists and dicts (durations, the execution map, cross-step edges) are written as JSON
strings and an :class:`~tc_analyses.model.graph_keys.EdgeKind` as its name.
"""

from __future__ import annotations

import enum
import functools
import json
import os
import re
from typing import TYPE_CHECKING, Any, Hashable, Sequence

from tc_analyses.model import graph_keys as K

if TYPE_CHECKING:  # only for annotations: write_graphml loads networkx when it runs
    import networkx as nx

# Fixed palette (Okabe-Ito, colour-blind safe): a device keeps its colour from one run to the next.
PALETTE = ("#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7", "#999999")


def _scalar(value: Any) -> Any:
    """A value GraphML can store: str, int, float or bool."""
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, (bool, int, float, str)):
        return value
    return json.dumps(value, default=_json_default, sort_keys=True)


def _json_default(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.name
    raise TypeError(f"cannot write {type(value).__name__} to GraphML")


def write_graphml(g: nx.DiGraph, path: str | os.PathLike[str]) -> None:
    """Write `g` as GraphML; node ids become strings, non-scalar attributes JSON strings.

    Read it back with ``networkx.read_graphml`` (or Gephi, yEd, Cytoscape).
    """
    import networkx as nx

    out: nx.DiGraph[Any] = nx.DiGraph()
    out.graph.update({k: _scalar(v) for k, v in g.graph.items() if v is not None})
    for n, attrs in g.nodes(data=True):
        out.add_node(n, **{k: _scalar(v) for k, v in attrs.items() if v is not None})
    for u, v, attrs in g.edges(data=True):
        out.add_edge(u, v, **{k: _scalar(x) for k, x in attrs.items() if x is not None})
    nx.write_graphml(out, os.fspath(path))


def dot_escape(text: str) -> str:
    r"""`text` as the inside of a DOT double-quoted string: backslash, quote and newline escaped.

    Examples
    --------
    >>> print(dot_escape('say "hi" to C:\\dir'))
    say \"hi\" to C:\\dir
    """
    # Backslash first, so the escapes added next are not escaped again. "\n" is DOT's
    # centred line break; a bare CR would end the line in some readers.
    return (text.replace("\\", "\\\\").replace('"', '\\"')
            .replace("\r\n", "\\n").replace("\n", "\\n").replace("\r", "\\n"))


def device_colours(g: nx.DiGraph) -> dict[str, str]:
    """Each device of `g` (sorted by name) to a palette colour, cycling past eight devices."""
    devices = sorted({str(d) for _, d in g.nodes(data=K.DEVICE, default="")})
    return {d: PALETTE[i % len(PALETTE)] for i, d in enumerate(devices)}


def node_label(attrs: dict[str, Any]) -> str:
    """The (unescaped) label of a node: name, op, device and mean duration."""
    lines = [str(attrs.get(K.NAME, "")), str(attrs.get(K.OP, ""))]
    lines.append(f"{attrs.get(K.DEVICE, '')}  {attrs.get(K.MEAN_NS, 0)} ns")
    return "\n".join(lines)


def to_dot(g: nx.DiGraph, name: str = "dfcompass") -> str:
    """`g` as Graphviz DOT text: nodes filled by device, transfer edges dashed."""
    colours = device_colours(g)
    # Node ids are generated (n0, n1...), never taken from the trace: no quoting needed.
    ids: dict[Hashable, str] = {n: f"n{i}" for i, n in enumerate(g.nodes)}
    lines = [f'digraph "{dot_escape(name)}" {{', "  node [shape=box, style=filled, fontname=Helvetica];"]
    for n, attrs in g.nodes(data=True):
        colour = colours.get(str(attrs.get(K.DEVICE, "")), PALETTE[-1])
        lines.append(f'  {ids[n]} [label="{dot_escape(node_label(attrs))}", fillcolor="{colour}"];')
    for u, v, attrs in g.edges(data=True):
        kind = attrs.get(K.KIND)
        kind_name = kind.name if isinstance(kind, enum.Enum) else str(kind or "")
        style = ", style=dashed" if kind_name == K.EdgeKind.TRANSFER.name else ""
        label = f"{attrs.get(K.BYTES, 0)} B"
        lines.append(f'  {ids[u]} -> {ids[v]} [label="{dot_escape(label)}"{style}];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def write_dot(g: nx.DiGraph, path: str | os.PathLike[str], name: str = "dfcompass") -> None:
    """Write `g` as a Graphviz DOT file (UTF-8); render with ``dot -Tsvg``."""
    with open(path, "w", encoding="utf-8", newline="\n") as file:
        file.write(to_dot(g, name))


_GRAPHML_ROOT = {"xmlns": "http://graphml.graphdrawing.org/xmlns", "xmlns:xsi": "http://www.w3.org/2001/XMLSchema-instance",
                 "xsi:schemaLocation": "http://graphml.graphdrawing.org/xmlns "
                                       "http://graphml.graphdrawing.org/xmlns/1.0/graphml.xsd"}
_GRAPHML_TYPES = {bool: "boolean", int: "long", float: "double", str: "string"}


def write_graphml_columns(path: str | os.PathLike[str], nodes: Sequence[Any], node_data: dict[str, Sequence[Any]],
                          edges: tuple[Sequence[Any], Sequence[Any]], edge_data: dict[str, Sequence[Any]],
                          graph_data: dict[str, Any] | None = None) -> None:
    """A graph given as columns, written as :func:`write_graphml` writes it (networkx's layout: the
    same keys, types and elements, so ``networkx.read_graphml`` reads the same graph) but streamed
    through lxml's incremental writer without a networkx graph: a plan of 333k ops took 26 s there.
    `node_data[name][i]` is node i's value (None: none), `edge_data` likewise per edge. The nodes are
    distinct, each edge joins two of them and comes once, and each column holds Python scalars of
    one type (a column of several types is refused: networkx would write a key per type). A
    ``.gz`` path is compressed."""
    import gzip

    from lxml import etree

    graph_data = {k: _scalar(v) for k, v in (graph_data or {}).items() if v is not None}
    scopes: list[tuple[str, str, Sequence[Any]]] = [("graph", name, [value]) for name, value in graph_data.items()]
    scopes += [("node", name, column) for name, column in node_data.items()]
    scopes += [("edge", name, column) for name, column in edge_data.items()]
    key_of: dict[tuple[str, str], str] = {}
    keys: list[Any] = []
    for scope, name, column in sorted(scopes, key=_first_seen(scopes)):  # networkx numbers keys as it meets them
        kinds = {type(v) for v in column if v is not None}
        if not kinds:
            continue  # a column without a value writes no key, as networkx sees no such attribute
        if len(kinds) > 1:
            raise ValueError(f"the {scope} attribute {name!r} holds values of several types: "
                             f"{', '.join(sorted(k.__name__ for k in kinds))}")
        kind = kinds.pop()
        key_of[scope, name] = f"d{len(keys)}"
        keys.append(etree.Element("key", {"id": key_of[scope, name], "for": scope, "attr.name": name,
                                          "attr.type": _GRAPHML_TYPES[kind]}))
    node_columns = [(key_of["node", n], c) for n, c in node_data.items() if ("node", n) in key_of]
    edge_columns = [(key_of["edge", n], c) for n, c in edge_data.items() if ("edge", n) in key_of]
    # zlib's default level: level 9 (gzip.open's) took a third of the write for a few % of size
    opener: Any = functools.partial(gzip.open, compresslevel=6) if os.fspath(path).endswith(".gz") else open
    texts = [str(v) for _, c in node_columns + edge_columns for v in set(c) if v is not None]
    if any(_NOT_XML.search(t) for t in texts + [str(n) for n in nodes]):  # lxml refuses them, as networkx does
        _write_graphml_lxml(path, opener, keys, graph_data, key_of, nodes, node_columns, edges, edge_columns)
        return
    head = b"".join(etree.tostring(key, pretty_print=True, encoding="utf-8") for key in reversed(keys))
    head += b'<graph edgedefault="directed">' + b"".join(etree.tostring(_data(etree, key_of["graph", name], value), pretty_print=True, encoding="utf-8")
                     for name, value in graph_data.items())
    root = " ".join(f'{name}="{_attribute(value)}"' for name, value in _GRAPHML_ROOT.items())
    with opener(path, "wb") as file:
        file.write(f"<?xml version='1.0' encoding='utf-8'?>\n<graphml {root}>".encode())
        file.write(head)
        _write_rows(file, "node", [("id", [str(n) for n in nodes])], node_columns, len(nodes))
        _write_rows(file, "edge", [("source", [str(u) for u in edges[0]]), ("target", [str(v) for v in edges[1]])],
                    edge_columns, len(edges[0]))
        file.write(b"</graph></graphml>")


def _first_seen(scopes: list[tuple[str, str, Sequence[Any]]]) -> Any:
    """The order networkx meets the attributes in: the graph's, then row by row the nodes' and the
    edges', each row's in column order."""
    order = {"graph": 0, "node": 1, "edge": 2}
    column_at = {(scope, name): i for i, (scope, name, _) in enumerate(scopes)}

    def key(item: tuple[str, str, Sequence[Any]]) -> tuple[int, int, int]:
        scope, name, column = item
        first = next((row for row, v in enumerate(column) if v is not None), len(column))
        return order[scope], first, column_at[scope, name]

    return key


# Characters XML 1.0 cannot hold: lxml raises on them, so the file goes through lxml to raise the same.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_TEXT_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\r": "&#13;"})
_ATTRIBUTE_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "\t": "&#9;",
                                    "\n": "&#10;", "\r": "&#13;"})


def _attribute(text: str) -> str:
    return text.translate(_ATTRIBUTE_ESCAPES)


def _write_rows(file: Any, tag: str, attributes: list[tuple[str, list[str]]], columns: list[tuple[str, Sequence[Any]]],
                count: int, chunk: int = 8192) -> None:
    """Elements as lxml's pretty printer writes them, a chunk of rows at a time; each distinct
    value is escaped once."""
    escaped: dict[tuple[str, Any], str] = {}  # by column too: True == 1, but writes "True"

    def text(key: str, value: Any) -> str:
        found = escaped.get((key, value))
        if found is None:
            found = escaped[key, value] = str(value).translate(_TEXT_ESCAPES)
        return found

    for begin in range(0, count, chunk):
        out = []
        for row in range(begin, min(begin + chunk, count)):
            start = f"<{tag} " + " ".join(f'{name}="{_attribute(values[row])}"' for name, values in attributes)
            data = [f'  <data key="{key}">{text(key, column[row])}</data>\n' for key, column in columns
                    if column[row] is not None]
            out.append(f"{start}>\n{''.join(data)}</{tag}>\n" if data else f"{start}/>\n")
        file.write("".join(out).encode())


def _write_graphml_lxml(path: str | os.PathLike[str], opener: Any, keys: list[Any], graph_data: dict[str, Any],
                        key_of: dict[tuple[str, str], str], nodes: Sequence[Any],
                        node_columns: list[tuple[str, Sequence[Any]]], edges: tuple[Sequence[Any], Sequence[Any]],
                        edge_columns: list[tuple[str, Sequence[Any]]]) -> None:
    from lxml import etree

    with opener(path, "wb") as file, etree.xmlfile(file, encoding="utf-8") as xml:
        xml.write_declaration()
        with xml.element("graphml", _GRAPHML_ROOT):
            for key in reversed(keys):  # networkx lists the keys last made first
                xml.write(key, pretty_print=True)
            with xml.element("graph", edgedefault="directed"):
                for name, value in graph_data.items():
                    xml.write(_data(etree, key_of["graph", name], value), pretty_print=True)
                for i, node in enumerate(nodes):
                    xml.write(_element(etree, "node", {"id": str(node)}, node_columns, i), pretty_print=True)
                for i, (u, v) in enumerate(zip(*edges)):
                    xml.write(_element(etree, "edge", {"source": str(u), "target": str(v)}, edge_columns, i),
                              pretty_print=True)


def _element(etree: Any, tag: str, attrib: dict[str, str], columns: list[tuple[str, Sequence[Any]]], row: int) -> Any:
    element = etree.Element(tag, attrib)
    for key, column in columns:
        value = column[row]
        if value is not None:
            element.append(_data(etree, key, value))
    return element


def _data(etree: Any, key: str, value: Any) -> Any:
    data = etree.Element("data", key=key)
    data.text = str(value)
    return data
