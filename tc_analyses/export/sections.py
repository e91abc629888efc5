"""The seed analyses of one trace as report sections, shared by `dfcompass analyze` and `report`.

Each section runs one analysis (roofline, runtime overhead, HTA-compatible breakdown, memory,
inter-operator parallelism) on a trace read once, renders it as text and, when asked, as plots.
An analysis the trace cannot feed (a CPU-only trace has no kernels for the overhead analysis, a
trace without shapes has no roofline) gives a section whose text says why, not an error: the
other sections are still worth reading.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from tc_analyses.errors import DfcompassError
from tc_analyses.inputs import TraceInputs


@dataclass
class Inputs:
    """A trace's shared inputs and the roofline's peaks device."""

    inputs: TraceInputs
    peaks_device: str = "cpu"

    @property
    def path(self) -> Path:
        return self.inputs.path

    @property
    def trace(self) -> Any:
        return self.inputs.trace

    @property
    def activity(self) -> Any:
        return self.inputs.activity

    @property
    def graph(self) -> Any:
        return self.inputs.graph


@dataclass
class SeedSection:
    key: str  # "roofline", "overhead", ...
    title: str
    result: Any | None  # the analysis result, None when unavailable
    text: str  # the rendered report, or "not available: <reason>"
    plots: list[Path] = field(default_factory=list)

    @property
    def available(self) -> bool:
        return self.result is not None

    def headline(self) -> str:
        """The first finding of the report (or why the section is unavailable), on one line."""
        lines = self.text.splitlines()
        if not self.available:
            return lines[0] if lines else ""
        starts = [i for i, line in enumerate(lines) if line.strip().lower().startswith("findings")]
        for line in lines[starts[0] + 1:] if starts else []:
            text = line.strip().lstrip("-").strip()
            if text:
                text = text.split(". ", 1)[1] if text[:1].isdigit() and ". " in text[:4] else text
                return "no findings" if text == "none" else text
        return lines[0] if lines else ""


def _plain(result: Any) -> Any:
    """A result as plain JSON data: the JSON form its module defines, else its dataclass fields."""
    if isinstance(result, _WithJson):
        return result.data
    if isinstance(result, tuple):  # several results of one analysis, by type
        return {type(r).__name__: _plain(r) for r in result}
    from tc_analyses.export import reports

    return json.loads(reports.to_json(result))


# --------------------------------------------------------------------------------------- runners
# Each runner returns (result, text, plot writer or None); a DfcompassError means "not available".
Runner = Callable[[Inputs], tuple[Any, str, Callable[[Path], list[Path]] | None]]


def _roofline(inputs: Inputs) -> tuple[Any, str, Callable[[Path], list[Path]] | None]:
    from tc_analyses.analyses.roofline import device_peaks, recorded_threads, roofline
    from tc_analyses.export import reports
    from tc_analyses.export.roofline_plot import write_roofline_plot

    result = roofline(inputs.graph, device_peaks(inputs.peaks_device), str(inputs.path),
                      recorded_threads(inputs.trace))
    return result, reports.roofline_text(result), lambda out: write_roofline_plot(result, out)


def _overhead(inputs: Inputs) -> tuple[Any, str, Callable[[Path], list[Path]] | None]:
    from tc_analyses.analyses.overhead import analyze_overhead
    from tc_analyses.export.overhead_report import overhead_text, write_overhead_plot

    result = analyze_overhead(inputs.activity, str(inputs.path))
    return result, overhead_text(result), lambda out: write_overhead_plot(result, out)


def _breakdown(inputs: Inputs) -> tuple[Any, str, Callable[[Path], list[Path]] | None]:
    from tc_analyses.analyses.breakdown import idle_breakdown, temporal_breakdown
    from tc_analyses.export.breakdown_report import breakdown_text, write_breakdown_plot

    temporal = temporal_breakdown(inputs.activity, inputs.trace)
    idle = idle_breakdown(inputs.activity, inputs.trace)
    return (temporal, idle), breakdown_text(temporal, idle), lambda out: write_breakdown_plot(temporal, idle, out)


def _memory(inputs: Inputs) -> tuple[Any, str, Callable[[Path], list[Path]] | None]:
    from tc_analyses.analyses.memory import analyze_memory, as_dict
    from tc_analyses.export.memory_report import memory_text, write_memory_plot

    result = analyze_memory(inputs.trace, inputs.activity)
    return _WithJson(result, as_dict(result)), memory_text(result), lambda out: write_memory_plot(result, out)


def _parallelism(inputs: Inputs) -> tuple[Any, str, Callable[[Path], list[Path]] | None]:
    from tc_analyses.analyses.parallelism import plan_trace
    from tc_analyses.export.parallelism_report import plan_json, plan_text, write_parallelism_plot

    plan = plan_trace(inputs.trace, graph=inputs.graph, activity=inputs.activity)
    return _WithJson(plan, plan_json(plan)), plan_text(plan), lambda out: write_parallelism_plot(plan, out)


@dataclass(frozen=True)
class _WithJson:
    """A result whose module defines its JSON form (e.g. without the plot series)."""

    result: Any
    data: dict[str, Any]


SECTIONS: dict[str, tuple[str, Runner]] = {
    "roofline": ("Roofline (paper b)", _roofline),
    "overhead": ("Runtime overhead (paper d)", _overhead),
    "breakdown": ("Temporal and idle-time breakdown (HTA-compatible)", _breakdown),
    "memory": ("Memory (paper a)", _memory),
    "parallelism": ("Inter-operator parallelism (paper c)", _parallelism),
}


def seed_sections(inputs: TraceInputs, plot_dir: Path | None = None, keys: tuple[str, ...] = tuple(SECTIONS),
                  advance: Callable[[int], None] = lambda n: None, peaks_device: str = "cpu") -> list[SeedSection]:
    """Run the seed analyses named by `keys` on one trace; plots go to `plot_dir` when given."""
    sections = []
    shared = Inputs(inputs, peaks_device)
    for key in keys:
        title, run = SECTIONS[key]
        try:
            result, text, plot = run(shared)
        except DfcompassError as exc:
            sections.append(SeedSection(key, title, None, f"not available: {exc}\n"))
        else:
            plots = plot(plot_dir) if plot is not None and plot_dir is not None else []
            sections.append(SeedSection(key, title, result, text, plots))
        advance(1)
    return sections


def sections_json(sections: list[SeedSection]) -> dict[str, Any]:
    """Every section by key: {"available": false, "reason": ...} or {"available": true, ...its result}."""
    out: dict[str, Any] = {}
    for s in sections:
        if s.result is None:
            out[s.key] = {"available": False, "reason": s.text.removeprefix("not available: ").strip()}
        else:
            out[s.key] = {"available": True, **_plain(s.result)}
    return out


def sections_text(sections: list[SeedSection]) -> str:
    return "".join(f"\n== {s.title} ==\n{s.text}" for s in sections)
