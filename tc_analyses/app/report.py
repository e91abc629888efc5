"""``dfcompass report``: one static HTML page, a section per trace (info, the analyze summary, the
seed analyses with their plots, placement), led by their trajectories when there are several. A
job's workers make their sections with :func:`report_section` (:mod:`tc_analyses.cluster`)."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Sequence

from tc_analyses.app.analyze import peaks_options, seed_sections
from tc_analyses.app.place import place
from tc_analyses.errors import AnalysisUnavailable
from tc_analyses.inputs import Progress, TraceInputs, no_progress
from tc_analyses.registry import TRACE_KEYS

if TYPE_CHECKING:
    from tc_analyses.export.html_report import Lead, Section
    from tc_analyses.export.sections import SeedSection
    from tc_analyses.export.step_timeline import Window


MODELLED = frozenset({"roofline", "parallelism"})  # their figures come from a cost model, not the run's times


def report_section(inputs: TraceInputs, work: Path, devices: str | None, peaks_device: str = "cpu",
                   progress: Progress = no_progress, anchor: str = "", interactive: bool = False
                   ) -> tuple[Section, list[SeedSection]]:
    """The report section of one trace (info, analyze summary, the seed analyses that apply with
    their plots, one block for those that do not, placement) and the seed sections themselves.
    `anchor` prefixes the blocks' ids (one per trace of a page). `interactive` adds the zoomable
    figures: the step timeline, the roofline and the plans' Gantt charts (the page then carries
    plotly.js once); a job's sections, streamed, leave them out."""
    from tc_analyses.export import reports
    from tc_analyses.export.html_report import Block, Section, inline_svg
    from tc_analyses.export.sections import sections_headlines
    section = Section(str(inputs.path))
    section.blocks.append(Block("Trace", reports.info_text(inputs.info)))
    section.blocks.append(Block("Headless analyses (busy, top nodes, memory)", reports.summary_text(inputs.summary())))
    window = _typical_window(inputs) if interactive else None  # the timeline's step, the placement's too
    if window is not None:
        from tc_analyses.export.step_timeline import step_timeline_figure

        if timeline := step_timeline_figure(inputs.activity, inputs.trace.metadata.clock_offset_ns, window):
            section.blocks.append(Block("Step timeline", anchor=f"{anchor}timeline", interactive=timeline))
    with progress(f"seed analyses of {inputs.path.name}", len(TRACE_KEYS)) as advance:
        seeds = seed_sections(inputs, work, TRACE_KEYS, advance, peaks_options(peaks_device))
    for seed in (s for s in seeds if s.available):
        svg = next((p for p in seed.plots if p.suffix == ".svg"), None)
        figure = _figure(seed) if interactive else ""
        section.blocks.append(Block(seed.title, seed.text, inline_svg(svg.read_text()) if svg else "",
                                    f"{anchor}{seed.key}", figure))
    missing = [s for s in seeds if not s.available]
    if missing:
        line = sections_headlines(missing, str(inputs.path)).splitlines()[-1].strip()
        line = line.removeprefix("not available on this trace: ")
        section.blocks.append(Block("Not available for this trace", line + "\n", anchor=f"{anchor}missing"))
    if devices:
        result, text = place(inputs.path, devices, work / "placement", inputs)
        gantt = ""
        if interactive:
            from tc_analyses.export.plan_gantt import placement_figure

            gantt = placement_figure(result, inputs.activity, window)
        section.blocks.append(Block(f"Placement on {devices}", text, anchor=f"{anchor}placement", interactive=gantt))
    return section, seeds


def _typical_window(inputs: TraceInputs) -> Window | None:
    """The time the step timeline shows (tc_analyses.export.step_timeline); None for a trace with
    nothing to draw, or a foreign CTF trace, which has no nodes."""
    from tc_analyses.export.step_timeline import timeline_window

    return timeline_window(inputs.activity) if inputs.is_dfcompass else None


