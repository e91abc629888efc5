"""Trace summary: events per class, streams, time span and discarded events.

Works on dfcompass traces (fast numpy reader) and on any CTF 1.8 trace (LTTng kernel and UST
included: our general reader, or babeltrace2 in a child process). Every reader gives the same
summary for a dfcompass trace.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, ClassVar, Literal

from tracer import schema
from tc_analyses.errors import DfcompassError
from tc_analyses.reader import fast
from tc_analyses.reader.any_ctf import iter_any_ctf, reader_for
from tc_analyses.reader.records import Event
from tc_analyses.reader.metadata import find_traces, read_metadata

Reader = Literal["auto", "fast", "ctf", "bt2"]


@dataclass(frozen=True)
class StreamSummary:
    name: str  # stream file name, relative to the trace directory
    events: int
    discarded: int


@dataclass(frozen=True)
class TraceInfo:
    JSON_PROPERTIES: ClassVar[tuple[str, ...]] = ("duration_ns",)  # derived, added to --format json

    path: str
    producer: str  # tracer_name from the metadata env, or "unknown"
    reader: str  # "fast", "ctf" (our general CTF reader) or "bt2"
    events: int
    events_per_class: dict[str, int]
    streams: list[StreamSummary]
    first_ns: int | None  # ns since the Unix epoch (clock offset applied)
    last_ns: int | None
    discarded: int
    env: dict[str, str | int] = field(default_factory=dict)
    steps: tuple[int, ...] = ()  # the step numbers (dfc:step_begin), for --window; HTA's get_profiler_steps
    processes: tuple[str, ...] = ()  # a job folder's process traces: "folder: role (pid N)"

    @property
    def duration_ns(self) -> int:
        return 0 if self.first_ns is None or self.last_ns is None else self.last_ns - self.first_ns


def run(path: str | os.PathLike[str], reader: Reader = "auto",
        progress: Callable[[int], None] | None = None) -> TraceInfo:
    """Summarise the trace at `path`. `progress` gets bytes read (fast) or events read (ctf, bt2)."""
    path = Path(path)
    traces = find_traces(path)
    if len(traces) != 1:
        # A folder of traces (a recorded job, an LTTng session output): babeltrace2 reads them as one.
        if not traces:
            read_metadata(path)  # raises the precise error
        producers = {str(read_metadata(t).env.get("tracer_name", "unknown")) for t in traces}
        found = _from_records(Path(path), producers.pop() if len(producers) == 1 else "unknown", {}, progress, reader)
        return replace(found, processes=_processes(path))
    path = traces[0]  # the trace itself, or the one trace of a folder (a job of one process)
    meta = read_metadata(path)
    use_fast = reader == "fast" or (reader == "auto" and meta.is_dfcompass)
    producer = str(meta.env.get("tracer_name", "unknown"))
    if use_fast:
        return _from_fast(fast.read_trace(path, progress), producer)
    return _from_records(Path(path), producer, meta.env, progress, reader)


def _processes(folder: Path) -> tuple[str, ...]:
    """The dfcompass process traces of a job folder, by role (tc_analyses.reader.job)."""
    from tc_analyses.reader.job import describe, job_traces, roles

    try:
        processes = job_traces(folder)
    except DfcompassError:  # an LTTng session's traces: not ours, no roles
        return ()
    role = roles(processes)
    return tuple(f"{p.path.relative_to(folder)}: {describe(p, role[p.path])}" for p in processes)


def of_trace(trace: fast.DfcTrace) -> TraceInfo:
    """The summary of a dfcompass trace already read."""
    return _from_fast(trace, str(trace.metadata.env.get("tracer_name", "unknown")))


def _from_fast(trace: fast.DfcTrace, producer: str) -> TraceInfo:
    offset = trace.metadata.clock_offset_ns
    firsts = [s.first_ts for s in trace.streams if s.first_ts is not None]
    lasts = [s.last_ts for s in trace.streams if s.last_ts is not None]
    per_class = {name: len(table) for name, table in sorted(trace.tables.items())}
    streams = [StreamSummary(s.path.name, s.events, s.discarded) for s in trace.streams]
    return TraceInfo(
        str(trace.path), producer, "fast", sum(per_class.values()), per_class, streams,
        min(firsts) + offset if firsts else None, max(lasts) + offset if lasts else None,
        trace.discarded, dict(trace.metadata.env),
        tuple(sorted({int(s) for s in trace.table("step_begin")["step"].tolist()})),
    )


def _from_records(path: Path, producer: str, env: dict[str, str | int],
                  progress: Callable[[int], None] | None, reader: Reader) -> TraceInfo:
    per_class: Counter[str] = Counter()
    per_stream: Counter[str] = Counter()
    lost: Counter[str] = Counter()
    first = last = None
    used = reader if reader in ("ctf", "bt2") else reader_for(path)
    for n, item in enumerate(iter_any_ctf(path, with_fields=False, reader=used), 1):
        if isinstance(item, Event):
            per_class[item.name] += 1
            per_stream[item.stream] += 1
            first = item.ns_from_origin if first is None else first
            last = item.ns_from_origin
        else:
            lost[item.stream] += item.count or 0
        if progress is not None and n % 50_000 == 0:
            progress(50_000)
    names = sorted(set(per_stream) | set(lost))
    streams = [StreamSummary(_relative(name, path), per_stream[name], lost[name]) for name in names]
    streams.sort(key=lambda s: s.name)
    return TraceInfo(str(path), producer, used, sum(per_class.values()), dict(sorted(per_class.items())),
                     streams, first, last, sum(lost.values()), dict(env),
                     _steps_of(path) if per_class.get(schema.BY_SHORT["step_begin"].name) else ())


def _steps_of(path: Path) -> tuple[int, ...]:
    """The step numbers of a dfcompass trace read through bt2 (the events were counted without
    their fields): from the numpy reader, or none when it cannot read the trace."""
    try:
        return tuple(sorted({int(s) for s in fast.read_trace(path).table("step_begin")["step"].tolist()}))
    except DfcompassError:
        return ()


def _relative(stream_name: str, trace_dir: Path) -> str:
    try:
        return str(Path(stream_name).relative_to(trace_dir))
    except ValueError:
        return Path(stream_name).name or stream_name


# What a trace without ops is, by the only classes it holds, and where to look instead.
_NO_OP_CAUSES = (
    ({"api_enter", "kernel_begin", "memcpy_begin"}, "GPU runtime calls or kernels but no op on the CPU side"),
    ({"mem_alloc", "mem_free"}, "memory events but no op (a run stopped before its first profiled op ended?)"),
)


def nothing_to_analyse(path: str | Path) -> str:
    """Why a trace feeds no analysis of ops, in the user's terms: what it holds and what fits it.

    Called where a command finds no op (the generated analyses have no state provider, a plan has
    no node), instead of naming an internal step."""
    try:
        info = run(path, "fast")
    except DfcompassError as exc:  # not ours, or damaged: that is the problem to report
        return str(exc)
    if not info.events:
        return (f"{info.path}: the trace is empty: no events were recorded (a program killed before its first "
                "event, or one that traced nothing)")
    held = {name.removeprefix("dfc:"): count for name, count in info.events_per_class.items() if count}
    listed = ", ".join(f"{count} {name}" for name, count in sorted(held.items(), key=lambda kv: -kv[1])[:5])
    cause = next((text for names, text in _NO_OP_CAUSES if names & set(held)), None)
    if cause is None:
        cause = ("a process that ran no PyTorch or TensorFlow op and marked no tracer.node: a launcher such as "
                 "torchrun, a helper process, or a program that ended before its first op")
    job = Path(info.path).parent
    in_job = schema.ENV_PPID in info.env and sum((d / "metadata").is_file() for d in job.iterdir()) > 1
    hint = f"; its job folder {job} reads the main process by itself" if in_job else ""
    return (f"{info.path}: no op was recorded ({info.events} events: {listed or 'none'}): {cause}. "
            f"`dfcompass info` lists what it holds{hint}")
