"""`states --csv` is written from the state systems' columns; its bytes must be those the csv module
writes row by row, odd names and values included (the reference below is that row-by-row writer)."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tc_analyses.analyses.states import iter_rows
from tc_analyses.engine import build
from tc_analyses.engine.state_system import StateSystem, Value
from tc_analyses.export.states_csv import HEADER, csv_field, write_states_csv

DATA = Path(__file__).resolve().parents[1] / "data"
ODD = ["plain", "a,b", 'say "hi"', "two\nlines", "cr\rhere", "", " lead", "<&>'", "ünï ✓", "[.*]+?", "x" * 300]


def _row_by_row(built: Any, path_glob: str = "*") -> bytes:
    out = io.StringIO(newline="")
    writer = csv.writer(out)
    writer.writerow(HEADER)
    for row in iter_rows(built, path_glob):
        writer.writerow([row.analysis, row.path, row.start, row.end, "" if row.value is None else row.value])
    return out.getvalue().encode()


def _odd_system() -> StateSystem:
    """Attributes named oddly, holding odd strings, nulls, ints and doubles (one kind an attribute)."""
    ss = StateSystem(0)
    t = 0
    kinds: dict[str, list[Any]] = {"string": [*ODD, None, "last"], "long": [7, None, -3, 2**40],
                                   "double": [2.5, None, 1e20, -0.0, 0.1]}
    for name in ODD:
        for kind, values in kinds.items():
            for value in values:
                t += 10
                ss.modify(("Threads", name, kind), None if value is None else Value(kind, value), t)
    ss.close(t + 5)
    return ss


def test_odd_names_and_values_give_the_csv_modules_bytes(tmp_path: Path) -> None:
    built = SimpleNamespace(systems={"an,odd \"id\"": _odd_system(), "plain.id": _odd_system()})
    out = tmp_path / "states.csv"
    count = write_states_csv(built, "*", out)  # type: ignore[arg-type]  # reads .systems only
    expected = _row_by_row(built)
    assert out.read_bytes() == expected
    assert count == expected.count(b"\r\n") - 1 - sum(text.count("\r\n") for text in ODD)  # rows, not lines
    assert count > 2 * len(ODD) * 10


@pytest.mark.parametrize("glob", ["*", "Threads/a,b/*", "Threads/[[]*", "nothing/*"])
def test_a_path_glob_selects_the_same_rows(tmp_path: Path, glob: str) -> None:
    built = SimpleNamespace(systems={"id": _odd_system()})
    out = tmp_path / "states.csv"
    write_states_csv(built, glob, out)  # type: ignore[arg-type]
    assert out.read_bytes() == _row_by_row(built, glob)


def test_a_field_is_quoted_as_the_csv_module_quotes_it() -> None:
    assert csv_field("plain") == "plain" and csv_field("") == ""
    assert csv_field("a,b") == '"a,b"' and csv_field('q"q') == '"q""q"' and csv_field("l\nl") == '"l\nl"'


def test_a_real_trace_with_every_generated_analysis(tmp_path: Path) -> None:
    """The columnar engine's state systems (value ids from its value table) on a committed trace."""
    from tc_analyses.export.tracecompass import write_output

    trace = DATA / "traces" / "succeed" / "all-classes"
    written = write_output(tmp_path / "analyses", None)
    xml = sorted(p for k, p in written.items() if k.startswith("xml/"))
    built = build(trace, xml)
    out = tmp_path / "states.csv"
    count = write_states_csv(built, "*", out)
    expected = _row_by_row(built)
    assert count > 100 and out.read_bytes() == expected
