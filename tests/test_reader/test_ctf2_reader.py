"""Our reader on a CTF 2 trace written here to the specification (CTF 2.0: JSON-sequence metadata,
field classes, roles, field locations): every field class kind it defines that a tracer writes,
values worked out by hand. babeltrace2 2.0.4 (Debian 12) reads no CTF 2: it refuses in one line."""

from __future__ import annotations

import json
import struct
import uuid as uuid_mod
from pathlib import Path
from typing import Any

import pytest

from tc_analyses.errors import TraceError
from tc_analyses.reader.any_ctf import iter_any_ctf
from tc_analyses.reader.ctf import iter_ctf
from tc_analyses.reader.records import Discarded, Event
from tests.helpers import requires_bt2

UUID = uuid_mod.UUID("2b7e1516-28ae-42d2-a6ab-f7158809cf4f")


def u(bits: int, role: str | None = None, order: str = "little-endian", alignment: int = 8) -> dict[str, Any]:
    cls: dict[str, Any] = {"type": "fixed-length-unsigned-integer", "length": bits, "byte-order": order,
                           "alignment": alignment}
    return {**cls, "roles": [role]} if role else cls


def member(name: str, cls: Any) -> dict[str, Any]:
    return {"name": name, "field-class": cls}


def at(*path: str) -> dict[str, Any]:
    return {"origin": "event-record-payload", "path": list(path)}


PAYLOAD = {"type": "structure", "member-classes": [
    member("n", {"type": "variable-length-signed-integer"}),
    member("u", {"type": "variable-length-unsigned-integer"}),
    member("flag", {"type": "fixed-length-boolean", "length": 8, "byte-order": "little-endian", "alignment": 8}),
    member("has", "u8"),
    member("opt", {"type": "optional", "field-class": "u8", "selector-field-location": at("has"),
                   "selector-field-ranges": [[1, 1]]}),
    member("len", "u8"),
    member("items", {"type": "dynamic-length-array", "element-field-class": u(16, order="big-endian"),
                     "length-field-location": at("len")}),
    member("sel", "u8"),
    member("v", {"type": "variant", "selector-field-location": at("sel"), "options": [
        {"name": "text", "field-class": {"type": "null-terminated-string"}, "selector-field-ranges": [[0, 0]]},
        {"name": "byte", "field-class": "u8", "selector-field-ranges": [[1, 9]]}]}),
    member("s", {"type": "static-length-string", "length": 6}),
    member("dl", "u8"),
    member("ds", {"type": "dynamic-length-string", "length-field-location": at("dl"), "encoding": "utf-16le"}),
    member("blob", {"type": "static-length-blob", "length": 3, "media-type": "application/octet-stream"}),
    member("low", {"type": "fixed-length-bit-array", "length": 4, "byte-order": "little-endian", "alignment": 1}),
    member("high", u(4, alignment=1)),
    member("f", {"type": "fixed-length-floating-point-number", "length": 32, "byte-order": "little-endian",
                 "alignment": 8}),
    member("e", {**u(8), "mappings": {"OFF": [[0, 0]], "ON": [[1, 1]]}}),
], "attributes": {"example.org/kept": {"ignored": True}}}

FRAGMENTS = [
    {"type": "preamble", "version": 2, "uuid": list(UUID.bytes)},
    {"type": "field-class-alias", "name": "u8", "field-class": u(8)},
    {"type": "trace-class", "environment": {"tracer_name": "handmade", "domain": "ust"},
     "packet-header-field-class": {"type": "structure", "member-classes": [
         member("magic", u(32, "packet-magic-number")),
         member("uuid", {"type": "static-length-blob", "length": 16, "roles": ["metadata-stream-uuid"]}),
         member("stream_class", u(8, "data-stream-class-id"))]}},
    {"type": "clock-class", "id": "c1", "frequency": 1_000_000, "offset-from-origin": {"seconds": 1_700_000_000,
                                                                                      "cycles": 5},
     "origin": "unix-epoch"},
    {"type": "data-stream-class", "id": 3, "default-clock-class-id": "c1",
     "packet-context-field-class": {"type": "structure", "member-classes": [
         member("total", u(32, "packet-total-length")), member("content", u(32, "packet-content-length")),
         member("begin", u(64, "default-clock-timestamp")), member("end", u(64, "packet-end-default-clock-timestamp")),
         member("lost", u(32, "discarded-event-record-counter-snapshot")), member("cpu_id", u(8))]},
     "event-record-header-field-class": {"type": "structure", "member-classes": [
         member("kind", u(8, "event-record-class-id")), member("ts", u(16, "default-clock-timestamp"))]}},
    {"type": "event-record-class", "id": 7, "data-stream-class-id": 3, "name": "app:sample",
     "payload-field-class": PAYLOAD, "attributes": {"lttng.org,2009": {"log-level": 13}}},
]


