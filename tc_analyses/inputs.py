"""What the analyses of one trace share, made once: the trace read, its activity, graph and facts.

Every command that runs several analyses on a trace (``analyze``, ``report``, ``demo``) builds one
:class:`TraceInputs` and hands it to each of them, so the trace is read from disk once however many
analyses use it. Each part is computed the first time something asks for it.

Examples
--------
>>> inputs = TraceInputs("tests/data/traces/succeed/all-classes")
>>> inputs.trace is inputs.trace  # read once
True
>>> inputs.reads
1
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import replace
from contextlib import AbstractContextManager, nullcontext
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence, TypeVar

if TYPE_CHECKING:  # the heavy modules load when a part is first asked for, not at import
    import networkx as nx

    from tc_analyses.model.window import Window

    from tc_analyses.analyses.summary import Summary
    from tc_analyses.analyses.trace_info import TraceInfo
    from tc_analyses.engine import BuiltAnalyses
    from tc_analyses.export.tracecompass.model import TraceFacts
    from tc_analyses.model.activity import Activity
    from tc_analyses.model.graph_table import GraphTable
    from tc_analyses.model.window import Scope
    from tc_analyses.reader.fast import DfcTrace

Advance = Callable[[int], None]


T = TypeVar("T")
A = TypeVar("A")


class Progress(Protocol):
    """Opens a progress indicator: ``with progress(label, total, unit) as advance: advance(n)``."""

    def __call__(self, label: str, total: int | None, unit: str = "items") -> AbstractContextManager[Advance]: ...


def no_progress(label: str, total: int | None, unit: str = "items") -> AbstractContextManager[Advance]:
    """A :class:`Progress` that shows nothing (library use, tests, pipes)."""
    return nullcontext(lambda n: None)


class TraceInputs:
    """One trace and what the analyses derive from it, each made on first use and kept.

    Parameters
    ----------
    path : str or Path
        The trace directory (a dfcompass trace, or any CTF trace for :meth:`built` and
        :attr:`info`), or a recorded job folder that holds one process trace.
    progress : Progress, optional
        Shows the reading of the trace and the headless run of the Trace Compass analyses.
    window : Window, optional
        The part of the trace the analyses look at (:mod:`tc_analyses.model.window`); by default
        the whole trace without its last step when it has two or more.
    cache : Path, optional
        A folder for the trace's activity as Parquet (:mod:`tc_analyses.model.activity_store`):
        written the first time, read instead of pairing the events every later time.
    """

    def __init__(self, path: str | Path, progress: Progress = no_progress, window: Window | None = None,
                 cache: Path | None = None) -> None:
        from tc_analyses.model.window import Window
        from tc_analyses.reader.job import single_trace

        self.path = single_trace(path)  # a job folder of one process is that process's trace
        self.progress = progress
        self.window = window if window is not None else Window()
        self.reads = 0  # how many times the trace was read from disk (1 at most for a dfcompass trace)
        self.cache = cache
        self.activity_from = ""  # "cache" or "trace": where whole_activity came from
        self._built: dict[tuple[Path, ...], BuiltAnalyses] = {}

    def __repr__(self) -> str:
        return f"TraceInputs({str(self.path)!r})"

    @cached_property
    def is_dfcompass(self) -> bool:
        """Whether the numpy reader can read the trace (else only the bt2 paths apply)."""
        from tc_analyses.reader.metadata import is_dfcompass_trace

        return is_dfcompass_trace(self.path)

    @cached_property
    def trace(self) -> DfcTrace:
        """The trace's event tables (a dfcompass trace; raises TraceError for any other)."""
        from tc_analyses.reader.fast import read_trace

        size = sum(p.stat().st_size for p in self.path.iterdir() if p.is_file()) if self.path.is_dir() else 0
        with self.progress("reading", size or None, "bytes") as advance:
            trace = read_trace(self.path, advance)
        self.reads += 1
        return trace

    @cached_property
    def whole_activity(self) -> Activity:
        """Begin/end events paired into node, step, API-call and GPU-operation intervals: the whole trace."""
        from tc_analyses.model.activity import read_activity

        if self.cache is None or not self.is_dfcompass:
            self.activity_from = "trace"
            return read_activity(self.trace)
        from tc_analyses.model.activity_store import cache_file, read_activity_file, write_activity

        from tc_analyses.errors import TraceError

        # The cache only saves time: an entry that cannot be read (damaged, not ours, no
        # permission) is a miss, and one that cannot be written is left out.
        stored: Path | None = None
        try:
            stored = cache_file(self.cache, self.path)
            if (stored / "meta.json").is_file():
                found = replace(read_activity_file(stored), path=str(self.path))  # the trace may have moved
                self.activity_from = "cache"
                return found
        except (OSError, TraceError):
            pass
        activity = read_activity(self.trace)
        try:
            if stored is not None:
                write_activity(activity, stored)
        except (OSError, TraceError):
            pass
        self.activity_from = "trace"
        return activity

    @cached_property
    def _restricted(self) -> tuple[Activity, Scope]:
        from tc_analyses.model.window import restrict

        return restrict(self.whole_activity, self.window)

    @property
    def activity(self) -> Activity:
        """The activity inside the window: what every analysis reads."""
        return self._restricted[0]

    @property
    def scope(self) -> Scope:
        """What the window kept (said at the top of each analysis's report)."""
        return self._restricted[1]

    @cached_property
    def graph_table(self) -> GraphTable:
        """The computation graph of the window as columns (what :attr:`graph` is made from)."""
        from tc_analyses.model.graph_table import graph_table

        kept = None if self.scope.dropped == 0 else {n.node_id for n in self.activity.nodes}
        return graph_table(self.trace, self.activity, executions=kept)

    @cached_property
    def graph(self) -> nx.DiGraph:
        """The computation graph of the window (nodes folded across steps, tensor edges)."""
        return self.graph_table.to_networkx()

    @cached_property
    def facts(self) -> TraceFacts:
        """What the trace holds, for tailoring the generated Trace Compass analyses to it."""
        from tc_analyses.export.tracecompass.facts import trace_facts

        return trace_facts(self.trace)

    @cached_property
    def info(self) -> TraceInfo:
        """Events per class, streams, time span, discarded events (any CTF trace)."""
        from tc_analyses.analyses import trace_info

        if self.is_dfcompass:
            return trace_info.of_trace(self.trace)
        with self.progress("reading", None, "items") as advance:
            return trace_info.run(self.path, "auto", advance)

    def built(self, xml_files: Sequence[Path] = ()) -> BuiltAnalyses:
        """The state systems and segments of `xml_files` (default: the analyses generated for this
        trace) run headless over the trace."""
        key = tuple(xml_files)
        if key not in self._built:
            self._built[key] = self._build(key)
        return self._built[key]

    def summary(self, top: int = 10) -> Summary:
        """The ``analyze`` summary of the generated analyses: busy, top nodes, memory peaks."""
        from tc_analyses.analyses.summary import summarize

        return summarize(self.built(), top)

    def _build(self, xml_files: tuple[Path, ...]) -> BuiltAnalyses:
        from tc_analyses.engine import build
        from tc_analyses.export.tracecompass.render import render_xml

        source = self.trace if self.is_dfcompass else self.path
        with tempfile.TemporaryDirectory(prefix="dfcompass-xml-") as tmp:
            files = list(xml_files)
            if not files:  # the analyses generated for this trace (a dfcompass trace only)
                for name, data in render_xml(self.facts).items():
                    (Path(tmp) / name).write_bytes(data)
                    files.append(Path(tmp) / name)
                if not files:
                    from tc_analyses.analyses.trace_info import nothing_to_analyse
                    from tc_analyses.errors import AnalysisUnavailable

                    raise AnalysisUnavailable(nothing_to_analyse(self.path))
            with self.progress("analysing events", None, "items") as advance:
                return build(source, files, advance, engine_choice())