def _figure(seed: SeedSection) -> str:
    """The zoomable figure of an analysis that has one (the roofline, the stream plan's Gantt chart), else ""."""
    if seed.result is None:
        return ""
    if seed.key == "roofline":
        from tc_analyses.export.interactive import roofline_figure

        return roofline_figure(seed.result.data)
    if seed.key == "parallelism":
        from tc_analyses.export.plan_gantt import stream_plan_figure

        return stream_plan_figure(seed.result.data)
    return ""


def trajectory_section(runs: Sequence[TraceInputs], labels: Sequence[str], axis: str, peaks_device: str,
                       work: Path) -> Section:
    """The trajectories across the traces of every analysis that has one (roofline, runtime
    overhead...), for the traces that can feed it."""
    from tc_analyses.export.html_report import Block, Section, inline_svg
    from tc_analyses.registry import ANALYSES

    section = Section(f"Trajectory over {axis}: " + ", ".join(labels))
    missing = []
    for analysis in (a for a in ANALYSES if a.trajectory):
        options = peaks_options(peaks_device).get(analysis.key)
        results = []
        for label, inputs in zip(labels, runs):
            try:
                results.append((label, analysis.run(inputs, options)))
            except AnalysisUnavailable as exc:
                missing.append(f"{analysis.title} of {label}: {exc}")
        if len(results) >= 2:
            trajectory = analysis.run_trajectory(results, axis, options)
            svg = next((p for p in analysis.plots(trajectory, work) if p.suffix == ".svg"), None)
            section.blocks.append(Block(f"{analysis.title}: trajectory", analysis.text(trajectory),
                                        inline_svg(svg.read_text()) if svg else ""))
    if missing:
        section.blocks.append(Block("Not in the trajectories", "\n".join(missing) + "\n"))
    return section


def leads(label: str, anchor: str, sections: Sequence[SeedSection]) -> list[Lead]:
    """The findings of every analysis of one trace (`label` names it on a page of several, ""
    alone; `anchor` prefixes its blocks' ids), in the analyses' order, each with its analysis's plot
    as evidence (read from the plots the sections wrote, so before they are deleted; one string
    shared by the findings of an analysis): ranked by :func:`~tc_analyses.export.html_report.ranked`
    with those of the other traces."""
    from tc_analyses.export.html_report import Lead, thumbnail

    found = []
    for s in sections:
        if s.result is None or not s.result.findings:
            continue
        png = next((p for p in s.plots if p.suffix == ".png" and p.is_file()), None)
        try:
            evidence = thumbnail(png) if png is not None else ""
        except (OSError, ValueError):  # a plot Pillow cannot read: the finding goes without it
            evidence = ""
        for f in s.result.findings:
            found.append(Lead(f.text, s.title, label, f.impact_ns, "modelled" if s.key in MODELLED else "measured",
                              f"{anchor}{s.key}", evidence))
    return found


def report(traces: Sequence[Path], output: Path, devices: str | None, labels: str | None, axis: str,
           peaks_device: str, progress: Progress = no_progress, title: str = "dfcompass report") -> None:
    """One static HTML page with a section per trace, led by their trajectories when there are several."""
    from tc_analyses.analyses.labels import default_labels
    from tc_analyses.export.html_report import ranked, render

    names = default_labels([str(t) for t in traces], labels)
    runs = [TraceInputs(trace, progress) for trace in traces]
    with tempfile.TemporaryDirectory(prefix="dfcompass-report-") as tmp:
        sections, found = [], []
        for n, inputs in enumerate(runs):
            folder = Path(tmp) / str(n)
            folder.mkdir(parents=True)
            section, seeds = report_section(inputs, folder, devices, peaks_device, progress, f"t{n}-", True)
            sections.append(section)
            found += leads(names[n] if len(runs) > 1 else "", f"t{n}-", seeds)
        if len(runs) >= 2:
            folder = Path(tmp) / "trajectory"
            folder.mkdir()
            sections.insert(0, trajectory_section(runs, names, axis, peaks_device, folder))
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(render(title, sections, ranked(found)), encoding="utf-8")
