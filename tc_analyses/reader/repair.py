"""Cut the stream files of a damaged dfcompass trace back to their last good packet.

Trace Compass refuses a whole trace when one packet is truncated, so a trace damaged after the
fact (a full disk, a copy cut short) is made readable again by dropping the bad tail of each
stream. The writer appends each packet in one write, but Linux ends a write at a page boundary
when a fatal signal arrives: a process killed (SIGKILL, the OOM killer) while it appends a
packet leaves that packet's first pages, which ``dfcompass record`` cuts once the process is gone.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from tc_analyses.errors import TraceError
from tc_analyses.reader.fast import stream_files, walk_packets
from tc_analyses.reader.streams import map_file
from tc_analyses.reader.metadata import read_dfcompass_metadata


@dataclass(frozen=True)
class StreamRepair:
    path: str
    kept_bytes: int
    dropped_bytes: int
    problem: str


def repair_trace(path: str | os.PathLike[str], *, dry_run: bool = False) -> list[StreamRepair]:
    """Truncate each damaged stream file at its first bad packet; return what was (or would be) cut."""
    return repair_and_count(path, dry_run=dry_run)[0]


def repair_and_count(path: str | os.PathLike[str], *, dry_run: bool = False) -> tuple[list[StreamRepair], int]:
    """:func:`repair_trace`, and the events the trace's writer counted as discarded (each stream's
    last whole packet's cumulative events_discarded), from one walk of the packet headers."""
    trace_dir = Path(path)
    _, uuid_bytes = read_dfcompass_metadata(trace_dir)
    repairs, discarded = [], 0
    for file in stream_files(trace_dir):
        whole = _whole_packets(file, uuid_bytes)
        discarded += whole.discarded
        if whole.problem is not None:
            repairs.append(StreamRepair(str(file), whole.kept, whole.size - whole.kept, whole.problem))
            if not dry_run:
                os.truncate(file, whole.kept)
    return repairs, discarded


@dataclass(frozen=True)
class _Whole:
    kept: int  # the end of the last whole, well-formed packet
    size: int
    problem: str | None
    discarded: int  # that packet's events_discarded


def _whole_packets(file: Path, uuid_bytes: bytes | None) -> _Whole:
    data = map_file(file)  # mapped: only the packet headers' pages are read in
    keep = discarded = 0
    try:
        for packet in walk_packets(file, data, uuid_bytes):
            keep, discarded = packet.offset + packet.packet_size, packet.discarded
    except TraceError as exc:
        return _Whole(keep, len(data), exc.problem, discarded)
    finally:
        data.release()  # before a caller truncates the file under the mapping
    return _Whole(keep, keep, None, discarded)
