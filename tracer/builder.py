"""Build a whole trace from events with their own timestamps (imports, GPU buffers, test traces).

Unlike a live :class:`~tracer.session.Session`, events may arrive in any order. Each event is
packed into its CTF record as it is added (a few dozen bytes, not a Python object), and a stream
whose records pass a budget spills them to a scratch file, so memory stays bounded however large
the trace. :meth:`TraceBuilder.close` writes each stream sorted by time (equal times keep the order
given by ``order=``, then the order of adding). Strings given for ``sid`` fields are interned, and
each ``dfc:string_def`` (and ``dfc:device_info``) is stamped with 1 ns before its first use, so
definitions always precede uses, as live traces guarantee too. Nothing is written to the trace
directory before :meth:`~TraceBuilder.close`.

>>> import tempfile, os
>>> out = os.path.join(tempfile.mkdtemp(), "t")
>>> with TraceBuilder(out, clock_offset_ns=0) as b:
...     cpu = b.device("cpu", ts=100)
...     b.add("node_begin", "worker-1", 100, 0, "relu", "layer1.relu", cpu, 1, 0)
...     b.add("node_end", "worker-1", 150, 0, cpu, 1)
"""

from __future__ import annotations

import errno
import os
import shutil
import struct
import tempfile
import uuid as uuid_mod
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from tracer import schema
from tracer.ctf import TraceDirectory, TraceExistsError

_STRINGS_KEY = "strings"
_DEVICES_KEY = "devices"
_SORT_KEY = struct.Struct("<qq")  # (timestamp, order) before each packed record: how a stream sorts
_NUMPY_FORMATS = {"B": "<u1", "H": "<u2", "I": "<u4", "Q": "<u8", "b": "<i1", "h": "<i2", "i": "<i4", "q": "<i8"}
SPILL_BYTES = 16 << 20  # packed records held in memory, all streams together, before they go to scratch files


class _Layout:
    """How a class's events are packed: the sort key, then the CTF record (id, timestamp, fields)."""

    def __init__(self, cls: schema.EventClass) -> None:
        self.cls = cls
        self.record = struct.Struct("<qq" + cls.struct_format)
        self.sids = tuple(i for i, f in enumerate(cls.fields) if f.type == "sid")


_LAYOUTS = {cls.short: _Layout(cls) for cls in schema.CATALOGUE if not cls.is_variable}


class _Stream:
    """The packed records of one (class, key) stream: in memory, then in a scratch file."""

    def __init__(self, layout: _Layout, key: str) -> None:
        self.layout, self.cls, self.key = layout, layout.cls, key
        self.buffer = bytearray()
        self.scratch: Path | None = None
        self.count = 0
        self.last: tuple[int, int] = (-(1 << 63), -(1 << 63))
        self.in_order = True  # added in (timestamp, order) order: no sort at close

    def spill(self, folder: Path, index: int) -> None:
        """Append the buffered records to the scratch file; on failure the file is as it was."""
        path = self.scratch if self.scratch is not None else folder / f"{index}.rec"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            kept = os.fstat(fd).st_size
            try:
                view = memoryview(self.buffer)
                while view:  # unbuffered: what failed to go out is known, and cut back
                    view = view[os.write(fd, view):]
            except OSError:
                os.ftruncate(fd, kept)
                raise
        finally:
            os.close(fd)
        self.scratch = path  # only once a write worked
        self.buffer = bytearray()

    def records(self) -> bytes:
        data = self.scratch.read_bytes() if self.scratch is not None else b""
        return data + bytes(self.buffer) if data else bytes(self.buffer)


