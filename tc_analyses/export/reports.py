"""Text and JSON renderings of analysis results. Human and machine output render the same result."""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any

from tc_analyses.analyses import machine_load
from tc_analyses.analyses.result import one_level
from tc_analyses.analyses.units import fmt_ms, fmt_utc
from tc_analyses.export.json_text import dumps_compact, dumps_indented
from tc_analyses.export.tables import table

if TYPE_CHECKING:  # only names for the annotations: a report of `info` must not load the optimiser
    from tc_analyses.analyses.edge_check import EdgeCheck
    from tc_analyses.analyses.placement.recommend import Recommendation
    from tc_analyses.analyses.summary import Summary
    from tc_analyses.analyses.trace_info import TraceInfo
    from tracer.importers import ImportSummary


def _top_level(result: Any) -> Any:
    """A result dataclass's fields and its derived properties, one level."""
    data = one_level(result)
    data.update({name: getattr(result, name) for name in getattr(result, "JSON_PROPERTIES", ())})
    return data


def to_json(result: Any) -> str:
    """Any result dataclass as stable, indented JSON (derived properties included)."""
    return dumps_indented(_top_level(result), one_level) + "\n"


def to_json_document(parts: dict[str, Any]) -> str:
    """Several results (dataclasses, lists of them, None) as one JSON object."""
    def plain(value: Any) -> Any:
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return json.loads(dumps_compact(_top_level(value), one_level))  # the values to_json writes
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        return value

    return dumps_indented({k: plain(v) for k, v in parts.items()}, str) + "\n"


def edge_check_text(check: EdgeCheck) -> str:
    """The precision and recall of a trace's edges against the execution trace, with examples."""
    def share(value: float | None) -> str:
        return "-" if value is None else f"{value:.4f}"

    lines = [f"ops:        {check.ops_ours:,} in the trace, {check.ops_et:,} in the execution trace, "
             f"{check.ops_matched:,} matched by name and order",
             f"precision:  {share(check.precision)} ({check.false_edges:,} of {check.edges:,} edges join no writer and "
             f"reader of one buffer)",
             f"recall:     {share(check.recall)} ({check.found:,} of {check.last_writer_edges:,} last-writer edges found)",
             f"duplicates: {check.duplicates:,} (edges with the producer, consumer and tensor of another)"]
    if check.et_truncated:
        lines.append("notice:     the execution trace ends early (its program died): compared up to its end")
    lines += [f"notice:     {notice}" for notice in check.notices]
    if check.unmatched_edges:
        lines.append(f"unmatched:  {check.unmatched_edges:,} edges join an op the execution trace lacks (not counted)")
    for title, examples in (("edges the execution trace does not have", check.false_examples),
                            ("edges missing", check.missing_examples)):
        if examples:
            lines.append(f"{title} (producer -> consumer, count):")
            lines += [f"  {p} -> {c}: {n:,}" for p, c, n in examples]
    return "\n".join(lines) + "\n"


