"""Plain-text tables for the text reports."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any, Iterable, Sequence


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], indent: str = "") -> list[str]:
    """Lines of a table with a dashed rule under the headers; integer columns right-aligned.

    >>> table(("op", "n"), [("add", 3), ("mm", 12)])
    ['op    n', '---  --', 'add   3', 'mm   12']
    """
    widths = [max(len(str(x)) for x in column) for column in zip(headers, *rows)]
    numeric = [all(isinstance(r[i], int) for r in rows) for i in range(len(headers))]

    def line(values: Sequence[Any]) -> str:
        cells = [str(v).rjust(w) if num else str(v).ljust(w) for v, w, num in zip(values, widths, numeric)]
        return indent + "  ".join(cells).rstrip()

    return [line(headers), line(tuple("-" * w for w in widths))] + [line(r) for r in rows]


def write_csv(folder: Path, name: str, headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> Path:
    """Write `rows` under `headers` to ``folder/name`` (the folder made if needed); its path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(headers)
        writer.writerows(rows)
    return path
