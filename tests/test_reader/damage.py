"""Ways to damage a good dfcompass trace, each with the error the reader must give.

A case changes a trace in place and returns what `dfcompass info` must say: the file it names,
the byte offset (None when the message has none) and a phrase of the problem.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from tests.helpers import packets_of, parse_string_defs

NODES = 100  # node_begin: packets of 30, 30, 30, 10 records at packet_size=1024
PACKET_SIZE = 1024


@dataclass(frozen=True)
class Expected:
    file: Path
    offset: int | None
    phrase: str


def stream(trace: Path, prefix: str) -> Path:
    (found,) = [p for p in trace.iterdir() if p.name.startswith(prefix + "-")]
    return found


def _patch(path: Path, offset: int, fmt: str, value: int) -> None:
    data = bytearray(path.read_bytes())
    struct.pack_into(fmt, data, offset, value)
    path.write_bytes(bytes(data))


def truncated_mid_packet(trace: Path) -> Expected:
    f = stream(trace, "node_begin")
    last = packets_of(f)[-1]
    os.truncate(f, last.offset + last.packet_size // 2)
    return Expected(f, last.offset, "truncated packet")


def truncated_in_header(trace: Path) -> Expected:
    f = stream(trace, "node_begin")
    last = packets_of(f)[-1]
    os.truncate(f, last.offset + 20)
    return Expected(f, last.offset, "truncated packet: 20 bytes left")


def bad_magic(trace: Path) -> Expected:
    f = stream(trace, "node_begin")
    second = packets_of(f)[1]
    _patch(f, second.offset, "<I", 0xDEADBEEF)
    return Expected(f, second.offset, "bad packet magic 0xDEADBEEF")


def packet_size_beyond_file(trace: Path) -> Expected:
    f = stream(trace, "node_begin")
    second = packets_of(f)[1]
    _patch(f, second.offset + 48, "<Q", (f.stat().st_size - second.offset + 64) * 8)
    return Expected(f, second.offset, "truncated packet: packet_size is")


def packet_size_not_whole_bytes(trace: Path) -> Expected:
    f = stream(trace, "node_end")
    first = packets_of(f)[0]
    _patch(f, first.offset + 48, "<Q", first.packet_size * 8 + 4)
    return Expected(f, first.offset, "bad packet sizes")


def content_larger_than_packet(trace: Path) -> Expected:
    f = stream(trace, "node_end")
    second = packets_of(f)[1]
    _patch(f, second.offset + 40, "<Q", second.packet_size * 8 + 64)
    return Expected(f, second.offset, "bad packet sizes")


def uuid_mismatch(trace: Path) -> Expected:
    f = stream(trace, "node_begin")
    last = packets_of(f)[-1]
    _patch(f, last.offset + 4, "<Q", 0x0123456789ABCDEF)
    return Expected(f, last.offset + 4, "packet uuid differs")


def partial_record(trace: Path) -> Expected:
    f = stream(trace, "node_begin")
    last = packets_of(f)[-1]
    size = last.packet_size - 5
    os.truncate(f, last.offset + size)
    _patch(f, last.offset + 40, "<Q", size * 8)
    _patch(f, last.offset + 48, "<Q", size * 8)
    return Expected(f, last.offset, "not a whole number of dfc:node_begin records")


def foreign_event_id(trace: Path) -> Expected:
    f = stream(trace, "node_begin")
    third = packets_of(f)[2]
    _patch(f, third.body_start + 32 * 4, "<H", 7)
    return Expected(f, third.body_start, "event id 7 in a stream of dfc:node_begin events")


def event_outside_packet_time(trace: Path) -> Expected:
    f = stream(trace, "node_end")
    first = packets_of(f)[0]
    _patch(f, first.offset + 32, "<Q", first.ts_begin)  # timestamp_end before the packet's last event
    return Expected(f, first.offset, "outside the packet's time range")


def string_without_nul(trace: Path) -> Expected:
    f = stream(trace, "string_def")
    last = packets_of(f)[-1]
    body = f.read_bytes()[last.body_start : last.body_start + last.body_len]
    records = parse_string_defs(body)
    last_record_start = len(body) - (14 + len(records[-1][3]) + 1)
    size = last.packet_size - 1
    os.truncate(f, last.offset + size)  # drop the final NUL
    _patch(f, last.offset + 40, "<Q", size * 8)
    _patch(f, last.offset + 48, "<Q", size * 8)
    return Expected(f, last.body_start + last_record_start, "no terminating NUL")


def missing_metadata(trace: Path) -> Expected:
    (trace / "metadata").unlink()
    return Expected(trace / "metadata", None, "missing metadata file")


def metadata_not_ctf(trace: Path) -> Expected:
    meta = trace / "metadata"
    meta.write_text(meta.read_text().replace("/* CTF 1.8 */", "/* not a trace */", 1))
    return Expected(meta, 0, "does not start with '/* CTF 1.8 */'")


def not_a_directory(trace: Path) -> Expected:
    for p in trace.iterdir():
        p.unlink()
    trace.rmdir()
    trace.write_text("a file, not a trace")
    return Expected(trace, None, "not a directory")


CASES: dict[str, Callable[[Path], Expected]] = {
    f.__name__: f
    for f in (
        truncated_mid_packet, truncated_in_header, bad_magic, packet_size_beyond_file, packet_size_not_whole_bytes,
        content_larger_than_packet, uuid_mismatch, partial_record, foreign_event_id, event_outside_packet_time,
        string_without_nul, missing_metadata, metadata_not_ctf, not_a_directory,
    )
}
