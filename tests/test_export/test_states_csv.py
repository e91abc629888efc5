"""`states --csv` is written from the state systems' columns; its bytes must be those the csv module
writes row by row, odd names and values included (the reference below is that row-by-row writer),
but for one thing the csv module cannot do: a null value is an empty field and an empty string is
written quoted, ``""``, so that the two stay apart as they do in Trace Compass."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
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
        # an empty string marked (the csv module writes it as it writes null), then quoted below
        writer.writerow([row.analysis, row.path, row.start, row.end,
                         "" if row.value is None else row.value or _EMPTY])
    return out.getvalue().replace(_EMPTY, '""').encode()


_EMPTY = "\ue000empty\ue000"  # a private-use mark no ODD value holds


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


def test_null_and_an_empty_string_stay_apart(tmp_path: Path) -> None:
    """Null is an empty field, an empty string is ``""``: read back as Python 3.12's QUOTE_NOTNULL
    reader (or PostgreSQL's CSV) reads them, and the Parquet twin holds null and ""."""
    from tc_analyses.app.build import write_states_csv as write_rows
    from tc_analyses.export.states_csv import write_states_parquet

    ss = StateSystem(0)
    for t, value in ((10, "a"), (20, ""), (30, None), (40, "")):
        ss.modify(("x",), None if value is None else Value("string", value), t)
    ss.close(50)
    built = SimpleNamespace(systems={"id": ss})
    out = tmp_path / "states.csv"
    write_states_csv(built, "*", out)  # type: ignore[arg-type]
    lines = out.read_bytes().split(b"\r\n")
    assert lines[1:6] == [b"id,x,0,9,", b"id,x,10,19,a", b'id,x,20,29,""', b"id,x,30,39,", b'id,x,40,50,""']
    one_time = tmp_path / "at.csv"  # `states --at T --csv`: the same fields
    write_rows(iter_rows(built), one_time)  # type: ignore[arg-type]
    assert one_time.read_bytes() == out.read_bytes()
    parquet = tmp_path / "states.parquet"
    write_states_parquet(built, "*", parquet)  # type: ignore[arg-type]
    assert [row[4] for row in _parquet_rows(parquet)] == [None, "a", "", None, ""]


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

    monkeypatch.setattr(states_csv, "_GROUP", 50)
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


def _columnar_odd_system() -> StateSystem:
    """A state system the columnar engine built (held as one block): an attribute per odd name and
    per id, odd strings and numbers as values."""
    from lxml import etree

    from tc_analyses.engine.columnar import run_columnar
    from tc_analyses.engine.events import rows_of
    from tc_analyses.engine.xml_provider import StateProvider

    xml = """<tmfxml><stateProvider id="odd" version="1"><eventHandler eventName="e"><stateChange>
<stateAttribute type="constant" value="T"/><stateAttribute type="eventField" value="name"/>
<stateAttribute type="eventField" value="id"/><stateValue type="eventField" value="v"/></stateChange>
</eventHandler></stateProvider></tmfxml>"""
    provider = StateProvider(etree.fromstring(xml).find("stateProvider"))
    events = [("e", t, {"name": ODD[t % len(ODD)], "id": t % 5 + 5 * (t % 3 == 0), "v": ODD[t % 7] if t % 3 else t})
              for t in range(1, 400)]
    return run_columnar(provider, rows_of(events), (1, 405))


@pytest.mark.parametrize("glob", ["*", "T/a,b/*", "T/[[]*", "nothing/*"])
def test_a_block_of_attributes_written_in_groups(tmp_path: Path, glob: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Attributes the columnar engine holds as one block are written many at a time: groups of
    attributes cut anywhere (a tiny group size here) give the row-by-row bytes."""
    from tc_analyses.export import states_csv

    built = SimpleNamespace(systems={"odd,\"x\"": _columnar_odd_system()})
    assert built.systems["odd,\"x\""].block_counts(built.systems["odd,\"x\""].paths()) is not None
    for size, joined in ((7, 7), (50, 7), (1 << 20, 1 << 18)):  # slices of a group joined on threads, in order
        monkeypatch.setattr(states_csv, "_GROUP", size)
        monkeypatch.setattr(states_csv, "_SLICE", joined)
        out = tmp_path / f"{size}.csv"
        count = write_states_csv(built, glob, out)  # type: ignore[arg-type]
        assert out.read_bytes() == _row_by_row(built, glob)
        assert (count > 100) == (glob == "*")
        parquet = tmp_path / f"{size}.parquet"
        assert states_csv.write_states_parquet(built, glob, parquet) == count  # type: ignore[arg-type]
        assert _parquet_rows(parquet) == _expected_rows(built, glob)


def test_a_point_query_gives_the_interval_query_range_gives() -> None:
    """`states --at T` finds each attribute's interval with arrays: the rows of a per-attribute
    query_range, for times before, inside, on the edges of and after the intervals."""
    from tc_analyses.analyses.states import rows

    for ss in (_odd_system(), _columnar_odd_system()):
        built = SimpleNamespace(systems={"a": ss, "b": ss})
        for at in (-1, 0, 1, 10, 11, 55, 399, 405, 1235, 10**6):
            expected = [(name, "/".join(p), i.start, i.end, None if i.value is None else str(i.value))
                        for name in ("a", "b") for p in ss.paths() for i in ss.query_range(p, at, at)]
            got = [(r.analysis, r.path, r.start, r.end, r.value) for r in rows(built, "*", at)]  # type: ignore[arg-type]
            assert got == expected, at


def test_shared_digits_rebuild_every_time() -> None:
    """digits + str(t - base) is str(t) for every time: absolute ns, small, across a power of ten,
    one time, zeros, negatives (no shared digits then)."""
    import random

    from tc_analyses.export.states_csv import _shared_digits

    rng = random.Random(5)
    shared = 0
    for _ in range(400):
        low = rng.choice([0, 1, 9, 10, 99_999, 10**9, 1_795_787_064_993_454_937, 2**63 - 10**6, -50])
        span = rng.choice([0, 1, 9, 10, 1_000, 10**9, 10**12])
        times = np.array(sorted(min(low + rng.randint(0, span), 2**63 - 1) for _ in range(rng.randint(1, 30))),
                         dtype=np.int64)
        starts, ends = times[:-1] if len(times) > 1 else times, times[1:] if len(times) > 1 else times
        digits, base = _shared_digits(starts, ends)
        shared += bool(digits)
        for t in times.tolist():
            assert digits + str(t - base) == str(t), (t, digits, base)
    assert shared > 100
