"""Our CTF 1.8 reader (reader.ctf) against babeltrace2's bindings on the real LTTng traces of
../shared/traces/lttng, record for record.

The records are compared per stream: events of equal timestamps in different streams may come in
either order from babeltrace2's muxer, while ours orders them by stream file name (Trace Compass's
rule), so the global orders are not compared with each other; ours is checked on its own.

One difference is babeltrace2's: 2.0.4 shows the previous value of a string field again when the
field is empty (review.lttng.org/c/babeltrace/+/4528). Such leaves (ours "", babeltrace2's a value
the same field of the same event class had before) are counted apart and pinned per trace.
"""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

import pytest

from tc_analyses.reader.ctf import iter_ctf
from tc_analyses.reader.records import Discarded, Event
from tests.helpers import requires_bt2

pytestmark = [pytest.mark.shared, requires_bt2]

Record = Event | Discarded
FieldPath = tuple[str | int, ...]  # ("fields", "comm"), ("context", "vtid"), ("fields", "args", 2)
Leaf = tuple[FieldPath, Any, Any]  # where two records differ: path, ours, babeltrace2's

# name, events (../shared/traces/README.md), babeltrace2's repeated empty strings in it
TRACES = [
    # syscall_entry_access filename "" at 2358049058682 on channel0_4; babeltrace2 repeats '/var/run/utmpx'
    pytest.param("many-threads", 240_644, 1, marks=pytest.mark.slow, id="many-threads"),
    pytest.param("ros2", 99_338, 0, marks=pytest.mark.slow, id="ros2"),
    pytest.param("context-switches-ust", 3_934, 0, id="context-switches-ust"),
    pytest.param("ust-tracef-local", 5_602, 0, id="ust-tracef-local"),
]
SHOWN = 5  # mismatches quoted in a failure message


@pytest.fixture(scope="module")
def lttng(shared_dir: Path) -> Path:
    return shared_dir / "traces" / "lttng"


def bt2_records(path: str, with_fields: bool) -> list[Record]:
    from tc_analyses.reader.bt2_source import _read_in_process  # imports bt2 into this process

    return list(_read_in_process(path, with_fields))


def by_stream(records: Iterable[Record]) -> dict[str, list[tuple[int, Record]]]:
    """Each stream's records in the reader's order, with their index in the reader's whole output."""
    streams: dict[str, list[tuple[int, Record]]] = defaultdict(list)
    for index, record in enumerate(records):
        streams[record.stream].append((index, record))
    return dict(streams)


def leaves(ours: Any, theirs: Any, path: FieldPath) -> Iterator[Leaf]:
    """Where two plain values differ; a change of type, length or key order is one leaf."""
    if isinstance(ours, Mapping) and isinstance(theirs, Mapping) and list(ours) == list(theirs):
        for key in ours:
            yield from leaves(ours[key], theirs[key], path + (key,))
    elif isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        for i, (a, b) in enumerate(zip(ours, theirs)):
            yield from leaves(a, b, path + (i,))
    elif type(ours) is not type(theirs) or ours != theirs:  # type too: True == 1 == 1.0
        yield path, ours, theirs


def event_leaves(ours: Event, theirs: Event) -> Iterator[Leaf]:
    for attr in ("name", "timestamp", "ns_from_origin", "cpu"):
        yield from leaves(getattr(ours, attr), getattr(theirs, attr), (attr,))
    yield from leaves(ours.fields, theirs.fields, ("fields",))
    yield from leaves(ours.context, theirs.context, ("context",))


def value_at(event: Event, path: FieldPath) -> Any:
    value: Any = {"fields": event.fields, "context": event.context}.get(str(path[0]))
    for step in path[1:]:
        try:
            value = value[step]
        except (KeyError, IndexError, TypeError):
            return None
    return value


class EarlierValues:
    """Whether babeltrace2 gave a value to the same field of the same event class before an event."""

    def __init__(self, records: list[Record]) -> None:
        self.records = records
        self.first: dict[tuple[str, FieldPath], dict[Any, int]] = {}  # built per field when first asked

    def before(self, name: str, path: FieldPath, value: str, index: int) -> bool:
        if (name, path) not in self.first:
            seen: dict[Any, int] = {}
            for i, r in enumerate(self.records):
                if isinstance(r, Event) and r.name == name:
                    seen.setdefault(value_at(r, path), i)
            self.first[(name, path)] = seen
        return self.first[(name, path)].get(value, index) < index


