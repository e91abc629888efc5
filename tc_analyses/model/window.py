"""What part of a trace an analysis looks at: steps, a time range, a user annotation, and the last step.

Every analysis of one trace reads the same restricted :class:`~tc_analyses.model.activity.Activity`
(:class:`tc_analyses.inputs.TraceInputs` applies the window once), so they agree on what counts.

* ``--window`` picks steps (``ProfilerStep#2``, ``2``, ``2-4``) or a time range from the trace's
  first event (``12ms:30ms``, ``1.5s:2s``; a bare number is ns).
* ``--annotation NAME`` keeps the time inside the user annotations called NAME (every occurrence;
  an exact name first, else a glob such as ``'forward*'``).
* **The last step** (HTA's ``exclude_last_step``, its default): with two or more steps and no
  ``--window``, the last step is left out, because a profiler's last step is usually cut short
  (a window names what to analyse, the last step included).
  ``--include-last-step`` keeps it. The rule is this module's alone, so every analysis applies it.

Membership: CPU-side intervals (nodes, API calls, steps, annotations) are in when they start inside
the window; a GPU operation is in when the API call that launched it is (HTA's rule: GPU work
belongs to the step that launched it), or, with no recorded launch, when it starts inside and no
last-step cut applies (HTA drops unlaunched work when it cuts the last step).

Examples
--------
>>> parse_window("ProfilerStep#3"), parse_window("2-4"), parse_window("10ms:2s")
(StepWindow(first=3, last=3), StepWindow(first=2, last=4), TimeWindow(start_ns=10000000, end_ns=2000000000))
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, replace
from typing import Any, Sequence

import numpy as np

from tc_analyses.errors import ConfigurationError
from tc_analyses.model.activity import Activity, GpuTable, SyncTable

_UNITS = {"ns": 1, "us": 1_000, "µs": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
_STEPS = re.compile(r"^(?:ProfilerStep#|step\s*)?(\d+)(?:\s*-\s*(?:ProfilerStep#|step\s*)?(\d+))?$", re.IGNORECASE)
_TIME = re.compile(r"^\s*([0-9.]+)\s*(ns|us|µs|ms|s)?\s*$")


@dataclass(frozen=True)
class StepWindow:
    first: int
    last: int


@dataclass(frozen=True)
class TimeWindow:
    """From `start_ns` to `end_ns` after the trace's first event."""

    start_ns: int
    end_ns: int


def _time(text: str, spec: str) -> int:
    match = _TIME.match(text)
    if match is None:
        raise ConfigurationError(f"--window {spec!r}: {text!r} is not a time (e.g. 12ms, 1.5s, 200us, 5000)")
    return round(float(match.group(1)) * _UNITS[match.group(2) or "ns"])


def parse_window(spec: str) -> StepWindow | TimeWindow:
    """A ``--window`` value: steps (``ProfilerStep#2``, ``2``, ``2-4``) or ``START:END``."""
    text = spec.strip()
    steps = _STEPS.match(text)
    if steps is not None:
        first = int(steps.group(1))
        last = int(steps.group(2)) if steps.group(2) is not None else first
        if last < first:
            raise ConfigurationError(f"--window {spec!r}: the last step comes before the first")
        return StepWindow(first, last)
    if text.count(":") == 1:
        start, end = (_time(part, spec) for part in text.split(":"))
        if end <= start:
            raise ConfigurationError(f"--window {spec!r}: the end is not after the start")
        return TimeWindow(start, end)
    raise ConfigurationError(f"--window {spec!r}: expected steps (ProfilerStep#2, 2, 2-4) or a time range "
                             "from the trace's start (12ms:30ms)")


@dataclass(frozen=True)
class Window:
    """What an analysis looks at; the default is the whole trace without its last step (HTA's)."""

    spec: str | None = None  # --window
    annotation: str | None = None  # --annotation
    include_last_step: bool = False

    def __str__(self) -> str:
        parts = [f"window {self.spec}"] if self.spec else []
        parts += [f"annotation {self.annotation}"] if self.annotation else []
        return ", ".join(parts) or "whole trace"


@dataclass(frozen=True)
class Scope:
    """What a window kept: `ranges` (trace-clock ns), `cut_last_step` when the rule left it out."""

    window: str
    ranges: tuple[tuple[int, int], ...]
    steps: tuple[int, ...]  # the steps inside the window
    cut_last_step: bool
    dropped: int  # intervals left out (nodes, calls, GPU operations)

    def text(self) -> str:
        """One line saying what the analysis covers."""
        cut = ", last step left out (--include-last-step keeps it)" if self.cut_last_step else ""
        steps = f", steps {self.steps[0]}-{self.steps[-1]}" if len(self.steps) > 1 else (
            f", step {self.steps[0]}" if self.steps else "")
        return f"scope: {self.window}{steps}{cut}; {self.dropped} intervals outside"


