"""One exception hierarchy for dfcompass; the CLI turns each into a one-line message and exit code."""

from __future__ import annotations

import os


class DfcompassError(Exception):
    """Base of every error dfcompass reports to users."""

    exit_code = 1


class TraceError(DfcompassError):
    """A trace cannot be read: names the file and, when known, the byte offset."""

    def __init__(self, path: str | os.PathLike[str], problem: str, offset: int | None = None) -> None:
        self.path = str(path)
        self.problem = problem
        self.offset = offset
        where = f"{self.path}: at byte {offset}: " if offset is not None else f"{self.path}: "
        super().__init__(where + problem)


class SchemaVersionError(TraceError):
    """A dfcompass trace written with an incompatible event catalogue."""


class MissingDependencyError(DfcompassError):
    """An optional system component (bt2, babeltrace2, torch...) is not installed."""


class AnalysisUnavailable(DfcompassError):
    """This trace cannot feed this analysis (no GPU work for the overhead analysis, no shapes for the
    roofline...). `analyze` and `report` show the reason in the analysis's section and go on."""


class GraphError(AnalysisUnavailable):
    """A computation graph breaks a precondition of an analysis (e.g. it has a cycle)."""


class ConfigurationError(DfcompassError):
    """Bad options or arguments that the argument parser could not catch."""

    exit_code = 2
