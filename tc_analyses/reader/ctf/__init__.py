"""Our own reader of CTF traces from any tracer (LTTng kernel and user space, barectf...), CTF 1.8
(TSDL metadata) and CTF 2 (JSON fragments) alike: read here, so libbabeltrace2 never runs in our
process, and free of babeltrace2 2.0.4's bugs (an empty string field read as the previous event's
value) and of its CTF 1.8-only metadata. See :func:`iter_ctf`."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

from tc_analyses.errors import TraceError
from tc_analyses.reader.ctf.classes import TraceClass, Unsupported
from tc_analyses.reader.ctf.reading import merged, read_trace_records
from tc_analyses.reader.ctf.tsdl import parse_tsdl
from tc_analyses.reader.records import Discarded, Event

__all__ = ["Unsupported", "check_supported", "iter_ctf", "parse_trace"]


def parse_trace(trace_dir: Path) -> TraceClass:
    """The declarations of `trace_dir`'s metadata; TraceError on a syntax error, Unsupported on
    what this reader does not take."""
    from tc_analyses.reader.metadata import read_metadata

    meta = read_metadata(trace_dir)
    try:
        if meta.ctf_version == "2":
            from tc_analyses.reader.ctf.json_metadata import parse_json_metadata
            from tc_analyses.reader.metadata import json_fragments

            return parse_json_metadata(json_fragments(meta.path, meta.text.encode("utf-8")))[0]
        return parse_tsdl(meta.text)[0]
    except _METADATA_DAMAGE as exc:  # KeyError: an integer without its size
        raise TraceError(meta.path, f"metadata: {type(exc).__name__ + ': ' if not isinstance(exc, ValueError) else ''}"
                         f"{exc}") from None


# what damaged metadata can make the parser or the compiler raise, each a one-line TraceError
_METADATA_DAMAGE = (ValueError, KeyError, TypeError, AttributeError, IndexError, RecursionError, ZeroDivisionError)


def _compiled(trace_dir: Path) -> Any:
    from tc_analyses.reader.ctf.reading import compile_trace

    trace = parse_trace(trace_dir)
    try:
        return compile_trace(trace)
    except _METADATA_DAMAGE as exc:
        raise TraceError(trace_dir / "metadata", f"metadata: {type(exc).__name__}: {exc}") from None


def check_supported(path: str) -> None:
    """Raise :class:`Unsupported` when a trace at or below `path` has metadata this reader does
    not take (parsed and compiled, no stream read); a damaged one is a TraceError."""
    from tc_analyses.reader.metadata import find_traces

    for trace_dir in find_traces(path):
        _compiled(trace_dir)


def iter_ctf(path: str, with_fields: bool = True) -> Iterator[Event | Discarded]:
    """Every event and discarded-events record of the CTF traces at or below `path`, in Trace
    Compass's order (by time; equal times by stream file); the records babeltrace2's reader gives.
    Raises :class:`Unsupported` before the first record when a trace uses what this reader does
    not take (the caller reads it with babeltrace2), TraceError naming the file when it is damaged."""
    from tc_analyses.reader.metadata import find_traces

    streams = []
    for trace_dir in find_traces(path):
        streams += read_trace_records(trace_dir, _compiled(trace_dir), with_fields)
    return merged(streams)