def _packet(begin: int, end: int, lost: int, events: bytes) -> bytes:
    header = struct.pack("<I16sB", 0xC1FC1FC1, UUID.bytes, 3)
    size = len(header) + 4 + 4 + 8 + 8 + 4 + 1 + len(events)
    return header + struct.pack("<IIQQIB", size * 8, size * 8, begin, end, lost, 2) + events


# the classic LEB128 examples: -123456 is C0 BB 78, 624485 is E5 8E 26
FIRST = (bytes([7]) + struct.pack("<H", 0xFFF0) + b"\xc0\xbb\x78" + b"\xe5\x8e\x26" + b"\x01" + b"\x01\x2a"
         + b"\x02\x01\x02\x03\x04" + b"\x00hi\x00" + b"ab\x00zzz" + b"\x04" + "hé".encode("utf-16-le")
         + b"\x01\x02\x03" + b"\xa5" + struct.pack("<f", 1.5) + b"\x01")
SECOND = (bytes([7]) + struct.pack("<H", 0x0010) + b"\x00\x00\x00\x00" + b"\x00" + b"\x03\x4d" + b"xyzxyz" + b"\x00"
          + b"\x00\x00\x00" + b"\x00" + struct.pack("<f", -2.0) + b"\x00")


def write_trace(folder: Path) -> Path:
    folder.mkdir()
    (folder / "metadata").write_text("".join("\x1e" + json.dumps(f) + "\n" for f in FRAGMENTS))
    with open(folder / "stream", "wb") as f:
        f.write(_packet(0x1FFE0, 0x1FFF0, 0, FIRST))
        f.write(_packet(0x20000, 0x20020, 6, SECOND))
    return folder


def test_a_ctf2_trace_reads_as_worked_out_by_hand(tmp_path: Path) -> None:
    records = list(iter_ctf(str(write_trace(tmp_path / "t"))))
    ns = lambda cycles: 1_700_000_000 * 10**9 + (5 + cycles) * 1000  # noqa: E731  (1 MHz)
    events = [r for r in records if isinstance(r, Event)]
    # the 16-bit timestamps are the clock's low bits: 0x0010 after 0xFFF0 wraps to 0x20010
    assert [(e.name, e.timestamp, e.ns_from_origin, e.cpu) for e in events] == [
        ("app:sample", 0x1FFF0, ns(0x1FFF0), 2), ("app:sample", 0x20010, ns(0x20010), 2)]
    assert events[0].fields == {"n": -123456, "u": 624485, "flag": True, "has": 1, "opt": 42, "len": 2,
                                "items": [0x0102, 0x0304], "sel": 0, "v": "hi", "s": "ab", "dl": 4, "ds": "hé",
                                "blob": b"\x01\x02\x03", "low": 5, "high": 10, "f": 1.5, "e": 1}
    assert events[1].fields == {"n": 0, "u": 0, "flag": False, "has": 0, "opt": None, "len": 0, "items": [], "sel": 3,
                                "v": 77, "s": "xyzxyz", "dl": 0, "ds": "", "blob": b"\x00\x00\x00", "low": 0,
                                "high": 0, "f": -2.0, "e": 0}
    [lost] = [r for r in records if isinstance(r, Discarded)]
    assert (lost.count, lost.ns_from_origin, lost.end_ns_from_origin) == (6, ns(0x1FFF0), ns(0x20020))
    from tc_analyses.reader.ctf import parse_trace

    declared = parse_trace(tmp_path / "t")  # user attributes are kept, not read as fields
    assert declared.streams[3].events[7].attributes == {"lttng.org,2009": {"log-level": 13}}


@pytest.mark.parametrize("edit,problem", [
    (lambda f: f[:1] + [{"type": "preamble", "version": 3}] + f[2:], "version 3"),
    (lambda f: f + [{"type": "event-record-class", "id": 8, "data-stream-class-id": 9}], "data stream class 9"),
    (lambda f: f[:-1] + [{**f[-1], "payload-field-class": {"type": "structure", "member-classes": [
        member("x", {"type": "fixed-length-floating-point-number", "length": 16})]}}], "16-bit floating point"),
    (lambda f: f[:-1] + [{**f[-1], "payload-field-class": {"type": "structure", "member-classes": [
        member("x", "nosuch")]}}], "unknown field class alias 'nosuch'"),
])
def test_metadata_it_cannot_read_is_one_line(tmp_path: Path, edit: Any, problem: str) -> None:
    trace = write_trace(tmp_path / "t")
    (trace / "metadata").write_text("".join("\x1e" + json.dumps(f) + "\n" for f in edit(FRAGMENTS)))
    with pytest.raises(TraceError) as info:
        list(iter_any_ctf(trace, reader="ctf"))  # what `info --reader ctf` does
    assert str(trace) in str(info.value) and problem in str(info.value) and "\n" not in str(info.value)


