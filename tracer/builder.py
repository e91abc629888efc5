"""Build a whole trace from events with their own timestamps (imports, GPU buffers, test traces).

Unlike a live :class:`~tracer.session.Session`, events may arrive in any order. The builder keeps
them until :meth:`TraceBuilder.close`, then writes each stream sorted by time. Strings given for
``sid`` fields are interned, and each ``dfc:string_def`` (and ``dfc:device_info``) is stamped with
1 ns before its first use, so definitions always precede uses, as live traces guarantee too.

>>> import tempfile, os
>>> out = os.path.join(tempfile.mkdtemp(), "t")
>>> with TraceBuilder(out, clock_offset_ns=0) as b:
...     cpu = b.device("cpu", ts=100)
...     b.add("node_begin", "worker-1", 100, 0, "relu", "layer1.relu", cpu, 1, 0)
...     b.add("node_end", "worker-1", 150, 0, cpu, 1)
"""

from __future__ import annotations

import os
import uuid as uuid_mod
from typing import Any

from tracer import schema
from tracer.ctf import TraceDirectory

_STRINGS_KEY = "strings"
_DEVICES_KEY = "devices"


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
    ) -> None:
        self._trace = TraceDirectory(path, clock_offset_ns=clock_offset_ns, trace_uuid=trace_uuid,
                                     hostname=hostname, env=env, overwrite=overwrite, packet_size=packet_size,
                                     absolute_clock=absolute_clock)
        self.path = self._trace.path
        self._rows: dict[tuple[str, str], list[tuple[Any, ...]]] = {}
        self._strings: dict[str, int] = {}
        self._first_use: list[int] = []  # sid -> earliest timestamp seen
        self._devices: dict[str, int] = {}
        self._device_rows: dict[int, list[Any]] = {}

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
        """The trace-local index of device `name`; described at the earliest `ts` seen."""
        index = self._devices.get(name)
        if index is None:
            index = self._devices[name] = len(self._devices)
            kind, _, ordinal = name.partition(":")
            self._device_rows[index] = [ts, index, name, kind, int(ordinal) if ordinal.isdigit() else 0, model]
        elif ts < self._device_rows[index][0]:
            self._device_rows[index][0] = ts
        return index

    def add(self, short_name: str, key: str, ts: int, *values: Any) -> None:
        """Add one event of class `short_name` to stream `key`; str values of sid fields are interned."""
        cls = schema.BY_SHORT[short_name]
        if len(values) != len(cls.fields):
            raise TypeError(f"{cls.name} takes {len(cls.fields)} values ({', '.join(cls.field_names)}), got {len(values)}")
        row = tuple(
            self.intern(v, ts) if f.type == "sid" and isinstance(v, str) else v for f, v in zip(cls.fields, values)
        )
        self._rows.setdefault((short_name, key), []).append((ts, *row))

    def close(self) -> None:
        """Write every stream (sorted by time) and close the trace."""
        # Definitions go 1 ns before their first use: readers that order equal timestamps
        # arbitrarily across streams (Trace Compass) still see them first.
        for index, (ts, *fields) in sorted(self._device_rows.items()):
            name, kind, ordinal, model = fields[1], fields[2], fields[3], fields[4]
            self.add("device_info", _DEVICES_KEY, max(ts - 1, 0), index, name, kind, ordinal, model)
        self._device_rows.clear()
        strings = [(max(ts - 1, 0), sid, text) for (text, sid), ts in zip(self._strings.items(), self._first_use)]
        if strings:
            self._trace.write_events(schema.STRING_DEF, _STRINGS_KEY, strings)
        for (short_name, key), rows in sorted(self._rows.items()):
            self._trace.write_events(schema.BY_SHORT[short_name], key, rows)
        self._rows.clear()
        self._trace.close()

    def events_written(self) -> dict[str, int]:
        """Events written per class name ("dfc:node_begin"...), complete once closed."""
        counts: dict[str, int] = {}
        for stream in self._trace.streams.values():
            counts[stream.cls.name] = counts.get(stream.cls.name, 0) + stream.events_written
        return counts

    def __enter__(self) -> "TraceBuilder":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