class TraceBuilder:
    """Collect events, then write a dfcompass trace with every stream sorted."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        clock_offset_ns: int,
        trace_uuid: uuid_mod.UUID | None = None,
        hostname: str = "",
        env: dict[str, str | int] | None = None,
        overwrite: bool = False,
        packet_size: int = 64 * 1024,
        absolute_clock: bool = True,
        device_order: Callable[[str], Any] | None = None,
        scratch_dir: str | os.PathLike[str] | None = None,
        ctf_version: str | None = None,
    ) -> None:
        """`device_order`: a sort key on device names that fixes the devices' final indices (the
        indices :meth:`device` returns are then provisional and remapped at close); None keeps
        the order of first use. `scratch_dir`: where spilled records go (a private folder is made
        inside it, and removed at close); default the system's temporary folder. `ctf_version`: as
        :class:`tracer.ctf.TraceDirectory` takes it ("1.8", "2", None: $DFCOMPASS_CTF or 1.8)."""
        self.path = Path(path)
        if (self.path / "metadata").exists() and not overwrite:
            raise TraceExistsError(f"{self.path}: already holds a trace (metadata exists)")
        self._directory_args: dict[str, Any] = dict(
            clock_offset_ns=clock_offset_ns, trace_uuid=trace_uuid, hostname=hostname, env=env, overwrite=overwrite,
            packet_size=packet_size, absolute_clock=absolute_clock, ctf_version=ctf_version)
        self._trace: TraceDirectory | None = None
        self._streams: dict[tuple[str, str], _Stream] = {}
        self._buffered = 0
        self._scratch_parent = scratch_dir
        self._scratch: Path | None = None
        self._strings: dict[str, int] = {}
        self._first_use: list[int] = []  # sid -> earliest timestamp seen
        self._devices: dict[str, int] = {}
        self._device_rows: dict[int, list[Any]] = {}
        self._device_order = device_order

    def intern(self, text: str, ts: int) -> int:
        """The string id of `text`; its definition is stamped with the earliest `ts` seen."""
        sid = self._strings.get(text)
        if sid is None:
            sid = self._strings[text] = len(self._strings)
            self._first_use.append(ts)
        elif ts < self._first_use[sid]:
            self._first_use[sid] = ts
        return sid

    def device(self, name: str, ts: int, model: str = "") -> int:
        """The index of device `name` (provisional with `device_order`); described at the earliest `ts` seen."""
        index = self._devices.get(name)
        if index is None:
            index = self._devices[name] = len(self._devices)
            kind, _, ordinal = name.partition(":")
            self._device_rows[index] = [ts, index, name, kind, int(ordinal) if ordinal.isdigit() else 0, model]
        elif ts < self._device_rows[index][0]:
            self._device_rows[index][0] = ts
        return index

    def add(self, short_name: str, key: str, ts: int, *values: Any, order: int = 0) -> None:
        """Add one event of class `short_name` to stream `key`; str values of sid fields are interned.

        `order` places events of one stream that share a timestamp (lower first); equal ones keep
        the order they were added in."""
        layout = _LAYOUTS[short_name]
        cls = layout.cls
        if len(values) != len(cls.fields):
            raise TypeError(f"{cls.name} takes {len(cls.fields)} values ({', '.join(cls.field_names)}), got {len(values)}")
        if layout.sids:
            row = list(values)
            for position in layout.sids:
                if isinstance(row[position], str):
                    row[position] = self.intern(row[position], ts)
            values = tuple(row)
        stream = self._streams.get((short_name, key))
        if stream is None:
            stream = self._streams[(short_name, key)] = _Stream(layout, key)
        try:
            packed = layout.record.pack(ts, order, cls.id, ts, *values)
        except struct.error as exc:
            raise ValueError(f"{cls.name} at {ts}: a value does not fit its field ({exc})") from None
        if stream.in_order:
            if (ts, order) < stream.last:
                stream.in_order = False
            else:
                stream.last = (ts, order)
        stream.buffer += packed
        stream.count += 1
        self._buffered += len(packed)
        if self._buffered > SPILL_BYTES:
            self._spill()

    def add_columns(self, short_name: str, key: str, ts: Any, order: Any, columns: list[Any]) -> None:
        """Add many events of class `short_name` to stream `key` at once, as :meth:`add` would one
        by one in row order: `ts`, `order` and each field a numpy integer array (sids and device
        indices already resolved, see :meth:`intern` and :meth:`device`)."""
        import numpy as np  # only bulk importers come here; a live session never imports numpy for it

        layout = _LAYOUTS[short_name]
        cls = layout.cls
        if len(columns) != len(cls.fields):
            raise TypeError(f"{cls.name} takes {len(cls.fields)} columns, got {len(columns)}")
        formats = ["<i8", "<i8"] + [_NUMPY_FORMATS[c] for c in cls.struct_format]
        records = np.zeros(len(ts), dtype=np.dtype({"names": [f"f{i}" for i in range(len(formats))],
                                                    "formats": formats}))
        ts, order = np.asarray(ts, dtype=np.int64), np.asarray(order, dtype=np.int64)
        for name, values in zip(records.dtype.names or (), [ts, order, np.full(len(ts), cls.id), ts, *columns]):
            target = records.dtype[name]
            if len(values) and target.kind == "u" and (np.asarray(values).min() < 0 or
                                                       int(np.asarray(values).max()) > np.iinfo(target).max):
                raise ValueError(f"{cls.name} in stream {key}: a value does not fit its field")
            records[name] = values
        if not len(records):
            return
        stream = self._streams.get((short_name, key))
        if stream is None:
            stream = self._streams[(short_name, key)] = _Stream(layout, key)
        if stream.in_order:
            later = (ts[1:] > ts[:-1]) | ((ts[1:] == ts[:-1]) & (order[1:] >= order[:-1]))
            if (int(ts[0]), int(order[0])) < stream.last or not later.all():
                stream.in_order = False
            else:
                stream.last = (int(ts[-1]), int(order[-1]))
        data = records.tobytes()
        stream.buffer += data
        stream.count += len(records)
        self._buffered += len(data)
        if self._buffered > SPILL_BYTES:
            self._spill()

    def _spill(self) -> None:
        try:
            if self._scratch is None:
                self._scratch = Path(tempfile.mkdtemp(prefix="dfc-build-", dir=self._scratch_parent))
            for index, stream in enumerate(self._streams.values()):
                if stream.buffer:
                    stream.spill(self._scratch, index)
            self._buffered = 0
        except OSError:  # no room for scratch files: the records stay in memory, as a small trace's do
            self._buffered = -(1 << 62)  # and no more tries

    def close(self) -> None:
        """Write every stream (sorted by time) and close the trace."""
        try:
            self._write()
        finally:
            self.discard()

    def discard(self) -> None:
        """Drop what was added and not written (the scratch files too); nothing else is touched."""
        self._streams.clear()
        self._buffered = 0
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None

    def _write(self) -> None:
        trace = self._trace = TraceDirectory(self.path, **self._directory_args)
        trace.say_errors = False
        try:
            self._write_streams(trace)
        finally:
            trace.close()
        if trace.errors:  # a full disk, a folder gone: an import or export that fails must not look done
            raise OSError(errno.EIO, f"the trace was not written whole ({trace.errors[0].split('; ')[0]})",
                          str(self.path))

    def _write_streams(self, trace: TraceDirectory) -> None:
        remap = self._final_device_indices()
        # Definitions go 1 ns before their first use: readers that order equal timestamps
        # arbitrarily across streams (Trace Compass) still see them first.
        for ts, index, name, kind, ordinal, model in sorted((row for row in self._device_rows.values()),
                                                            key=lambda row: remap[row[1]]):
            self.add("device_info", _DEVICES_KEY, max(ts - 1, 0), remap[index], name, kind, ordinal, model)
        self._device_rows.clear()
        strings = [(max(ts - 1, 0), sid, text) for (text, sid), ts in zip(self._strings.items(), self._first_use)]
        if strings:
            trace.write_events(schema.STRING_DEF, _STRINGS_KEY, strings)
        moved = remap if remap != list(range(len(remap))) else None
        for (short_name, key), stream in sorted(self._streams.items()):
            remapped = None if short_name == "device_info" else moved  # device_info was added with final indices
            trace.write_block(stream.cls, key, *self._sorted_block(stream, remapped))

    def _final_device_indices(self) -> list[int]:
        """provisional device index -> final index."""
        provisional = list(self._devices)  # insertion order is index order
        ordered = sorted(provisional, key=self._device_order) if self._device_order is not None else provisional
        final = {name: i for i, name in enumerate(ordered)}
        return [final[name] for name in provisional]

    @staticmethod
    def _sorted_block(stream: _Stream, remap: list[int] | None) -> tuple[Any, bytes]:
        """(timestamps, CTF records) of a stream in its order, device fields remapped when asked:
        sorted by (timestamp, order), equal keys in the order of adding (a stable sort)."""
        import numpy as np  # the builder's users are bulk writers: imports, GPU buffers, test traces

        size, head = stream.layout.record.size, _SORT_KEY.size
        rows = np.frombuffer(stream.records(), dtype=np.uint8).reshape(stream.count, size)
        keys = np.ascontiguousarray(rows[:, :head]).view("<i8")
        ts, order = keys[:, 0], keys[:, 1]
        if not stream.in_order:
            permutation = np.lexsort((order, ts))
            rows, ts = rows[permutation], ts[permutation]
        body = np.array(rows[:, head:], order="C")
        if remap is not None and stream.cls.device_positions:
            lookup = np.asarray(remap, dtype="<u2")
            fmt = "<" + stream.cls.struct_format
            for p in stream.cls.device_positions:
                at = struct.calcsize(fmt[:3 + p])  # id and timestamp, then the fields before
                values = np.ascontiguousarray(body[:, at:at + 2]).view("<u2")[:, 0]
                body[:, at:at + 2] = lookup[values].view(np.uint8).reshape(-1, 2)
        return ts, body.tobytes()

    def events_written(self) -> dict[str, int]:
        """Events written per class name ("dfc:node_begin"...), complete once closed."""
        counts: dict[str, int] = {}
        for stream in self._trace.streams.values() if self._trace is not None else ():
            counts[stream.cls.name] = counts.get(stream.cls.name, 0) + stream.events_written
        return counts

    def __enter__(self) -> "TraceBuilder":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
