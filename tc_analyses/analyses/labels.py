"""Order the runs of a trajectory by their labels: numerically when every label is a number."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

from tc_analyses.errors import ConfigurationError

T = TypeVar("T")


def label_number(label: str) -> float | None:
    try:
        return float(label)
    except ValueError:
        return None


def order_runs(runs: list[tuple[str, T]]) -> list[tuple[str, T]]:
    """`runs` ((label, value) pairs) sorted by numeric label, or in the given order otherwise."""
    numbers = [label_number(label) for label, _ in runs]
    if all(n is not None for n in numbers):
        return [run for _, run in sorted(zip(numbers, runs), key=lambda pair: pair[0])]  # type: ignore[arg-type,return-value]
    return list(runs)


def default_labels(paths: list[str], given: str | None) -> list[str]:
    """Labels from a comma-separated option, else each trace's folder name; each label once, since
    it names the run in the trajectory and its plot folder."""
    labels = [label.strip() for label in given.split(",")] if given else [Path(p).name or str(p) for p in paths]
    if given and len(labels) != len(paths):
        raise ConfigurationError(f"--labels has {len(labels)} label(s) for {len(paths)} trace(s)")
    repeated = sorted({label for label in labels if labels.count(label) > 1})
    if len(paths) > 1 and repeated:
        raise ConfigurationError(f"label {repeated[0]!r} is given to more than one trace (name them with --labels)")
    return labels
