"""``dfcompass analyze TRACE``: the summary of the Trace Compass analyses run headless, then the
seed analyses as sections. ``report`` and the workers of a job (:mod:`tc_analyses.cluster`) make
their sections here too, so this module never imports the cluster."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from tc_analyses.errors import AnalysisUnavailable
from tc_analyses.inputs import Progress, TraceInputs, no_progress
from tc_analyses.registry import TRACE_KEYS

if TYPE_CHECKING:
    from tc_analyses.export.sections import SeedSection


@dataclass
class Analysis:
    """What ``dfcompass analyze`` found: the summary of the Trace Compass analyses and the sections."""

    summary: Any
    sections: list[SeedSection]

    def text(self, details: bool = True) -> str:
        """The summary, then each section in full; without `details`, one line per section (its first
        finding), so the page stays readable on real programs (a full page runs to hundreds of lines)."""
        from tc_analyses.export import reports
        from tc_analyses.export.sections import sections_headlines, sections_text

        summary = reports.summary_text(self.summary)
        path = str(getattr(self.summary, "trace", "") or "")
        return summary + (sections_text(self.sections) if details else sections_headlines(self.sections, path))

    def json(self) -> str:
        import json

        from tc_analyses.export import reports
        from tc_analyses.export.sections import sections_json

        if not self.sections:
            return reports.to_json(self.summary)
        return reports.to_json_document({**json.loads(reports.to_json(self.summary)),
                                         "sections": sections_json(self.sections)})


def analyze(inputs: TraceInputs, xml: Sequence[Path], top: int, section_keys: Sequence[str], peaks_device: str,
            plots: Path | None, progress: Progress = no_progress) -> Analysis:
    """The summary of the Trace Compass analyses (the generated ones unless `xml` names others),
    then the registered analyses named by `section_keys`."""
    from tc_analyses.analyses.summary import summarize

    summary = summarize(inputs.built(xml), top)
    sections = []
    if section_keys:
        with progress("seed analyses", len(section_keys)) as advance:
            sections = seed_sections(inputs, plots, tuple(section_keys), advance, peaks_options(peaks_device))
    return Analysis(summary, sections)


def peaks_options(peaks_device: str) -> dict[str, dict[str, Any]]:
    """The options of `analyze` and `report` by analysis: their --device goes to every option that
    takes a device's peaks; the others keep their defaults."""
    from tc_analyses.registry import ANALYSES

    return {a.key: {p.name: peaks_device for p in a.params if p.kind == "peaks-device"} for a in ANALYSES}


def seed_sections(inputs: TraceInputs, plot_dir: Path | None = None, keys: Sequence[str] = TRACE_KEYS,
                  advance: Callable[[int], None] = lambda n: None,
                  options: Mapping[str, Mapping[str, Any]] | None = None) -> list[SeedSection]:
    """Run the analyses named by `keys` on one trace (`options` by key); plots go to `plot_dir`."""
    from tc_analyses.export.sections import SeedSection
    from tc_analyses.registry import entry

    foreign = None if inputs.is_dfcompass else AnalysisUnavailable(
        f"{inputs.path}: not a dfcompass trace (only the Trace Compass analyses run on other CTF traces)")
    sections = []
    for key in keys:
        analysis = entry(key)
        try:
            if foreign is not None:
                raise foreign
            result = analysis.run(inputs, (options or {}).get(key))
        except AnalysisUnavailable as exc:  # other errors (a broken trace, a bad option) stop the command
            sections.append(SeedSection(analysis, None, f"not available: {exc}\n"))
        else:
            plots = analysis.plots(result, plot_dir) if plot_dir is not None else []
            sections.append(SeedSection(analysis, result, analysis.text(result), plots))
        advance(1)
    return sections