@requires_bt2
def test_babeltrace2_2_0_refuses_ctf2_in_one_line(tmp_path: Path, cli: Any) -> None:
    trace = write_trace(tmp_path / "t")
    result = cli("info", "--reader", "bt2", trace)
    assert result.exit_code == 1 and "CTF 2 metadata: babeltrace2 2.0" in result.stderr
    assert result.stderr.count("\n") == 1
    ours = cli("info", "--format", "json", trace)
    assert ours.exit_code == 0, ours.stderr
    assert '"events": 2' in ours.stdout and '"discarded": 6' in ours.stdout


def test_states_run_trace_compass_xml_on_a_ctf2_trace(tmp_path: Path, cli: Any) -> None:
    """The headless engine on a CTF 2 trace: an XML state provider over its events and fields."""
    trace = write_trace(tmp_path / "t")
    xml = tmp_path / "a.xml"
    xml.write_text('<?xml version="1.0" encoding="UTF-8"?>\n<tmfxml><stateProvider id="ctf2.case" version="1">'
                   '<eventHandler eventName="app:sample"><stateChange><stateAttribute type="constant" value="sel"/>'
                   '<stateValue type="eventField" value="sel"/></stateChange></eventHandler></stateProvider></tmfxml>')
    result = cli("states", trace, "--xml", xml)
    assert result.exit_code == 0, result.stderr
    origin = 1_700_000_000 * 10**9 + 5_000
    first, second = origin + 0x1FFF0 * 1000, origin + 0x20010 * 1000
    assert result.stdout.splitlines() == [f"ctf2.case  sel  [{first}, {second - 1}]  0",
                                          f"ctf2.case  sel  [{second}, {second}]  3"]


def one_event(folder: Path, members: list[dict[str, Any]], payload: bytes, *, total: bool = True,
              extra: dict[str, Any] | None = None) -> Path:
    """A CTF 2 trace of one event whose payload is `members`, its bytes `payload`; `total`: the
    packet context holds the packet's total length (else its content length only)."""
    context = FRAGMENTS[4]["packet-context-field-class"]["member-classes"]
    fragments = [dict(f) for f in FRAGMENTS]
    fragments[0] = {**fragments[0], **(extra or {})}
    if not total:
        fragments[4] = {**fragments[4], "packet-context-field-class": {"type": "structure", "member-classes": [
            {**context[0], "field-class": u(32)}, *context[1:]]}}
    fragments[5] = {**fragments[5], "payload-field-class": {"type": "structure", "member-classes": members}}
    folder.mkdir()
    (folder / "metadata").write_text("".join("\x1e" + json.dumps(f) + "\n" for f in fragments))
    event = bytes([7]) + struct.pack("<H", 0x10) + payload
    packet = _packet(0x100, 0x200, 0, event)
    if not total:  # the total length field says something else: only the content length counts
        packet = packet[:21] + struct.pack("<I", 8) + packet[25:]
    (folder / "stream").write_bytes(packet + (packet if not total else b""))
    return folder


def test_an_empty_array_is_aligned_and_a_relative_location_goes_up(tmp_path: Path) -> None:
    members = [member("len", "u8"), member("inner", {"type": "structure", "member-classes": [
        member("len", "u8"),
        member("a", {"type": "dynamic-length-array", "element-field-class": "u8", "minimum-alignment": 32,
                     "length-field-location": {"path": [None, "len"]}}),  # the parent's len, 0
        member("b", {"type": "dynamic-length-array", "element-field-class": "u8",
                     "length-field-location": {"path": ["len"]}})]}),  # this structure's len, 1
        member("after", "u8")]
    # the packet header and context take 50 bytes, the event header 3; a structure is aligned as its
    # most aligned member, here `a` (32 bits), and so is the payload: len 0 at byte 56, inner.len 1 at
    # 60, `a` empty but aligned (64), `b` (one byte) at 64, `after` at 65
    payload = b"\xee" * 3 + b"\x00" + b"\xee" * 3 + b"\x01" + b"\xee" * 3 + b"\x2a" + b"\x07"
    [event] = [r for r in iter_ctf(str(one_event(tmp_path / "t", members, payload))) if isinstance(r, Event)]
    assert event.fields == {"len": 0, "inner": {"len": 1, "a": [], "b": [0x2a]}, "after": 7}


