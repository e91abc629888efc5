"""CTF 2 metadata (a JSON text sequence of fragments, RFC 7464) for dfcompass traces, generated from
the event catalogue: the same stream layout as the CTF 1.8 metadata of :mod:`tracer.tsdl` describes,
so the data streams are byte for byte those of a CTF 1.8 trace and only ``metadata`` differs.

Fragments: the preamble (version 2, the trace's UUID), the trace class (the packet header, the
environment), the clock class (1 GHz, its offset from the Unix epoch), one data stream class (the
packet context and the event record header, with their roles) and one event record class per
catalogue entry. Strings are null-terminated UTF-8, integers little-endian and byte-aligned.
"""

from __future__ import annotations

import json
from typing import Any

from tracer import schema
from tracer.tsdl import STREAM_ID, TraceMeta, checked_env

RECORD_SEPARATOR = "\x1e"  # before each fragment of a JSON text sequence: what marks CTF 2 metadata

_ROLES = {"magic": "packet-magic-number", "uuid": "metadata-stream-uuid", "stream_id": "data-stream-class-id",
          "timestamp_begin": "default-clock-timestamp", "timestamp_end": "packet-end-default-clock-timestamp",
          "content_size": "packet-content-length", "packet_size": "packet-total-length",
          "events_discarded": "discarded-event-record-counter-snapshot"}


def _integer(bits: int, signed: bool = False, role: str | None = None) -> dict[str, Any]:
    cls: dict[str, Any] = {"type": f"fixed-length-{'signed' if signed else 'unsigned'}-integer", "length": bits,
                           "byte-order": "little-endian", "alignment": 8}
    if role:
        cls["roles"] = [role]
    return cls


def _field(type_name: str) -> dict[str, Any]:
    if type_name == "string":
        return {"type": "null-terminated-string"}
    bits = schema.FIELD_TYPES[type_name][1] * 8
    return _integer(bits, signed=type_name.startswith("i"))


def _structure(*members: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"type": "structure", "member-classes": [{"name": name, "field-class": cls} for name, cls in members]}


def event_fragment(cls: schema.EventClass) -> dict[str, Any]:
    """The CTF 2 event record class fragment of one catalogue class."""
    return {"type": "event-record-class", "id": cls.id, "data-stream-class-id": STREAM_ID, "name": cls.name,
            "payload-field-class": _structure(*((f.name, _field(f.type)) for f in cls.fields))}


def render_json_metadata(meta: TraceMeta) -> str:
    """The CTF 2 metadata of a dfcompass trace: the same classes as :func:`tracer.tsdl.render_metadata`."""
    if meta.clock_offset_ns < 0:
        raise ValueError("the clock offset must not be negative (babeltrace2 rejects it)")
    seconds, cycles = divmod(meta.clock_offset_ns, 1_000_000_000)
    header = _structure(("magic", _integer(32, role=_ROLES["magic"])),
                        ("uuid", {"type": "static-length-blob", "length": 16, "roles": [_ROLES["uuid"]]}),
                        ("stream_id", _integer(32, role=_ROLES["stream_id"])))
    context = _structure(*((name, _integer(64, role=_ROLES[name])) for name in
                           ("timestamp_begin", "timestamp_end", "content_size", "packet_size", "events_discarded")))
    event_header = _structure(("id", _integer(16, role="event-record-class-id")),
                              ("timestamp", _integer(64, role="default-clock-timestamp")))
    fragments: list[dict[str, Any]] = [
        {"type": "preamble", "version": 2, "uuid": list(meta.trace_uuid.bytes)},
        {"type": "trace-class", "environment": checked_env(meta), "packet-header-field-class": header},
        {"type": "clock-class", "id": meta.clock_name, "name": meta.clock_name, "frequency": 1_000_000_000,
         "offset-from-origin": {"seconds": seconds, "cycles": cycles}, "precision": 1,
         "description": "CLOCK_MONOTONIC in ns", **({"origin": "unix-epoch"} if meta.absolute else {})},
        {"type": "data-stream-class", "id": STREAM_ID, "default-clock-class-id": meta.clock_name,
         "packet-context-field-class": context, "event-record-header-field-class": event_header},
    ]
    fragments += [event_fragment(cls) for cls in schema.CATALOGUE]
    return "".join(RECORD_SEPARATOR + json.dumps(f, separators=(",", ":")) + "\n" for f in fragments)
