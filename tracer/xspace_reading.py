"""Reading TensorFlow profiles (XSpace protobuf): planes, lines, events and their stats.

What every part of the conversion (:mod:`tracer.tf_xspace`) reads the same way: the plane names,
an event's name, op type, times in epoch ns and stats, a line's thread, a graph node's device.
Protobuf map lookups cost more than the rest of decoding, so names are read once per plane.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Callable, Iterable, Mapping

HOST_PLANE = "/host:CPU"
GPU_PLANE_PREFIX = "/device:GPU:"
CUPTI_PLANE = "/host:CUPTI"
TASK_PLANE = "Task Environment"  # its stat profile_start_time: the epoch ns that saved times count from
_DEVICE = re.compile(r"device:(CPU|GPU):(\d+)", re.IGNORECASE)


class XEvent:
    """One profile event: its name, op type (graph ops only), times in epoch ns, and its stats,
    decoded on first use (most events are never asked for theirs)."""

    __slots__ = ("name", "op", "start", "end", "_stat_names", "_raw", "_stats")

    def __init__(self, name: str, op: str, start: int, end: int, stat_names: Mapping[int, str] | None = None,
                 raw: tuple[Any, ...] = (), stats: Mapping[str, Any] | None = None) -> None:
        self.name, self.op, self.start, self.end = name, op, start, end
        self._stat_names, self._raw, self._stats = stat_names or {}, raw, stats

    @property
    def stats(self) -> Mapping[str, Any]:
        if self._stats is None:
            decoded: dict[str, Any] = {}
            for stats in self._raw:
                stat_values(self._stat_names, stats, decoded)
            self._stats = decoded
        return self._stats


def stat_names(plane: Any) -> dict[int, str]:
    """The plane's stat names by metadata id, read once (a protobuf map lookup per stat costs more
    than the rest of decoding it)."""
    return {key: meta.name for key, meta in plane.stat_metadata.items()}


def stat_values(names: Mapping[int, str], stats: Iterable[Any], into: dict[str, Any]) -> None:
    for stat in stats:
        kind = stat.WhichOneof("value")
        value: Any = getattr(stat, kind) if kind else None
        if kind == "ref_value":
            value = names.get(value, "")
        into[names.get(stat.metadata_id, "")] = value


def profile_start_ns(space: Any) -> int:
    """The profile's start in epoch ns: a saved XSpace's times count from it (0 if not given)."""
    for plane in space.planes:
        if plane.name == TASK_PLANE:
            stats: dict[str, Any] = {}
            stat_values(stat_names(plane), plane.stats, stats)
            return int(stats.get("profile_start_time", 0) or 0)
    return 0


def is_graph_op(name: str, op: str) -> bool:
    return bool(op) and name.endswith(":" + op)


def line_events(plane: Any, line: Any, origin_ns: int = 0, keep: Callable[[str, str], bool] | None = None,
                ) -> list[XEvent]:
    """A line's events in start order (longest first at equal starts, so parents come first);
    with `keep`, only those whose (name, op type) it accepts."""
    events = []
    base_ps = (origin_ns + line.timestamp_ns) * 1000
    metadata = plane.event_metadata
    names = stat_names(plane)
    # One metadata lookup per kind of event (a protobuf map lookup costs more than the rest of the loop).
    kinds: dict[int, tuple[str, str, Any] | None] = {}
    for event in line.events:
        meta_id = event.metadata_id
        if meta_id in kinds:
            kind = kinds[meta_id]
        else:
            meta = metadata[meta_id]
            kind = kinds[meta_id] = ((meta.name, meta.display_name, meta.stats)
                                     if keep is None or keep(meta.name, meta.display_name) else None)
        if kind is None:
            continue
        start_ps = base_ps + event.offset_ps
        events.append(XEvent(kind[0], kind[1], start_ps // 1000, (start_ps + event.duration_ps) // 1000,
                             names, (kind[2], event.stats)))
    events.sort(key=lambda e: (e.start, -e.end))
    return events


@functools.lru_cache(maxsize=256)
def device_name(tf_device: str) -> str:
    """``/job:localhost/replica:0/task:0/device:GPU:1`` -> ``cuda:1``; CPU devices -> ``cpu``."""
    found = _DEVICE.search(tf_device)
    if found is None or found.group(1).upper() == "CPU":
        return "cpu"
    return f"cuda:{found.group(2)}"


def thread_id(line: Any) -> int:
    """A line's thread as a u32: the profiler's own thread ids are 64-bit."""
    return int(line.id) & 0x7FFFFFFF