def compare(ours: list[Record], theirs: list[Record]) -> tuple[int, list[str], int]:
    """(records compared, the real mismatches described, babeltrace2's repeated empty strings)."""
    earlier = EarlierValues(theirs)
    ours_streams, theirs_streams = by_stream(ours), by_stream(theirs)
    assert sorted(ours_streams) == sorted(theirs_streams), "the two readers name different streams"
    compared, repeats, mismatches = 0, 0, []
    for stream, their_records in theirs_streams.items():
        our_records = ours_streams[stream]
        if len(our_records) != len(their_records):
            mismatches.append(f"{stream}: {len(our_records)} records, babeltrace2 {len(their_records)}")
        for (_, a), (index, b) in zip(our_records, their_records):
            compared += 1
            if not (isinstance(a, Event) and isinstance(b, Event)):
                if a != b:
                    mismatches.append(f"ours {a!r}\n    babeltrace2 {b!r}")
                continue
            real = []
            for path, mine, bts in event_leaves(a, b):
                if mine == "" and isinstance(bts, str) and bts and path[0] != "name" \
                        and earlier.before(b.name, path, bts, index):
                    repeats += 1
                else:
                    real.append(f"{'.'.join(map(str, path))}: ours {mine!r}, babeltrace2 {bts!r}")
            if real:
                mismatches.append("; ".join(real) + f"\n    ours {a!r}\n    babeltrace2 {b!r}")
    return compared, mismatches, repeats


def assert_trace_compass_order(records: list[Record]) -> None:
    """Non-decreasing time; equal times in different streams by stream file name. Events only: a
    discarded-events record is stamped with the start of its lost range, which may lie in the past."""
    events = [r for r in records if isinstance(r, Event)]
    for i, (a, b) in enumerate(zip(events, events[1:])):
        assert (a.ns_from_origin, os.path.basename(a.stream)) <= (b.ns_from_origin, os.path.basename(b.stream)), \
            f"events {i} and {i + 1} out of order:\n    {a!r}\n    {b!r}"


@pytest.mark.parametrize("name,events,repeats", TRACES)
def test_ctf_reads_what_babeltrace2_reads(lttng: Path, name: str, events: int, repeats: int) -> None:
    path = str(lttng / name)
    ours = list(iter_ctf(path, with_fields=True))
    theirs = bt2_records(path, with_fields=True)
    assert sum(isinstance(r, Event) for r in theirs) == events
    assert_trace_compass_order(ours)
    compared, mismatches, repeated = compare(ours, theirs)
    assert not mismatches, f"{len(mismatches)} mismatches, the first:\n" + "\n".join(mismatches[:SHOWN])
    assert compared == len(theirs) == len(ours)
    assert repeated == repeats  # babeltrace2's bug; a change means our empty strings changed too


@pytest.mark.parametrize("name", ["context-switches-ust", "ust-tracef-local"])
def test_ctf_without_fields(lttng: Path, name: str) -> None:
    """with_fields=False: names and times only, as babeltrace2's reader gives them (cpu None too)."""
    path = str(lttng / name)
    ours = by_stream(iter_ctf(path, with_fields=False))
    theirs = by_stream(bt2_records(path, with_fields=False))
    assert {s: [r for _, r in rs] for s, rs in ours.items()} == {s: [r for _, r in rs] for s, rs in theirs.items()}


@pytest.mark.slow
def test_the_analyses_see_an_empty_string_as_trace_compass_does(lttng: Path) -> None:
    """What the XML analyses read (iter_ctf_events): the empty filename of this access(2) call is
    "", as Trace Compass reads it; through babeltrace2 2.0.4 it was the previous call's path."""
    from tc_analyses.engine.events import iter_ctf_events

    found = [fields for name, ts, fields in iter_ctf_events(lttng / "many-threads")
             if name == "syscall_entry_access" and ts == 2358049058682]
    assert [f["filename"] for f in found] == [""] and found[0]["cpu"] == 4
