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


def _parquet_rows(path: Path) -> list[tuple[Any, ...]]:
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    return list(zip(*(table.column(name).to_pylist() for name in HEADER)))


def _expected_rows(built: Any, glob: str = "*") -> list[tuple[Any, ...]]:
    return [(r.analysis, r.path, r.start, r.end, None if r.value is None else str(r.value))
            for r in iter_rows(built, glob)]


@pytest.mark.parametrize("glob", ["*", "Threads/a,b/*", "nothing/*"])
def test_parquet_holds_the_rows_of_the_csv(tmp_path: Path, glob: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Odd names and values, nulls kept as nulls; several row groups (a small group size here)."""
    from tc_analyses.export import states_csv

    monkeypatch.setattr(states_csv, "_SLICE", 50)
    built = SimpleNamespace(systems={"an,odd \"id\"": _odd_system(), "plain.id": _odd_system()})
    out = tmp_path / "states.parquet"
    count = states_csv.write_states_parquet(built, glob, out)  # type: ignore[arg-type]
    expected = _expected_rows(built, glob)
    assert count == len(expected) and _parquet_rows(out) == expected
    if glob == "*":
        import pyarrow.parquet as pq

        assert pq.ParquetFile(out).num_row_groups > 1


def test_states_parquet_from_the_cli(cli: Any, tmp_path: Path) -> None:
    from tc_analyses.export.tracecompass import write_output

    trace = DATA / "traces" / "succeed" / "all-classes"
    xml = sorted(p for k, p in write_output(tmp_path / "analyses", None).items() if k.startswith("xml/"))
    out = tmp_path / "s.parquet"
    args = ["states", str(trace), *[a for p in xml for a in ("--xml", str(p))]]
    result = cli(*args, "--parquet", str(out))
    assert result.exit_code == 0, result.stderr
    rows = _parquet_rows(out)
    assert f"wrote {len(rows)} intervals" in result.stdout and len(rows) > 100
    assert rows == _expected_rows(build(trace, xml))
    refused = cli(*args, "--parquet", str(out), "--at", "5")
    assert refused.exit_code == 2 and "--parquet" in refused.stderr
