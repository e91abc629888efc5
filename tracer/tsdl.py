"""TSDL (CTF 1.8 metadata) for dfcompass traces, generated from the event catalogue.

Written to satisfy both babeltrace2 and Trace Compass (see docs/trace-format.md):
the ``/* CTF 1.8 */`` first line, exactly one clock at 1 GHz with ``freq`` before
``offset_s``, decimal literals only, a 64-bit timestamp in every event header, and an
``env`` without ``domain`` so Trace Compass opens the trace as a generic CTF trace.
"""

from __future__ import annotations

import struct
import uuid as uuid_mod
from dataclasses import dataclass, field

from tracer import schema

CTF_MAGIC = 0xC1FC1FC1
STREAM_ID = 0

# Packet header: magic, uuid, stream_id. Packet context: 5 x u64.
PACKET_HEADER = struct.Struct("<I16sI")
PACKET_CONTEXT = struct.Struct("<QQQQQ")  # ts_begin, ts_end, content_size, packet_size, events_discarded
PACKET_PREAMBLE_SIZE = PACKET_HEADER.size + PACKET_CONTEXT.size

# Keys we write ourselves, plus `domain`, which makes Trace Compass pick an LTTng trace type.
RESERVED_ENV_KEYS = frozenset({"tracer_name", "tracer_major", "tracer_minor", "dfcompass_schema_major",
                               "dfcompass_schema_minor", "hostname", "domain"})

_TYPEALIASES = """\
typealias integer { size = 8; align = 8; signed = false; } := uint8_t;
typealias integer { size = 16; align = 8; signed = false; } := uint16_t;
typealias integer { size = 32; align = 8; signed = false; } := uint32_t;
typealias integer { size = 64; align = 8; signed = false; } := uint64_t;
typealias integer { size = 64; align = 8; signed = true; } := int64_t;
typealias integer { size = 64; align = 8; signed = false; map = clock.{clock}.value; } := uint64_clock_t;
"""


def _tsdl_string(value: str) -> str:
    """A TSDL string literal: ASCII only, quotes and backslashes escaped."""
    ascii_text = value.encode("ascii", "backslashreplace").decode("ascii")
    return '"' + ascii_text.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass(frozen=True)
class TraceMeta:
    """What a trace's metadata says besides the catalogue."""

    trace_uuid: uuid_mod.UUID
    clock_offset_ns: int  # wall time minus clock time, >= 0
    clock_name: str = "monotonic"
    hostname: str = ""
    # Whether offset + clock value is wall time (ns since the Unix epoch). babeltrace2 merges
    # traces of one job only when their clocks are all absolute (or share one UUID).
    absolute: bool = True
    env: dict[str, str | int] = field(default_factory=dict)


def checked_env(meta: TraceMeta) -> dict[str, str | int]:
    """The trace's environment: ours, then the caller's keys (identifiers, none of ours)."""
    major, minor = schema.SCHEMA_VERSION
    for key in meta.env:
        if not key.isidentifier() or not key.isascii():
            raise ValueError(f"env key {key!r} is not a TSDL identifier")
        if key in RESERVED_ENV_KEYS:
            raise ValueError(f"env key {key!r} is reserved (dfcompass writes it, or Trace Compass would "
                             "stop opening the trace as generic CTF)")
    return {
        "tracer_name": schema.TRACER_NAME,
        "tracer_major": major,
        "tracer_minor": minor,
        "dfcompass_schema_major": major,
        "dfcompass_schema_minor": minor,
        "hostname": meta.hostname,
        **meta.env,
    }


def render_metadata(meta: TraceMeta) -> str:
    if meta.clock_offset_ns < 0:
        raise ValueError("the clock offset must not be negative (babeltrace2 rejects it)")
    offset_s, offset_ns = divmod(meta.clock_offset_ns, 1_000_000_000)
    env = checked_env(meta)
    env_lines = "".join(
        f"\t{key} = {value if isinstance(value, int) else _tsdl_string(value)};\n" for key, value in env.items()
    )
    parts = [
        "/* CTF 1.8 */\n\n",
        _TYPEALIASES.replace("{clock}", meta.clock_name),
        "\ntrace {\n\tmajor = 1;\n\tminor = 8;\n",
        f'\tuuid = "{meta.trace_uuid}";\n\tbyte_order = le;\n',
        "\tpacket.header := struct {\n\t\tuint32_t magic;\n\t\tuint8_t uuid[16];\n\t\tuint32_t stream_id;\n\t};\n};\n\n",
        f"env {{\n{env_lines}}};\n\n",
        f"clock {{\n\tname = {meta.clock_name};\n\tuuid = \"{meta.trace_uuid}\";\n",
        '\tdescription = "CLOCK_MONOTONIC in ns";\n',
        # freq before offset_s: Trace Compass scales offset_s with the freq it has seen so far.
        f"\tfreq = 1000000000;\n\tprecision = 1;\n\toffset_s = {offset_s};\n\toffset = {offset_ns};\n",
        f"\tabsolute = {'true' if meta.absolute else 'false'};\n}};\n\n",
        f"stream {{\n\tid = {STREAM_ID};\n",
        "\tevent.header := struct {\n\t\tuint16_t id;\n\t\tuint64_clock_t timestamp;\n\t};\n",
        "\tpacket.context := struct {\n\t\tuint64_clock_t timestamp_begin;\n\t\tuint64_clock_t timestamp_end;\n"
        "\t\tuint64_t content_size;\n\t\tuint64_t packet_size;\n\t\tuint64_t events_discarded;\n\t};\n};\n",
    ]
    parts += ["\n" + event_block(cls) for cls in schema.CATALOGUE]
    return "".join(parts)


def event_block(cls: schema.EventClass) -> str:
    """The TSDL `event` declaration of one catalogue class."""
    fields = "".join(f"\t\t{schema.FIELD_TYPES[f.type][2]} {f.name};\n" for f in cls.fields)
    return (f'event {{\n\tname = "{cls.name}";\n\tid = {cls.id};\n\tstream_id = {STREAM_ID};\n'
            f"\tfields := struct {{\n{fields}\t}};\n}};\n")
