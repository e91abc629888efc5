"""Low-level CTF 1.8 writing: the trace directory, its stream files and their packets.

Each stream file holds the events of one event class from one source (a thread, a GPU
queue...), so every packet body is an array of fixed-size records. Packets are written whole,
each with a single ``os.write``: a process killed at any moment leaves only complete packets.
This module knows nothing of sessions or threads; :mod:`tracer.session` drives it.
"""

from __future__ import annotations

import os
import re
import struct
import sys
import threading
import uuid as uuid_mod
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Sequence

from tracer import schema
from tracer.ctf2_metadata import render_json_metadata
from tracer.strings import escape
from tracer.tsdl import (
    CTF_MAGIC,
    PACKET_CONTEXT,
    PACKET_HEADER,
    PACKET_PREAMBLE_SIZE,
    STREAM_ID,
    TraceMeta,
    render_metadata,
)

DEFAULT_PACKET_SIZE = 64 * 1024
CTF_VERSION_ENV = "DFCOMPASS_CTF"  # the CTF version a recorded program's processes write
CTF_VERSIONS = ("1.8", "2")
_SAFE_KEY = re.compile(r"[^A-Za-z0-9_.-]")


class TraceExistsError(FileExistsError):
    """The output directory already holds a trace."""


def stream_file_name(cls: schema.EventClass, key: str) -> str:
    return f"{cls.short}-{_SAFE_KEY.sub('_', key)}"


