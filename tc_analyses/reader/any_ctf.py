"""Any CTF trace's records: our own CTF 1.8 reader (:mod:`tc_analyses.reader.ctf`) where it takes
the trace's metadata, else babeltrace2 in a child process (:mod:`tc_analyses.reader.bt2_source`),
so that libbabeltrace2 never runs in our process and an abort there is a one-line error."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator, Literal

from tc_analyses.errors import TraceError
from tc_analyses.reader.records import Discarded, Event

Reader = Literal["auto", "ctf", "bt2"]


def reader_for(path: str | os.PathLike[str]) -> Literal["ctf", "bt2"]:
    """``ctf`` when our reader takes the metadata of every trace at or below `path`, else ``bt2``."""
    from tc_analyses.reader.ctf import Unsupported, check_supported

    try:
        check_supported(os.fspath(path))
    except Unsupported:
        return "bt2"
    return "ctf"


def iter_any_ctf(path: str | os.PathLike[str], *, with_fields: bool = True,
                 reader: Reader = "auto") -> Iterator[Event | Discarded]:
    """Every event and discarded-events record of the CTF traces at or below `path`, by time.

    ``ctf``: our reader (a trace it does not take is a TraceError); ``bt2``: babeltrace2;
    ``auto``: :func:`reader_for`. Our reader orders equal times by stream file, as Trace Compass
    does; babeltrace2 by its own rule."""
    from tc_analyses.reader import bt2_source
    from tc_analyses.reader.ctf import Unsupported, iter_ctf
    from tc_analyses.reader.metadata import find_traces, not_a_directory

    path = os.fspath(path)
    if reader != "bt2":
        if not os.path.isdir(path):
            raise TraceError(path, not_a_directory(Path(path)))
        if not find_traces(path):
            raise TraceError(path, "no CTF trace here (no 'metadata' file in it or below it)")
        reader = reader_for(path) if reader == "auto" else reader
    if reader == "bt2":
        yield from bt2_source.iter_trace(path, with_fields=with_fields)
        return
    try:
        yield from iter_ctf(path, with_fields)
    except Unsupported as exc:
        raise TraceError(path, f"our CTF reader does not read {exc} (--reader bt2 reads it with babeltrace2)") from None
