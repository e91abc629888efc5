"""Build the state systems (and latency segments) of XML analyses over a dfcompass trace.

Events: every event of the trace in timestamp order (``tc_analyses.model.events``). Analyses:
any XML files; the CLI passes the generated ones (``dfcompass build-analyses`` for the trace)
when the user names none.
Returns a :class:`BuiltAnalyses` that the summary and the ``states`` command read.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from tc_analyses.errors import DfcompassError
from tc_analyses.model.events import iter_ctf_events, iter_events
from tc_analyses.model.state_system import Interval, StateSystem
from tc_analyses.model.xml_pattern import Segment, load_patterns
from tc_analyses.model.xml_provider import Event, load_providers
from tc_analyses.reader.fast import DfcTrace, read_trace
from tc_analyses.reader.metadata import is_dfcompass_trace


@dataclass
class BuiltAnalyses:
    path: str
    first_ts: int | None = None  # first and last event timestamps, trace clock
    last_ts: int | None = None
    events: int = 0
    lost: int = 0  # events the tracer reported lost
    classes: tuple[str, ...] = ()  # event names seen
    systems: dict[str, StateSystem] = field(default_factory=dict)  # analysis id -> state system
    segments: dict[str, list[Segment]] = field(default_factory=dict)  # pattern id -> segments

    @property
    def span_ns(self) -> int:
        return 0 if self.first_ts is None or self.last_ts is None else self.last_ts - self.first_ts + 1


def _event_source(source: str | Path | DfcTrace, built: BuiltAnalyses) -> Callable[[], Iterator[Event]]:
    """A function giving a fresh time-ordered event stream (one pass per analysis)."""
    if isinstance(source, DfcTrace) or is_dfcompass_trace(source):
        trace = source if isinstance(source, DfcTrace) else read_trace(source)
        built.lost = trace.discarded
        built.classes = tuple(sorted(name for name, table in trace.tables.items() if len(table)))
        built.events = sum(len(t) for t in trace.tables.values())
        firsts = [s.first_ts for s in trace.streams if s.first_ts is not None]
        lasts = [s.last_ts for s in trace.streams if s.last_ts is not None]
        built.first_ts, built.last_ts = (min(firsts), max(lasts)) if firsts else (None, None)
        return lambda: iter_events(trace)
    events = list(iter_ctf_events(source))  # babeltrace2 is slow: read once, replay per analysis
    built.events = sum(1 for e in events if e[0] != "Lost event")
    built.lost = sum(int(e[2].get("count") or 0) for e in events if e[0] == "Lost event")
    built.classes = tuple(sorted({e[0] for e in events}))
    if events:
        built.first_ts, built.last_ts = events[0][1], events[-1][1]
    return lambda: iter(events)


def build(source: str | Path | DfcTrace, xml_files: list[Path],
          progress: Callable[[int], None] | None = None) -> BuiltAnalyses:
    """Run every state provider and pattern of `xml_files` on a trace: any CTF trace at a path,
    or a dfcompass trace already read."""
    trace_path = source.path if isinstance(source, DfcTrace) else source
    built = BuiltAnalyses(str(trace_path))
    events = _event_source(source, built)
    providers = [p for f in xml_files for p in load_providers(f)]
    patterns = [p for f in xml_files for p in load_patterns(f)]
    if not providers and not patterns:
        raise DfcompassError(f"{', '.join(map(str, xml_files))}: no stateProvider or pattern to run")
    for provider in providers:
        built.systems[provider.id] = provider.run(_counted(events(), progress))
    for pattern in patterns:
        segments, system = pattern.run(_counted(events(), progress))
        built.segments[pattern.id] = segments
        built.systems[pattern.id] = system
    _check_matches(built, trace_path)
    return built


def _counted(events: Iterator, progress: Callable[[int], None] | None) -> Iterator:
    if progress is None:
        yield from events
        return
    for n, event in enumerate(events, 1):
        if n % 10_000 == 0:
            progress(10_000)
        yield event


def _check_matches(built: BuiltAnalyses, trace_path: str | Path) -> None:
    """A trace that does not match the analyses gives a clear message, not empty output."""
    useful = [p for p, ss in built.systems.items() if any(
        any(i.value is not None for i in intervals) for _, intervals in ss.items())]
    if not useful and not any(built.segments.values()):
        shown = ", ".join(built.classes[:12]) + (" ..." if len(built.classes) > 12 else "")
        raise DfcompassError(f"{trace_path}: none of the analyses found events they handle in this trace "
                             f"(its events: {shown or 'none'})")


@dataclass(frozen=True)
class StateRow:
    analysis: str
    path: str
    start: int
    end: int
    value: str | None


def rows(built: BuiltAnalyses, path_glob: str = "*", at: int | None = None) -> list[StateRow]:
    """Intervals of every attribute whose '/'-joined path matches `path_glob` (all at time `at`)."""
    out = []
    for analysis, ss in sorted(built.systems.items()):
        for path, intervals in ss.items():
            joined = "/".join(path)
            if not fnmatch.fnmatchcase(joined, path_glob):
                continue
            for interval in _select(intervals, at):
                value = None if interval.value is None else str(interval.value)
                out.append(StateRow(analysis, joined, interval.start, interval.end, value))
    return out


def _select(intervals: list[Interval], at: int | None) -> list[Interval]:
    if at is None:
        return intervals
    return [i for i in intervals if i.start <= at <= i.end]