def info_text(info: TraceInfo, *, max_streams: int = 20) -> str:
    lines = [
        f"trace:      {info.path}",
        f"producer:   {info.producer} (read with the {info.reader} reader)",
        f"events:     {info.events}" + ("  ** the trace is empty: no events were recorded **" if not info.events else ""),
        f"time span:  {fmt_utc(info.first_ns)} .. {fmt_utc(info.last_ns)} ({info.duration_ns / 1e6:.3f} ms)",
        f"discarded:  {info.discarded} events" + ("  ** events were lost while recording **" if info.discarded else ""),
    ]
    load = machine_load.of_env(info.env)
    if load is not None:  # how busy the machine was: a busy one inflates every measured cost
        lines.append(f"machine:    {load.cores} core(s), 1-minute load up to {load.load:.2f}, the program used "
                     f"{load.own:.1f} core(s)" + ("  ** busy: other work on half the cores or more **" if load.busy else ""))
    if info.processes:  # a job folder: which process is which (the one-trace commands read the main one)
        lines += [f"processes:  {len(info.processes)}"] + [f"  {p}" for p in info.processes]
    if info.steps:
        numbers = ", ".join(map(str, info.steps[:20])) + (f" ... ({len(info.steps)} in all)" if len(info.steps) > 20 else "")
        lines.append(f"steps:      {numbers} (dfcompass analyze --window picks some; the last is left out by default)")
    lines += [
        "",
        "events per class:",
    ]
    lines += ["  " + row for row in table(("class", "events"), list(info.events_per_class.items()))]
    lines += ["", f"streams: {len(info.streams)}"]
    shown = sorted(info.streams, key=lambda s: (-s.events, s.name))[:max_streams]
    lines += ["  " + row for row in table(("stream", "events", "discarded"),
                                            [(s.name, s.events, s.discarded) for s in shown])]
    if len(info.streams) > max_streams:
        lines.append(f"  ... {len(info.streams) - max_streams} more (use --format json for all)")
    return "\n".join(lines) + "\n"


def kineto_import_text(summary: ImportSummary) -> str:
    """What `dfcompass import-kineto` wrote, what it skipped and how it set the clock."""
    corr = summary.correlation
    gpu_ops = corr["gpu_with_launch"] + corr["gpu_without_launch"]
    devices = ", ".join(f"{name} ({model})" if model else name for name, model in summary.devices.items())
    streams = "; ".join(f"{d}: {', '.join(map(str, s))}" for d, s in summary.gpu_streams.items()) or "none"
    steps = summary.steps
    fields = [
        ("imported", f"{summary.source} -> {summary.output}"),
        ("events", f"{summary.events} written from {summary.source_events} Kineto events"),
        ("time span", f"{fmt_utc(summary.first_ns)} .. {fmt_utc(summary.last_ns)} "
                      f"({(summary.last_ns - summary.first_ns) / 1e6:.3f} ms; clock from {summary.clock_origin})"),
        ("devices", devices),
        ("GPU streams", streams),
        ("threads", str(summary.threads)),
        ("steps", f"{len(steps)}" + (f" (ProfilerStep#{steps[0]}..#{steps[-1]})" if steps else "")),
        ("launches", f"{corr['gpu_with_launch']} of {gpu_ops} GPU activities matched a runtime call "
                     f"({corr['api_joined_by_flow']} calls and {corr['gpu_joined_by_flow']} activities joined "
                     "through ac2g flows)"),
    ]
    lines = [f"{label + ':':<13}{value}" for label, value in fields] + [
        "",
        "events per class:",
    ]
    lines += ["  " + row for row in table(("class", "events"), list(summary.events_per_class.items()))]
    if summary.skipped:
        lines += ["", "skipped (no dfcompass event class):"]
        lines += ["  " + row for row in table(("kineto category", "events"), list(summary.skipped.items()))]
    for kind, mapping in summary.remapped_ids.items():
        dma = {raw: new for raw, new in mapping.items() if kind == "stream" and raw.startswith("dma ")}
        for title, part in ((f"remapped {kind}s (not 32-bit unsigned in the file)", {
                k: v for k, v in mapping.items() if k not in dma}),
                ("MTIA DMA queues (a stream's DMA requests, on a queue of their own)", dma)):
            if part:
                lines.append(f"\n{title}: " + ", ".join(f"{raw} -> {new}" for raw, new in part.items()))
    lines += ["", *(f"note: {note}" for note in summary.notes)]
    return "\n".join(lines) + "\n"


