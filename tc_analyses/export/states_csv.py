"""``states --csv`` and ``--parquet``: a state system's intervals written from its columns.

The bytes are those Python's ``csv`` module writes for one row per interval (``analysis,path,start,
end,value``, ``\\r\\n`` line ends, fields quoted only when they hold a comma, a quote or a line
break), except that a null value is an empty field and an empty string a quoted one (``""``), the
convention of PostgreSQL's CSV and of Python 3.12's ``QUOTE_NOTNULL`` reader, so that the two stay
apart (Trace Compass keeps them apart). No object is made per interval: the analysis and the path are rendered once per
attribute, each distinct value once, and pyarrow joins the columns. Writing the rows one by one cost
3-4x the engine's own time on 6 M intervals.
"""

from __future__ import annotations

import csv
import io
import os
import re
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

import numpy as np

from tc_analyses.analyses.states import iter_column_groups
from tc_analyses.engine.grouping import unique_inverse
from tc_analyses.engine.run import BuiltAnalyses

HEADER = ("analysis", "path", "start", "end", "value")
_QUOTED = re.compile('[,"\r\n]')


def csv_field(text: str) -> str:
    """`text` as the csv module writes it in a row of several fields (quoted only when needed)."""
    if not _QUOTED.search(text):  # what QUOTE_MINIMAL quotes: the delimiter, the quote, a line end
        return text
    out = io.StringIO()
    csv.writer(out).writerow([text, ""])  # two fields: a lone empty field would be written as ""
    return out.getvalue()[: -len(",\r\n")]


def value_field(value: object) -> str:
    """A state value's CSV field: empty for null, ``""`` for an empty string, else as csv_field."""
    if value is None:
        return ""
    text = str(value)
    return csv_field(text) if text else '""'


def _value_texts(ids: np.ndarray[Any, Any], item: Callable[[int], Any]) -> tuple[list[str], np.ndarray[Any, Any]]:
    """Each distinct value id's CSV field and line end, and each interval's index into them."""
    distinct, where = unique_inverse(ids)
    texts = []
    for value_id in distinct.tolist():
        value = item(value_id)
        texts.append(value_field(value) + "\r\n")
    return texts, where


def write_states_csv(built: BuiltAnalyses, path_glob: str, csv_out: Path) -> int:
    """Every interval of the attributes matching `path_glob` into `csv_out`; how many were written.

    Slices of rows are joined on a few threads (pyarrow's kernels let go of the GIL) and written
    in order as they are done; at most a few slices' text is held at once."""
    count = 0
    workers = max(1, min(4, os.cpu_count() or 1))
    with open(csv_out, "wb") as out, ThreadPoolExecutor(max_workers=workers) as pool:
        out.write((",".join(HEADER) + "\r\n").encode())
        pending: deque[Future[memoryview]] = deque()
        for analysis, paths, which, starts, ends, ids, item in iter_column_groups(built, path_glob, _GROUP):
            name = csv_field(analysis)
            prefixes = [f"{name},{csv_field(path)}" for path in paths]
            for first in range(0, len(starts), _SLICE):
                part = slice(first, first + _SLICE)
                texts, where = _value_texts(ids[part], item)  # Python objects: on this thread
                pending.append(pool.submit(_lines, prefixes, which[part], starts[part], ends[part], texts, where))
                while len(pending) > workers:
                    out.write(pending.popleft().result())
            count += len(starts)
        while pending:
            out.write(pending.popleft().result())
    return count


_GROUP = 1 << 20  # rows gathered from the state systems at once
_SLICE = 1 << 18  # rows joined at once (a string array's 32-bit offsets hold up to 2 GiB)


def _lines(prefixes: list[str], which: np.ndarray[Any, Any], starts: np.ndarray[Any, Any],
           ends: np.ndarray[Any, Any], texts: list[str], where: np.ndarray[Any, Any]) -> memoryview:
    """The CSV lines of some attributes' intervals, joined by pyarrow; the last field carries the
    line end, so the joined strings' data is the file's bytes."""
    import pyarrow as pa
    import pyarrow.compute as pc

    digits, base = _shared_digits(starts, ends)
    values = pa.array(["," + text for text in texts], pa.string()).take(pa.array(where))
    heads = pa.array([f"{prefix},{digits}" for prefix in prefixes], pa.string()).take(pa.array(which))
    lines = pc.binary_join_element_wise(heads, pa.array(starts - base).cast(pa.string()), pa.scalar(f",{digits}"),
                                        pa.array(ends - base).cast(pa.string()), values, "")
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int32)[lines.offset:lines.offset + len(lines) + 1]
    return memoryview(lines.buffers()[2])[int(offsets[0]):int(offsets[-1])]


def _shared_digits(starts: np.ndarray[Any, Any], ends: np.ndarray[Any, Any]) -> tuple[str, int]:
    """(digits, base): the leading decimal digits every time here shares, and the number they stand
    for, such that ``str(t) == digits + str(t - base)`` for each time t. Pyarrow's integer-to-text
    cast takes three times as long on 19-digit times (ns since 1970) as on the 11 that differ."""
    if not len(starts):
        return "", 0
    low, high = min(int(starts.min()), int(ends.min())), max(int(starts.max()), int(ends.max()))
    if low < 0:
        return "", 0
    for k in range(19):  # t // 10**k is one number Q whose last digit is not 0: t - base has k + 1 digits
        shared = low // 10 ** k
        if shared == high // 10 ** k and shared % 10:
            return (str(shared // 10) if shared >= 10 else ""), shared // 10 * 10 ** (k + 1)
    return "", 0


def write_states_parquet(built: BuiltAnalyses, path_glob: str, parquet_out: Path) -> int:
    """The rows of :func:`write_states_csv` as a Parquet file (analysis, path: dictionary-encoded
    strings; start, end: int64 ns; value: the CSV's text, null for null); how many were written.
    Written from the columns, a row group per million rows or so."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([("analysis", pa.dictionary(pa.int32(), pa.string())),
                        ("path", pa.dictionary(pa.int32(), pa.string())),
                        ("start", pa.int64()), ("end", pa.int64()), ("value", pa.string())])
    count, pending, held = 0, [], 0
    with pq.ParquetWriter(parquet_out, schema) as writer:
        for analysis, paths, which, starts, ends, ids, item in iter_column_groups(built, path_glob, _GROUP):
            distinct, where = unique_inverse(ids)
            texts = [None if (value := item(v)) is None else str(value) for v in distinct.tolist()]
            n = len(starts)
            pending.append(pa.table([
                pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), pa.array([analysis], pa.string())),
                pa.DictionaryArray.from_arrays(pa.array(which.astype(np.int32)), pa.array(paths, pa.string())),
                pa.array(starts, pa.int64()), pa.array(ends, pa.int64()),
                pa.array(texts, pa.string()).take(pa.array(where.reshape(-1)))], schema=schema))
            count, held = count + n, held + n
            if held >= _GROUP:
                writer.write_table(pa.concat_tables(pending).unify_dictionaries().combine_chunks())
                pending, held = [], 0
        if pending:
            writer.write_table(pa.concat_tables(pending).unify_dictionaries().combine_chunks())
    return count
