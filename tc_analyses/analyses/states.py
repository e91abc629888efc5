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
from tc_analyses.model.events import iter_events
from tc_analyses.model.state_system import Interval, StateSystem
from tc_analyses.model.xml_pattern import Segment, load_patterns
from tc_analyses.model.xml_provider import load_providers
from tc_analyses.reader.fast import DfcTrace, read_trace


@dataclass
class BuiltAnalyses:
    trace: DfcTrace
    systems: dict[str, StateSystem] = field(default_factory=dict)  # analysis id -> state system
    segments: dict[str, list[Segment]] = field(default_factory=dict)  # pattern id -> segments


def build(trace_path: str | Path, xml_files: list[Path],
          progress: Callable[[int], None] | None = None) -> BuiltAnalyses:
    """Run every state provider and pattern of `xml_files` on the trace."""
    trace = read_trace(trace_path)
    built = BuiltAnalyses(trace)
    providers = [p for f in xml_files for p in load_providers(f)]
    patterns = [p for f in xml_files for p in load_patterns(f)]
    if not providers and not patterns:
        raise DfcompassError(f"{', '.join(map(str, xml_files))}: no stateProvider or pattern to run")
    for provider in providers:
        built.systems[provider.id] = provider.run(_counted(iter_events(trace), progress))
    for pattern in patterns:
        segments, system = pattern.run(_counted(iter_events(trace), progress))
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
        raise DfcompassError(f"{trace_path}: none of the analyses found events they handle in this trace "
                             f"(its classes: {', '.join(sorted(built.trace.tables)) or 'none'})")


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