def records_per_packet(cls: schema.EventClass, packet_size: int) -> int:
    """How many records of a fixed-size class fit in one packet of `packet_size` bytes."""
    return max(1, (packet_size - PACKET_PREAMBLE_SIZE) // cls.record_size)


@lru_cache(maxsize=256)
def _packer(fmt: str, count: int) -> struct.Struct:
    return struct.Struct("<" + fmt * count)


def pack_fixed(cls: schema.EventClass, flat: Sequence[int], count: int) -> bytes:
    """Pack `count` records given as one flat sequence (id, timestamp, fields..., id, ...)."""
    return _packer(cls.struct_format, count).pack(*flat)


_STRING_HEAD = struct.Struct("<HQI")


def pack_string_defs(flat: Sequence[object]) -> bytes:
    """Pack dfc:string_def records given flat as (id, timestamp, sid, value, ...); values escaped."""
    out = bytearray()
    for i in range(0, len(flat), 4):
        out += _STRING_HEAD.pack(flat[i], flat[i + 1], flat[i + 2])
        out += escape(str(flat[i + 3])).encode("ascii") + b"\0"
    return bytes(out)


class StreamFile:
    """One stream file: appends whole packets and keeps them ordered and non-overlapping."""

    def __init__(self, trace: "TraceDirectory", cls: schema.EventClass, key: str) -> None:
        self.trace = trace
        self.cls = cls
        self.key = key
        self.path = trace.path / stream_file_name(cls, key)
        self.events_written = 0
        self.events_discarded = 0  # cumulative, as CTF's packet context wants it
        self.reported_discarded = 0  # the count carried by the last packet written
        self.packets_written = 0
        self.last_end = 0
        # the size of the last packet written whole, which ends the file (a failed write's bytes are
        # cut again); None: none, or the file's end is not known
        self.last_packet_size: int | None = None
        self._fd: int | None = None
        self._lock = threading.Lock()  # only the flush path takes it, never the record path

    def discard(self, count: int) -> None:
        """Count `count` events as lost; they show in the next packet's events_discarded."""
        with self._lock:
            needs_baseline = self.packets_written == 0 and self.events_discarded == 0
        if needs_baseline:
            # babeltrace2 reports a loss as a difference between two packets: give it a first
            # packet that says 0, dated at the trace origin so it precedes any pending packet.
            self.write_packet(b"", 0, self.trace.origin_ts, self.trace.origin_ts)
        with self._lock:
            self.events_discarded += count

    def write_packet(self, body: bytes, count: int, ts_begin: int, ts_end: int) -> bool:
        """Append one packet holding `count` records; False (and counted as lost) if the write failed."""
        with self._lock:
            # Packets of one stream must not overlap: clamp an empty packet's range to the last end.
            ts_begin = max(ts_begin, self.last_end) if count == 0 else ts_begin
            ts_end = max(ts_end, ts_begin)
            size_bits = (PACKET_PREAMBLE_SIZE + len(body)) * 8
            preamble = PACKET_HEADER.pack(CTF_MAGIC, self.trace.uuid_bytes, STREAM_ID) + PACKET_CONTEXT.pack(
                ts_begin, ts_end, size_bits, size_bits, self.events_discarded
            )
            written = 0  # what a write that failed half way left (cut again below)
            try:
                if self._fd is None:
                    self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                data = preamble + body
                written = os.write(self._fd, data)
                if written != len(data):
                    raise OSError(f"short write ({written} of {len(data)} bytes: the disk is full, or the file "
                                  "past its size limit)")
            except OSError as exc:
                self.events_discarded += count
                cut = self._cut_partial_packet(written)
                self.trace.report_error(f"{self.path}: {exc}; {count} events counted as discarded{cut}")
                return False
            self.events_written += count
            self.packets_written += 1
            self.reported_discarded = self.events_discarded
            self.last_end = ts_end
            self.last_packet_size = len(data)  # where it is, only a full disk asks (no fstat per packet)
            return True

    def _cut_partial_packet(self, written: int) -> str:
        """Drop the `written` bytes a failed write left of its packet at the end of the file (a full
        disk writes part of it): the file stays whole packets, readable without `dfcompass repair`.
        Shrinking needs no free space."""
        if written <= 0 or self._fd is None:
            return ""
        try:
            os.ftruncate(self._fd, os.fstat(self._fd).st_size - written)
        except OSError as exc:
            self.last_packet_size = None  # the file's end is not known now: never patch it in place
            return f"; its partial packet could not be cut ({exc}): run dfcompass repair"
        return ""

    def report_discarded(self) -> None:
        """Make the events counted as discarded since the last packet show in the trace: in an empty
        packet, or, where that cannot be written (a full disk), in the last packet's own
        events_discarded, overwritten in place (no new space needed), so that readers see the whole
        count (as lost before that packet) rather than none of it."""
        if self.events_discarded == self.reported_discarded:
            return
        if self.write_packet(b"", 0, self.last_end, self.last_end):
            return
        with self._lock:
            lost = self.events_discarded - self.reported_discarded
            if self.last_packet_size is None or self._fd is None:
                self.trace.report_error(f"{self.path}: {lost} discarded events are not in the trace (no packet "
                                        "of it was written whole)")
                return
            try:
                at = (os.fstat(self._fd).st_size - self.last_packet_size + PACKET_HEADER.size + PACKET_CONTEXT.size
                      - 8)  # events_discarded: the context's last field
                fd = os.open(self.path, os.O_WRONLY)  # not O_APPEND: pwrite there would append
                try:
                    os.pwrite(fd, struct.pack("<Q", self.events_discarded), at)
                finally:
                    os.close(fd)
            except OSError as exc:
                self.trace.report_error(f"{self.path}: {exc}; {self.events_discarded - self.reported_discarded} "
                                        "discarded events are not in the trace")
                return
            self.reported_discarded = self.events_discarded

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


class TraceDirectory:
    """A CTF trace directory: metadata first, then stream files created on demand."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        clock_offset_ns: int,
        trace_uuid: uuid_mod.UUID | None = None,
        hostname: str = "",
        env: dict[str, str | int] | None = None,
        packet_size: int = DEFAULT_PACKET_SIZE,
        overwrite: bool = False,
        absolute_clock: bool = True,
        ctf_version: str | None = None,
    ) -> None:
        """`ctf_version`: "1.8" (TSDL metadata) or "2" (JSON fragments; the streams are the same
        bytes); None: $DFCOMPASS_CTF, else 1.8, which every Trace Compass release in use reads."""
        self.path = Path(path)
        self.ctf_version = ctf_version or os.environ.get(CTF_VERSION_ENV) or "1.8"
        if self.ctf_version not in CTF_VERSIONS:
            raise ValueError(f"CTF version {self.ctf_version!r}: dfcompass writes {' or '.join(CTF_VERSIONS)}")
        self.uuid = trace_uuid or uuid_mod.uuid4()
        self.uuid_bytes = self.uuid.bytes
        self.packet_size = packet_size
        self.streams: dict[tuple[int, str], StreamFile] = {}
        self._streams_lock = threading.Lock()
        self.errors: list[str] = []
        self.origin_ts = 0  # no event of the trace is earlier (the live session sets its start time)
        self.path.mkdir(parents=True, exist_ok=True)
        metadata = self.path / "metadata"
        if metadata.exists() and not overwrite:
            raise TraceExistsError(f"{self.path}: already holds a trace (metadata exists)")
        if overwrite:
            for old in self.path.iterdir():
                if old.is_file():
                    old.unlink()
        self._meta = TraceMeta(self.uuid, clock_offset_ns, hostname=hostname, env=dict(env or {}),
                               absolute=absolute_clock)
        self._write_metadata()

    def _write_metadata(self) -> None:
        # Metadata goes first and whole: written to a temp name, then renamed into place, so a
        # reader sees the old text or the new one, never a mix.
        tmp = self.path / ".metadata.tmp"
        try:
            if self.ctf_version == "2":
                tmp.write_text(render_json_metadata(self._meta), encoding="utf-8")
            else:
                tmp.write_text(render_metadata(self._meta), encoding="ascii")
        except OSError:
            tmp.unlink(missing_ok=True)  # a full disk: the old metadata stays, not a partial copy beside it
            raise
        os.replace(tmp, self.path / "metadata")

    def update_env(self, **values: str | int) -> None:
        """Add environment entries learnt while recording (a process's role in its job)."""
        self._meta.env.update(values)
        self._write_metadata()

    def stream(self, cls: schema.EventClass, key: str) -> StreamFile:
        stream_key = (cls.id, key)
        found = self.streams.get(stream_key)
        if found is None:
            with self._streams_lock:
                found = self.streams.setdefault(stream_key, StreamFile(self, cls, key))
        return found

    say_errors = True  # a live session says its first write error on stderr; a builder raises it instead

    def report_error(self, message: str) -> None:
        if not self.errors and self.say_errors:  # say it once on stderr; keep all of them for the caller
            print(f"dfcompass: {message}", file=sys.stderr)
        self.errors.append(message)

    def write_events(self, cls: schema.EventClass, key: str, rows: Iterable[Sequence[object]]) -> StreamFile:
        """Write rows of (timestamp, field values...) with explicit timestamps, sorted first.

        For sources whose events arrive out of order (imports, GPU activity buffers, test
        traces). Splits into packets of at most ``packet_size`` bytes.
        """
        ordered = sorted(rows, key=lambda r: r[0])  # type: ignore[arg-type,return-value]
        stream = self.stream(cls, key)
        if cls.is_variable:
            per_packet = 256
        else:
            per_packet = records_per_packet(cls, self.packet_size)
        nfields = len(cls.fields) + 1
        for start in range(0, len(ordered), per_packet):
            chunk = ordered[start : start + per_packet]
            flat: list[object] = []
            for row in chunk:
                if len(row) != nfields:
                    raise ValueError(f"{cls.name}: expected {nfields} values per row, got {len(row)}")
                flat.append(cls.id)
                flat.extend(row)
            body = pack_string_defs(flat) if cls.is_variable else pack_fixed(cls, flat, len(chunk))  # type: ignore[arg-type]
            stream.write_packet(body, len(chunk), int(chunk[0][0]), int(chunk[-1][0]))  # type: ignore[call-overload]
        return stream

    def write_block(self, cls: schema.EventClass, key: str, ts: Sequence[int], records: bytes) -> StreamFile:
        """Write packed records of a fixed-size class, all in one buffer, in time order; `ts` holds
        their timestamps. The same packets as :meth:`write_records` would write."""
        stream = self.stream(cls, key)
        per_packet, size = records_per_packet(cls, self.packet_size), cls.record_size
        for start in range(0, len(ts), per_packet):
            stop = min(start + per_packet, len(ts))
            stream.write_packet(records[start * size:stop * size], stop - start, int(ts[start]), int(ts[stop - 1]))
        return stream

    def close(self) -> None:
        for stream in list(self.streams.values()):
            stream.close()
