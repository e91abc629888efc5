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
    from tc_analyses.export.html_report import Section
    from tc_analyses.export.sections import SeedSection


def report_section(inputs: TraceInputs, work: Path, devices: str | None, peaks_device: str = "cpu",
                   progress: Progress = no_progress) -> tuple[Section, list[SeedSection]]:
    """The report section of one trace (info, analyze summary, the seed analyses with their plots,
    placement) and the seed sections themselves."""
    from tc_analyses.export import reports
    from tc_analyses.export.html_report import Block, Section, inline_svg
    section = Section(str(inputs.path))
    section.blocks.append(Block("Trace", reports.info_text(inputs.info)))
    section.blocks.append(Block("Headless analyses (busy, top nodes, memory)", reports.summary_text(inputs.summary())))
    with progress(f"seed analyses of {inputs.path.name}", len(TRACE_KEYS)) as advance:
        seeds = seed_sections(inputs, work, TRACE_KEYS, advance, peaks_options(peaks_device))
    for seed in seeds:
        svg = next((p for p in seed.plots if p.suffix == ".svg"), None)
        section.blocks.append(Block(seed.title, seed.text, inline_svg(svg.read_text()) if svg else ""))
    if devices:
        _, text = place(inputs.path, devices, work / "placement", inputs)
        section.blocks.append(Block(f"Placement on {devices}", text))
    return section, seeds


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


def report(traces: Sequence[Path], output: Path, devices: str | None, labels: str | None, axis: str,
           peaks_device: str, progress: Progress = no_progress, title: str = "dfcompass report") -> None:
    """One static HTML page with a section per trace, led by their trajectories when there are several."""
    from tc_analyses.analyses.labels import default_labels
    from tc_analyses.export.html_report import render

    names = default_labels([str(t) for t in traces], labels)
    runs = [TraceInputs(trace, progress) for trace in traces]
    with tempfile.TemporaryDirectory(prefix="dfcompass-report-") as tmp:
        sections = []
        for n, inputs in enumerate(runs):
            folder = Path(tmp) / str(n)
            folder.mkdir(parents=True)
            sections.append(report_section(inputs, folder, devices, peaks_device, progress)[0])
        if len(runs) >= 2:
            folder = Path(tmp) / "trajectory"
            folder.mkdir()
            sections.insert(0, trajectory_section(runs, names, axis, peaks_device, folder))
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(render(title, sections), encoding="utf-8")
