"""The low-level writer (tracer.ctf.TraceDirectory) against the fast reader."""

from __future__ import annotations

import tempfile
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tc_analyses.reader.fast import read_trace
from tests.helpers import WALL_OFFSET, check_packets, packets_of
from tracer import schema
from tracer.ctf import TraceDirectory, TraceExistsError, records_per_packet, stream_file_name
from tracer.strings import unescape

FIXED = [c for c in schema.CATALOGUE if not c.is_variable]
RANGES = {
    "u8": (0, 2**8 - 1),
    "u16": (0, 2**16 - 1),
    "u32": (0, 2**32 - 1),
    "sid": (0, 2**32 - 1),
    "u64": (0, 2**64 - 1),
    "i64": (-(2**63), 2**63 - 1),
}
ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=60)


@st.composite
def class_rows(draw: Any) -> tuple[schema.EventClass, str, list[tuple[int, ...]]]:
    cls = draw(st.sampled_from(FIXED))
    key = draw(st.sampled_from(["0", "1", "gpu0-q7", "odd key/with spaces"]))
    count = draw(st.integers(1, 80))
    # FixedClock-like timestamps: a base plus non-negative steps (duplicates allowed), given unsorted
    base = draw(st.integers(0, 2**40))
    steps = draw(st.lists(st.integers(0, 5_000), min_size=count, max_size=count))
    stamps, t = [], base
    for s in steps:
        t += s
        stamps.append(t)
    stamps = draw(st.permutations(stamps))
    rows = []
    for ts in stamps:
        values = [draw(st.integers(*RANGES[f.type])) for f in cls.fields]
        rows.append((ts, *values))
    return cls, key, rows


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    streams=st.lists(class_rows(), min_size=1, max_size=4, unique_by=lambda s: (s[0].id, s[1])),
    strings=st.lists(ANY_TEXT, max_size=12),
    packet_size=st.sampled_from([1, 64, 200, 1024, 65536]),
)
@pytest.mark.slow
def test_written_rows_read_back_equal(streams: list[Any], strings: list[str], packet_size: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "t"
        trace_uuid = uuid.UUID(int=12345)
        out = TraceDirectory(path, clock_offset_ns=WALL_OFFSET, trace_uuid=trace_uuid, packet_size=packet_size)
        for cls, key, rows in streams:
            out.write_events(cls, key, rows)
        string_rows = [(500 + 7 * sid, sid, text) for sid, text in enumerate(strings)]
        if string_rows:
            out.write_events(schema.STRING_DEF, "strings", list(reversed(string_rows)))
        out.close()

        trace = read_trace(path)
        assert trace.metadata.uuid == str(trace_uuid)
        assert trace.discarded == 0
        expected: dict[str, list[tuple[int, ...]]] = {}
        for cls, _, rows in streams:
            expected.setdefault(cls.name, []).extend(rows)
        for name, rows in expected.items():
            table = trace.tables[name]
            got = list(zip(*(table[c].tolist() for c in table.columns)))
            assert sorted(got) == sorted(rows)
            stamps = table["timestamp"].tolist()
            assert stamps == sorted(stamps)
        # the string table: sid -> exact text, and the raw values are the escaped form
        assert trace.strings.tolist() == strings
        if strings:
            defs = trace.table("string_def")
            assert [unescape(v) for v in defs["value"].tolist()] == strings
            assert all(v.isascii() for v in defs["value"].tolist())
        assert set(trace.tables) == set(expected) | ({schema.STRING_DEF.name} if strings else set())
        # packet structure
        per_file = check_packets(path)
        for cls, key, rows in streams:
            packets, events = per_file[stream_file_name(cls, key)]
            assert events == len(rows)
            assert packets == -(-len(rows) // records_per_packet(cls, packet_size))
        assert sum(e for _, e in per_file.values()) == sum(len(r) for _, _, r in streams) + len(strings)


def test_write_events_splits_packets_at_packet_size(tmp_path: Path) -> None:
    cls = schema.BY_SHORT["node_end"]  # 20-byte records
    out = TraceDirectory(tmp_path / "t", clock_offset_ns=0, packet_size=64 + 20 * 5)
    rows = [(1000 + i, i, 0, 7) for i in range(23)]
    stream = out.write_events(cls, "7", rows)
    out.close()
    assert stream.events_written == 23 and stream.packets_written == 5
    packets = packets_of(tmp_path / "t" / "node_end-7")
    assert [p.body_len // 20 for p in packets] == [5, 5, 5, 5, 3]
    assert [(p.ts_begin, p.ts_end) for p in packets] == [(1000, 1004), (1005, 1009), (1010, 1014), (1015, 1019), (1020, 1022)]
    assert all(p.packet_size == 64 + p.body_len for p in packets)


def test_write_events_refuses_rows_of_the_wrong_length(tmp_path: Path) -> None:
    out = TraceDirectory(tmp_path / "t", clock_offset_ns=0)
    with pytest.raises(ValueError, match="expected 4 values"):
        out.write_events(schema.BY_SHORT["node_end"], "1", [(1, 2, 3)])
    out.close()


def test_stream_file_names_are_safe() -> None:
    cls = schema.BY_SHORT["kernel_begin"]
    assert stream_file_name(cls, "gpu0-q7") == "kernel_begin-gpu0-q7"
    name = stream_file_name(cls, "../../etc/passwd <&>")
    assert "/" not in name and "<" not in name and name.startswith("kernel_begin-")


def test_existing_trace_is_kept_unless_overwrite(tmp_path: Path) -> None:
    path = tmp_path / "t"
    first = TraceDirectory(path, clock_offset_ns=0, trace_uuid=uuid.UUID(int=1))
    first.write_events(schema.BY_SHORT["node_end"], "1", [(5, 0, 0, 1)])
    first.close()
    before = {p.name: p.read_bytes() for p in path.iterdir()}
    with pytest.raises(TraceExistsError):
        TraceDirectory(path, clock_offset_ns=0, trace_uuid=uuid.UUID(int=2))
    assert {p.name: p.read_bytes() for p in path.iterdir()} == before
    TraceDirectory(path, clock_offset_ns=0, trace_uuid=uuid.UUID(int=2), overwrite=True).close()
    assert sorted(p.name for p in path.iterdir()) == ["metadata"]
    assert read_trace(path).metadata.uuid == str(uuid.UUID(int=2))


def test_negative_clock_offset_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="negative"):
        TraceDirectory(tmp_path / "t", clock_offset_ns=-1)