def engine_choice() -> str:
    """How the XML analyses run: DFCOMPASS_ENGINE=auto (columns where they can, the default),
    interpreter (event by event, each analysis over the events it handles) or events (the plain
    reference run over every event). For comparing and benchmarking the engines."""
    from tc_analyses.engine.run import ENGINES
    from tc_analyses.errors import ConfigurationError

    choice = os.environ.get("DFCOMPASS_ENGINE", "auto")
    if choice not in ENGINES:
        raise ConfigurationError(f"DFCOMPASS_ENGINE={choice!r}: not an engine; choose one of {', '.join(ENGINES)}")
    return choice


def map_here(function: Callable[[T], A], items: Sequence[T]) -> list[A]:
    """A job's per-process work, one process after another in this process."""
    return [function(item) for item in items]


class JobInputs:
    """The process traces of one job (tracer/job.py), each with its own :class:`TraceInputs`.

    ``processes[i]`` describes the trace that ``inputs[i]`` reads (on first use, as always).
    ``map(function, items)`` runs a job analysis's per-process work: here by default, on Dask
    when the command was given a cluster (tc_analyses.cluster.job_map).
    """

    def __init__(self, path: str | Path, progress: Progress = no_progress,
                 map: Callable[[Callable[[T], A], Sequence[T]], list[A]] | None = None) -> None:
        from tc_analyses.reader.job import job_traces
        from tc_analyses.reader.metadata import read_metadata

        self.path = Path(path)
        self.processes = job_traces(self.path)
        if not self.processes:
            read_metadata(self.path)  # raises the precise error (not a folder, no metadata)
        self.inputs = [TraceInputs(p.path, progress) for p in self.processes]
        self.map: Any = map if map is not None else map_here

    def __repr__(self) -> str:
        return f"JobInputs({str(self.path)!r}, {len(self.processes)} processes)"
