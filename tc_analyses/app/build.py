"""``dfcompass build-analyses`` and ``dfcompass states``: the Trace Compass XML analyses written,
and the intervals of their state systems; and the schema check of the user's own XML (``analyze
--xml`` and ``states``)."""

from __future__ import annotations

import importlib
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from tc_analyses.errors import ConfigurationError
from tc_analyses.inputs import Progress, TraceInputs, no_progress


@dataclass
class Built:
    """What ``build-analyses`` wrote, and what the XSD and the lint found wrong in it."""

    written: dict[str, Path]
    problems: list[str]
    xml_files: int


def build_analyses(trace: Path | None, output: Path, xsd: Path | None, validate: bool, job: bool = False) -> Built:
    """Write the Trace Compass analyses for `trace` (or the whole catalogue) into `output`; with
    `validate`, check every XML file against Trace Compass's XSD (found from `xsd`) and the lint.
    With `job`, `trace` is a job folder: the analyses fit all its processes, opened as one experiment."""
    from tc_analyses.export.tracecompass import write_output
    from tc_analyses.export.tracecompass.facts import job_facts
    from tc_analyses.export.tracecompass.validate import check_files, find_xsd

    schema = find_xsd(xsd) if validate else None  # a missing schema is reported before anything is written
    facts = None if trace is None else job_facts(trace) if job else TraceInputs(trace).facts
    written = write_output(output, facts)
    xml = sorted(p for k, p in written.items() if k.startswith("xml/"))
    return Built(written, check_files(xml, schema) if schema is not None else [], len(xml))


def states(trace: Path, xml: Sequence[Path], path_glob: str, at: int | None,
           progress: Progress = no_progress) -> Iterator[Any]:
    """The intervals of the XML analyses' state systems whose path matches `path_glob` (at time
    `at`), as rows made one at a time (a state system can hold millions of intervals)."""
    from tc_analyses.analyses.states import iter_rows

    return iter_rows(TraceInputs(trace, progress).built(xml), path_glob, at)


def states_csv(trace: Path, xml: Sequence[Path], path_glob: str, csv_out: Path,
               progress: Progress = no_progress) -> int:
    """Write the intervals :func:`states` gives (without a time) to `csv_out` as
    analysis,path,start,end,value, from the state systems' columns; the number of rows written. The
    analysis id tells apart the state systems of several analyses, such as latency.xml's patterns."""
    from tc_analyses.export.states_csv import write_states_csv

    warm = _import_beside("pyarrow.compute")  # the writer's, loaded while the analyses run
    built = TraceInputs(trace, progress).built(xml)
    warm.join()
    return write_states_csv(built, path_glob, csv_out)


def states_parquet(trace: Path, xml: Sequence[Path], path_glob: str, parquet_out: Path,
                   progress: Progress = no_progress) -> int:
    """The rows of :func:`states_csv` as a Parquet file; the number of rows written."""
    from tc_analyses.export.states_csv import write_states_parquet

    warm = _import_beside("pyarrow.parquet")
    built = TraceInputs(trace, progress).built(xml)
    warm.join()
    return write_states_parquet(built, path_glob, parquet_out)


def _import_beside(module: str) -> threading.Thread:
    """Import `module` on a daemon thread: most of the engine's time is numpy calls that let go
    of the GIL, so a writer's library (pyarrow: 0.1 to 0.2 s) loads in their shadow. An import
    that fails here fails again, with its message, where the writer imports it."""
    def load() -> None:
        try:
            importlib.import_module(module)
        except Exception:  # noqa: BLE001 - reported by the writer's own import
            pass

    import numpy  # noqa: F401, PLC0415 - the one library both threads load: loaded here first

    thread = threading.Thread(target=load, name=f"import {module}", daemon=True)
    thread.start()
    return thread


def write_states_csv(rows: Iterable[Any], csv_out: Path) -> int:
    """Write `rows` (``states`` at one time: a few) as CSV, as ``states --csv`` writes every
    interval (null an empty field, an empty string ``""``); the number of rows written."""
    from tc_analyses.export.states_csv import HEADER, csv_field, value_field

    count = 0
    with open(csv_out, "w", newline="", encoding="utf-8") as out:
        out.write(",".join(HEADER) + "\r\n")
        for row in rows:
            out.write(f"{csv_field(row.analysis)},{csv_field(row.path)},{row.start},{row.end},{value_field(row.value)}\r\n")
            count += 1
    return count


def check_user_xml(xml: Sequence[Path], xsd: Path | None) -> None:
    """Schema-check the user's XML when Trace Compass's XSD can be found (--xsd or the environment)."""
    if not xml:
        return
    from tc_analyses.export.tracecompass.validate import ENV, find_xsd, load_schema, validate_xsd

    if xsd is None and not os.environ.get(ENV, "").strip():
        return  # no schema at hand: the engine still names the element and line of what it refuses
    schema = load_schema(find_xsd(xsd))
    problems = [problem for path in xml for problem in validate_xsd(path, schema)]
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise ConfigurationError(f"{problems[0]}{more}")