def test_a_packet_with_only_its_content_length_ends_there(tmp_path: Path) -> None:
    trace = one_event(tmp_path / "t", [member("x", "u8")], b"\x05", total=False)
    assert [r.fields for r in iter_ctf(str(trace)) if isinstance(r, Event)] == [{"x": 5}, {"x": 5}]


def test_a_variable_length_timestamp_sets_the_clock_s_low_bits(tmp_path: Path) -> None:
    fragments = [dict(f) for f in FRAGMENTS]
    fragments[4] = {**fragments[4], "event-record-header-field-class": {"type": "structure", "member-classes": [
        member("kind", u(8, "event-record-class-id")),
        member("ts", {"type": "variable-length-unsigned-integer", "roles": ["default-clock-timestamp"]})]}}
    fragments[5] = {**fragments[5], "payload-field-class": {"type": "structure", "member-classes": []}}
    trace = tmp_path / "t"
    trace.mkdir()
    (trace / "metadata").write_text("".join("\x1e" + json.dumps(f) + "\n" for f in fragments))
    # clock at 0x1070 from the packet; 0x05 in one byte is its low 7 bits (0x1005 < 0x1070: wraps by 2^7)
    (trace / "stream").write_bytes(_packet(0x1070, 0x2000, 0, bytes([7, 0x75]) + bytes([7, 0x05])))
    assert [r.timestamp for r in iter_ctf(str(trace)) if isinstance(r, Event)] == [0x1075, 0x1085]


@pytest.mark.parametrize("change,problem", [
    ({"extensions": {"example.org": {"ext": 1}}}, "extensions"),
])
def test_metadata_extensions_are_refused(tmp_path: Path, change: dict[str, Any], problem: str) -> None:
    trace = one_event(tmp_path / "t", [member("x", "u8")], b"\x05", extra=change)
    with pytest.raises(TraceError, match=problem):
        list(iter_any_ctf(trace, reader="ctf"))


def test_a_bit_order_against_the_byte_order_is_refused(tmp_path: Path) -> None:
    trace = one_event(tmp_path / "t", [member("x", {**u(8), "bit-order": "last-to-first"})], b"\x01")
    with pytest.raises(TraceError, match="bit order"):
        list(iter_any_ctf(trace, reader="ctf"))


@pytest.mark.parametrize("change,problem", [
    (lambda f: f[:3] + [{**f[3], "offset-from-origin": [1]}] + f[4:], "offset-from-origin is not an object"),
    (lambda f: f[:4] + [{**f[3], "id": "c2", "frequency": 0}] + f[4:], "frequency 0"),  # a second clock
    (lambda f: f[:5] + [{**f[5], "payload-field-class": {"type": "structure", "member-classes": [
        member("x", {"type": "variant", "selector-field-location": at("x"), "options": [5]})]}}], "not an object"),
    (lambda f: f[:5] + [{**f[5], "payload-field-class": {"type": "structure", "member-classes": [
        member("x", {"type": "_eq__"})]}}], "field class '_eq__'"),
])
def test_damaged_metadata_values_are_one_line(tmp_path: Path, change: Any, problem: str) -> None:
    trace = write_trace(tmp_path / "t")
    (trace / "metadata").write_text("".join("\x1e" + json.dumps(f) + "\n" for f in change(FRAGMENTS)))
    with pytest.raises(TraceError) as info:
        list(iter_any_ctf(trace, reader="ctf"))
    assert problem in str(info.value) and "\n" not in str(info.value)


def test_aliases_nested_deep_are_built_once(tmp_path: Path) -> None:
    """40 aliases, each a structure of two of the previous one (2^40 fields if expanded)."""
    chain = [{"type": "field-class-alias", "name": "b0", "field-class": "u8"}]
    chain += [{"type": "field-class-alias", "name": f"b{i}", "field-class": {"type": "structure", "member-classes": [
        member("x", f"b{i - 1}"), member("y", f"b{i - 1}")]}} for i in range(1, 41)]
    trace = write_trace(tmp_path / "t")
    deep = {"type": "event-record-class", "id": 9, "data-stream-class-id": 3, "name": "app:deep",  # never met
            "payload-field-class": {"type": "structure", "member-classes": [member("all", "b40")]}}
    fragments = FRAGMENTS[:2] + chain + FRAGMENTS[2:] + [deep]
    (trace / "metadata").write_text("".join("\x1e" + json.dumps(f) + "\n" for f in fragments))
    assert len([r for r in iter_ctf(str(trace)) if isinstance(r, Event)]) == 2
