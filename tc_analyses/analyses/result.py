"""The one result shape every registered analysis returns: its data, its findings, its JSON.

Examples
--------
>>> r = Result("memory", "t", None, (Finding("peak", 0, "cpu peaks at 8 MiB"),))
>>> r.headline()
'cpu peaks at 8 MiB'
>>> r.to_json()["findings"]
[{'kind': 'peak', 'impact_ns': 0, 'text': 'cpu peaks at 8 MiB'}]
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Protocol, Sequence

if TYPE_CHECKING:
    import networkx as nx

    from tc_analyses.model.activity import Activity
    from tc_analyses.model.graph_table import GraphTable
    from tc_analyses.model.window import Scope
    from tc_analyses.reader.fast import DfcTrace

Options = Mapping[str, Any]  # an analysis's options by name, every one present (Entry.options)


class Inputs(Protocol):
    """What an analysis reads of a trace, made once and shared (:class:`tc_analyses.inputs.TraceInputs`)."""

    @property
    def path(self) -> Path: ...

    @property
    def trace(self) -> DfcTrace: ...

    @property
    def activity(self) -> Activity: ...

    @property
    def graph(self) -> nx.DiGraph[int]: ...

    @property
    def graph_table(self) -> GraphTable: ...  # the same graph as columns (tc_analyses.model.graph_table)

    @property
    def scope(self) -> Scope: ...  # what the analysis window kept (tc_analyses.model.window)


class Job(Protocol):
    """What a job analysis reads: the process traces of one run (:class:`tc_analyses.inputs.JobInputs`)."""

    @property
    def path(self) -> Path: ...

    @property
    def processes(self) -> Sequence[Any]: ...  # tc_analyses.reader.job.ProcessTrace, one per trace

    @property
    def inputs(self) -> Sequence[Inputs]: ...


@dataclass(frozen=True, slots=True)
class Finding:
    """Something a user can act on.

    kind: a stable name for the kind of finding (``host_bound``, ``peak``...), for tools;
    impact_ns: the time at stake in the analysed run, 0 when it cannot be told (orders findings);
    text: what was found and what to do, in one paragraph.
    """

    kind: str
    impact_ns: int
    text: str


@dataclass(frozen=True)
class Result:
    """What a registered analysis returns.

    analysis: its registry key; trace: what it ran on (a trace path, or the labels of a
    trajectory); data: the analysis's own result dataclass; findings: most important first.
    """

    analysis: str
    trace: str
    data: Any
    findings: tuple[Finding, ...]
    scope: str = ""  # what part of the trace it covers (tc_analyses.model.window), set by the registry

    def headline(self) -> str:
        """The first finding, on one line."""
        return " ".join(self.findings[0].text.split()) if self.findings else "no findings"

    def to_json(self) -> dict[str, Any]:
        """Plain JSON data, the same keys in every command that shows this result."""
        head = {"analysis": self.analysis, "trace": self.trace} | ({"scope": self.scope} if self.scope else {})
        return head | {"findings": [dataclasses.asdict(f) for f in self.findings], "result": plain(self.data)}


def plain(data: Any) -> Any:
    """An analysis's data as JSON values: its own ``json_data()`` when it has one (to leave out plot
    series), else its dataclass fields; findings are left out (they are at the top of the result)."""
    if data is None:
        return None
    if hasattr(data, "json_data"):
        value = data.json_data()
    elif dataclasses.is_dataclass(data) and not isinstance(data, type):
        value = one_level(data)
    else:
        value = data
    if isinstance(value, dict):
        value = {k: v for k, v in value.items() if k != "findings"}
    # The encoder asks for the dataclasses inside as it meets them (dataclasses.asdict deep-copies
    # every value first: 15 s of a 333k-op plan's JSON), also those inside a json_data() value;
    # what JSON cannot hold becomes its text.
    return json.loads(json.dumps(value, default=one_level))


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def one_level(value: Any) -> Any:
    """A dataclass instance as a dict of its fields, one level (a JSON encoder's ``default``: it
    comes back for the values); a container with a ``json_data()`` (columns that make their rows
    on demand) as what that gives; anything else as its text."""
    names = _FIELD_NAMES.get(type(value))
    if names is None:
        if isinstance(value, type):
            return str(value)
        if not dataclasses.is_dataclass(value):
            json_data = getattr(value, "json_data", None)
            return json_data() if callable(json_data) else str(value)
        names = _FIELD_NAMES[type(value)] = tuple(f.name for f in dataclasses.fields(value))
    return {name: getattr(value, name) for name in names}
