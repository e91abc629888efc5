"""The analysis commands besides ``analyze``: ``dfcompass KEY TRACE...`` for every registered
analysis (with its trajectory over several traces; a job analysis on the Dask cluster), and
``dfcompass diff CONTROL TEST``."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from tc_analyses.inputs import JobInputs, Progress, TraceInputs, no_progress

if TYPE_CHECKING:
    from tc_analyses.analyses.result import Result
    from tc_analyses.model.window import Window


@dataclass
class Ran:
    """What one analysis command gave: its text report and its JSON document, made when asked for
    (a 333k-op plan's JSON takes seconds that a text report does not need)."""

    text: str
    make_json: Callable[[], dict[str, Any]]

    @cached_property
    def json(self) -> dict[str, Any]:
        return self.make_json()


def run_analysis(key: str, traces: Sequence[Path], options: dict[str, Any], output: Path | None,
                 labels: str | None = None, axis: str = "batch", progress: Progress = no_progress,
                 window: Window | None = None, cluster: Mapping[str, Any] | None = None) -> Ran:
    """``dfcompass <key> TRACE...``: one registered analysis on each trace (restricted to `window`),
    with the trajectory across them when there are several; its plots and other files go to `output`.
    A job analysis runs its per-process work on the Dask cluster `cluster` describes (scheduler,
    workers, in_process: tc_analyses.cluster.job_map), in this process when it is None."""
    from tc_analyses.analyses.labels import default_labels
    from tc_analyses.registry import entry

    analysis = entry(key)
    names = default_labels([str(t) for t in traces], labels)
    results = []
    with progress(key, len(traces) if len(traces) > 1 else None) as advance:
        for trace in traces:
            if analysis.job:
                from tc_analyses.cluster import job_map

                with job_map(**(cluster or {"scheduler": None, "workers": None, "in_process": True})) as map_tasks:
                    results.append(analysis.run(JobInputs(trace, progress, map_tasks), options))
            else:
                results.append(analysis.run(TraceInputs(trace, progress, window), options))
            advance(1)
    if len(results) == 1:
        written = analysis.artifacts(results[0], output) if output is not None else []
        ran = Ran(analysis.text(results[0]), results[0].to_json)
    else:
        trajectory = analysis.run_trajectory(list(zip(names, results)), axis, options)
        written = []
        if output is not None:
            written = analysis.artifacts(trajectory, output)
            for label, result in zip(names, results):
                written += analysis.artifacts(result, output / label)
        ran = Ran("\n".join(analysis.text(r) for r in results) + "\n" + analysis.text(trajectory),
                  lambda: {"runs": [r.to_json() for r in results], "trajectory": trajectory.to_json()})
    if written:
        ran.text += "plots: " + ", ".join(str(p.resolve()) for p in written) + "\n"
    if output is not None and analysis.artifacts_note:
        ran.text += f"{analysis.artifacts_note}: {output.resolve()}\n"
    return ran


def diff(control: Path, test: Path, window: Window | None, top: int, output: Path | None,
         progress: Progress = no_progress) -> tuple[Result, str]:
    """``dfcompass diff CONTROL TEST``: the diff and its text report; its plot goes to `output`."""
    from tc_analyses.analyses import trace_diff
    from tc_analyses.export import diff_report

    result = trace_diff.run(TraceInputs(control, progress, window), TraceInputs(test, progress, window))
    text = diff_report.text(result, top)
    if output is not None:
        text += "plots: " + ", ".join(str(p.resolve()) for p in diff_report.plots(result, output)) + "\n"
    return result, text