def _bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def summary_text(summary: Summary) -> str:
    """`dfcompass analyze` as text."""
    lines = [f"trace:       {summary.trace}",
             f"time span:   {summary.span_ns / 1e6:.3f} ms, {summary.events} events",
             f"lost events: {summary.lost_events}" + ("  ** results may miss work **" if summary.lost_events else ""),
             f"analyses:    {', '.join(summary.analyses)}", "", "busy (share of the time span):"]
    if summary.busy:
        lines += ["  " + row for row in table(("device", "queue", "busy %", "busy ms"), [
            (b.device, b.queue or "(all)", f"{b.percent:.1f}", f"{b.busy_ns / 1e6:.3f}") for b in summary.busy])]
    else:
        lines.append("  (no device activity in this trace)")
    lines += ["", "top nodes by total time:"]
    if summary.top_nodes:
        lines += ["  " + row for row in table(("op", "count", "total ms", "max ms"), [
            (n.op, n.count, f"{n.total_ns / 1e6:.3f}", f"{n.max_ns / 1e6:.3f}") for n in summary.top_nodes])]
    else:
        lines.append("  (no dataflow nodes in this trace)")
    lines += ["", "memory peak per device:"]
    lines += [f"  {device}: {_bytes(peak)}" for device, peak in summary.memory_peak.items()] or ["  (no memory events)"]
    return "\n".join(lines) + "\n"


def _ms(ns: float | None) -> str:
    return "-" if ns is None else fmt_ms(ns)


def _modelled_part(r: Recommendation) -> str:
    """`; modelled for cuda:0 (71 of 78 nodes there)`: which part of the speedup no measurement backs."""
    placed: dict[str, int] = {}
    for row in r.schedule:  # one row per node (the assignment is keyed by names, which repeat)
        placed[row["device"]] = placed.get(row["device"], 0) + 1
    parts = [f"{device} ({n} of {placed.get(device, n)} nodes there)" for device, n in sorted(r.modelled_on.items()) if n]
    return "; modelled for " + ", ".join(parts) if parts else "; every cost measured"


def placement_text(r: Recommendation) -> str:
    """`dfcompass recommend-placement` as text."""
    lines = [f"input:      {r.input} ({r.tasks} nodes)",
             "devices:    " + ", ".join(f"{d['name']}={d['model']}" + (" (default)" if d["model_is_default"] else "")
                                        for d in r.devices),
             f"algorithm:  {r.algorithm}",
             *([f"steps:      {r.step_kind}"] if r.step_kind else []),
             f"predicted:  {_ms(r.predicted_makespan_ns)} (the optimiser's schedule, every node of the graph once)",
             f"actual:     {_ms(r.actual_makespan_ns)} (the trace's placement, scheduled by the same model)",
             (f"speedup:    {r.speedup:.2f}x" + (f" (range {r.speedup_range[0]:.2f}-{r.speedup_range[1]:.2f}x: "
                                                   f"{r.range_covers})" if r.speedup_range else "")
              + _modelled_part(r))
             if r.speedup else "speedup:    - (no actual placement to compare with)"]
    if r.measured_step_ns is not None:
        # Only the held-out error: the replay is fitted to the steps it is checked against otherwise.
        replay = ""
        if r.replay_error is not None:
            replay = (f" (simulator replay error on held-out steps {100 * r.heldout_replay_error:.1f}%)"
                      if r.heldout_replay_error is not None else " (one step: no held-out step to check the simulator)")
        lines.append(f"step time:  measured {_ms(r.measured_step_ns)}" + replay
                     + (f"; estimated with the plan {_ms(r.measured_step_ns / r.speedup)}" if r.speedup else ""))
    lines.append("costs:      " + ", ".join(f"{n} {k}" for k, n in sorted(r.cost_sources.items())))
    lines += [f"notice:     {n}" for n in r.notices]
    lines += ["", f"moved nodes: {len(r.moved)}"]
    if r.moved:
        lines += ["  " + row for row in table(("node", "from", "to", "why"),
                                                [(m.name, m.from_device, m.to_device, m.reason) for m in r.moved[:30]])]
        if len(r.moved) > 30:
            lines.append(f"  ... {len(r.moved) - 30} more in plan.json (plan.json.gz above 2,000 ops)")
    return "\n".join(lines) + "\n"