def _merge(ranges: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _intersect(a: Sequence[tuple[int, int]], b: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    return [(max(s1, s2), min(e1, e2)) for s1, e1 in a for s2, e2 in b if max(s1, s2) < min(e1, e2)]


def _step_ranges(activity: Activity, first: int, last: int, what: str) -> list[tuple[int, int]]:
    runs = [s for s in activity.steps if first <= s.step <= last]
    if not runs:
        known = sorted({s.step for s in activity.steps})
        raise ConfigurationError(f"{activity.path}: no step {what} in this trace (steps: "
                                 f"{', '.join(map(str, known[:20])) or 'none recorded'})")
    return [(min(s.start for s in runs), max(s.end for s in runs))]


def _annotation_ranges(activity: Activity, name: str) -> list[tuple[int, int]]:
    found = [a for a in activity.annotations if a.name == name]
    if not found:
        found = [a for a in activity.annotations if fnmatch.fnmatchcase(a.name, name)]
    if not found:
        known = sorted({a.name for a in activity.annotations})
        raise ConfigurationError(f"{activity.path}: no user annotation {name!r} (annotations: "
                                 f"{', '.join(known[:12]) or 'none recorded'})")
    cpu = [a for a in found if not a.on_gpu]  # GPU annotations cover GPU time only; CPU ones decide
    return _merge([(a.start, a.end) for a in cpu or found])


def restrict(activity: Activity, window: Window) -> tuple[Activity, Scope]:
    """`activity` restricted to `window`, and what was kept; an activity already restricted is
    returned as it is (restricting twice would cut a second "last" step)."""
    if activity.windowed:
        return activity, Scope(str(window), (activity.span,), tuple(sorted({s.step for s in activity.steps})), False, 0)
    everything = (activity.span[0], activity.span[1] + 1)
    ranges = [everything]
    if window.spec:
        parsed = parse_window(window.spec)
        if isinstance(parsed, StepWindow):
            what = str(parsed.first) if parsed.first == parsed.last else f"{parsed.first}-{parsed.last}"
            ranges = _step_ranges(activity, parsed.first, parsed.last, what)
        else:
            origin, length = activity.span[0], activity.span[1] - activity.span[0]
            if parsed.start_ns > length:
                raise ConfigurationError(f"{activity.path}: --window {window.spec} starts after the trace ends "
                                         f"({length / 1e6:.3f} ms from its first event)")
            ranges = [(origin + parsed.start_ns, origin + parsed.end_ns)]
    if window.annotation:
        ranges = _intersect(ranges, _annotation_ranges(activity, window.annotation))
        if not ranges:
            raise ConfigurationError(f"{activity.path}: the annotation {window.annotation!r} does not overlap "
                                     f"--window {window.spec}")
    numbers = sorted({s.step for s in activity.steps})
    cut = not window.spec and not window.include_last_step and len(numbers) >= 2
    if cut:
        last_start = min(s.start for s in activity.steps if s.step == numbers[-1])
        ranges = _intersect(ranges, [(everything[0], last_start)])
        if not ranges:
            raise ConfigurationError(f"{activity.path}: the annotation {window.annotation!r} lies in the last step, "
                                     "which is left out by default: add --include-last-step")
    ranges = _merge(ranges)
    if ranges == [everything] and not cut:
        return replace(activity, windowed=True), Scope(str(window), tuple(ranges), tuple(numbers), False, 0)
    return _apply(activity, window, ranges, cut)


def _apply(activity: Activity, window: Window, ranges: list[tuple[int, int]], cut: bool) -> tuple[Activity, Scope]:
    bounds = np.asarray(ranges, dtype=np.int64).reshape(-1, 2)

    def inside(times: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
        at = np.searchsorted(bounds[:, 0], times, side="right") - 1
        return (at >= 0) & (times < bounds[np.maximum(at, 0), 1])

    def launched_inside(table: GpuTable | SyncTable) -> np.ndarray[Any, Any]:
        """GPU work belongs where the API call with its correlation id is; unlaunched work, by its start."""
        call = activity.calls_with_correlation(table.column("correlation_id"))
        call_start = activity.api.column("start")[np.maximum(call, 0)] if len(activity.api) else call
        return np.where(call >= 0, inside(call_start), inside(table.column("start")) & (not cut))

    node_kept = np.flatnonzero(inside(activity.nodes.column("start")))
    nodes = activity.nodes.take(node_kept)
    api = activity.api.take(inside(activity.api.column("start")))
    # owners are node indexes: renumber them into the kept nodes (-1 for a node left out)
    owner = api.column("owner")
    at = np.minimum(np.searchsorted(node_kept, owner), max(len(node_kept) - 1, 0))
    renumbered = np.where((owner >= 0) & (node_kept[at] == owner), at, -1) if len(node_kept) else np.full_like(owner, -1)
    api = api.with_columns(owner=renumbered)
    gpu = activity.gpu.take(launched_inside(activity.gpu))
    syncs = activity.syncs.take(launched_inside(activity.syncs))
    steps = [s for s in activity.steps if inside(np.asarray([s.start]))[0]]
    annotations = activity.annotations.take(inside(activity.annotations.column("start")))
    dropped = (len(activity.nodes) - len(nodes)) + (len(activity.api) - len(api)) + (len(activity.gpu) - len(gpu))
    span = (max(activity.span[0], ranges[0][0]), min(activity.span[1], ranges[-1][1]))
    kept = replace(activity, nodes=nodes, steps=steps, api=api, gpu=gpu, annotations=annotations, syncs=syncs,
                   span=span, windowed=True, _launch={})
    return kept, Scope(str(window), tuple(ranges), tuple(sorted({s.step for s in steps})), cut, dropped)
