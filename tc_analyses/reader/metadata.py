"""Just enough TSDL parsing to recognise dfcompass traces and check them against the catalogue.

Arbitrary CTF goes through :mod:`tc_analyses.reader.any_ctf` (our CTF 1.8 reader, else
babeltrace2); this module reads the plain-text metadata our writer emits: env, clock and the event
id/name table.
"""

from __future__ import annotations

import json
import re
import struct
import uuid as uuid_mod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tc_analyses.errors import SchemaVersionError, TraceError
from tracer import schema
from tracer.bounded_io import METADATA_LIMIT, read_bounded

_PACKETIZED_MAGIC = b"\x57\x1d\xd1\x75"  # 0x75D11D57, little-endian
_ENV_BLOCK = re.compile(r"\benv\s*\{(.*?)\};", re.S)
_ENV_ITEM = re.compile(r'(?<!\w)(\w+)\s*=\s*("(?:[^"\\]|\\.)*"|-?\d+)\s*;')  # (?<!\w): linear on long words
_CLOCK_BLOCK = re.compile(r"\bclock\s*\{(.*?)\};", re.S)
_CLOCK_ITEM = re.compile(r"(?<!\w)(\w+)\s*=\s*(\d+)\s*;")
_TRACE_UUID = re.compile(r'\btrace\s*\{[^}]*?uuid\s*=\s*"([0-9a-fA-F-]{36})"', re.S)


@dataclass(frozen=True)
class Metadata:
    path: Path
    text: str
    env: dict[str, str | int] = field(default_factory=dict)
    clock_offset_ns: int = 0
    clock_freq: int = 1_000_000_000
    uuid: str = ""
    events: dict[int, str] = field(default_factory=dict)  # id -> name
    ctf_version: str = "1.8"  # "2": JSON fragments (the text is then the JSON text sequence)

    @property
    def is_dfcompass(self) -> bool:
        return self.env.get("tracer_name") == schema.TRACER_NAME


def _unquote(token: str) -> str | int:
    if token.startswith('"'):
        return re.sub(r"\\(.)", r"\1", token[1:-1])
    return int(token)


_METADATA_PACKET = struct.Struct("<I16sIIIBBBBB")  # magic, uuid, checksum, content/packet size (bits), ...


def _depacketize(path: Path, raw: bytes) -> str:
    """The TSDL text of packetized metadata (as LTTng writes it)."""
    parts, offset = [], 0
    while offset + _METADATA_PACKET.size <= len(raw):
        magic, _, _, content_bits, packet_bits, *_ = _METADATA_PACKET.unpack_from(raw, offset)
        if magic != 0x75D11D57 or packet_bits < content_bits or packet_bits % 8 or packet_bits == 0:
            raise TraceError(path, "bad metadata packet header", offset)
        parts.append(raw[offset + _METADATA_PACKET.size : offset + content_bits // 8])
        offset += packet_bits // 8
    return b"".join(parts).decode("utf-8", "replace")


def find_traces(root: str | Path) -> list[Path]:
    """Directories at or below `root` that hold a CTF 'metadata' file."""
    root = Path(root)
    if (root / "metadata").is_file():
        return [root]
    return sorted(p.parent for p in root.rglob("metadata") if p.is_file()) if root.is_dir() else []


def is_dfcompass_trace(path: str | Path) -> bool:
    """Whether `path` is one dfcompass trace directory (what the fast reader reads)."""
    traces = find_traces(path)
    return len(traces) == 1 and traces[0] == Path(path) and read_metadata(path).is_dfcompass


_GZIP_MAGIC = b"\x1f\x8b"


def not_a_directory(path: Path) -> str:
    """What a command given a file where it wants a trace directory says; for a JSON file (a
    Kineto trace, plain or gzipped), how to make it a trace."""
    try:
        with open(path, "rb") as f:
            head = f.read(2)
    except OSError:
        head = b""
    json_like = path.name.endswith((".json", ".json.gz")) or head[:1] in (b"{", b"[") or head == _GZIP_MAGIC
    if path.is_file() and json_like:
        return (f"a file, not a trace directory; if it is a PyTorch profiler (Kineto) trace, import it first: "
                f"dfcompass import-kineto {path} -o DIR")
    return "not a directory (a CTF trace is a directory holding a 'metadata' file)"


def read_metadata(trace_dir: str | Path) -> Metadata:
    """Parse `trace_dir`/metadata. Raises TraceError when it is missing or not CTF text."""
    path = Path(trace_dir) / "metadata"
    if not Path(trace_dir).is_dir():
        raise TraceError(trace_dir, not_a_directory(Path(trace_dir)))
    try:
        raw = read_bounded(path, METADATA_LIMIT, "CTF metadata")
    except FileNotFoundError:
        raise TraceError(path, "missing metadata file: this is not a CTF trace directory") from None
    except OSError as exc:
        raise TraceError(path, f"cannot read metadata: {exc.strerror}") from None
    if raw[:1] == JSON_SEQUENCE_START:
        return _json_metadata(path, raw)
    if raw[:4] == _PACKETIZED_MAGIC:
        text = _depacketize(path, raw)  # CTF needs the '/* CTF' line in text metadata only
    else:
        text = raw.decode("utf-8", "replace")
        if not text.startswith("/* CTF"):
            raise TraceError(path, "metadata does not start with '/* CTF 1.8 */': not CTF text metadata", offset=0)
    env: dict[str, str | int] = {}
    env_match = _ENV_BLOCK.search(text)
    if env_match:
        env = {key: _unquote(value) for key, value in _ENV_ITEM.findall(env_match.group(1))}
    offset_ns, freq = 0, 1_000_000_000
    clock_match = _CLOCK_BLOCK.search(text)
    if clock_match:
        items = dict(_CLOCK_ITEM.findall(clock_match.group(1)))
        freq = int(items.get("freq", freq))
        if not 0 < freq <= 10**15:
            raise TraceError(path, f"clock frequency {freq} Hz is out of range (1 Hz .. 1 PHz)")
        offset_ns = int(items.get("offset_s", 0)) * 1_000_000_000 + int(items.get("offset", 0)) * 1_000_000_000 // freq
    events: dict[int, str] = {}
    for block in re.findall(r"\bevent\s*\{(.*?)\n\};", text, re.S):
        name = re.search(r'\bname\s*=\s*"((?:[^"\\]|\\.)*)"', block)
        ident = re.search(r"\bid\s*=\s*(\d+)\s*;", block)
        if name and ident:
            events[int(ident.group(1))] = name.group(1)
    uuid_match = _TRACE_UUID.search(text)
    return Metadata(path, text, env, offset_ns, freq, uuid_match.group(1) if uuid_match else "", events)


JSON_SEQUENCE_START = b"\x1e"  # CTF 2 metadata: a JSON text sequence (RFC 7464)


def json_fragments(path: Path, raw: bytes) -> list[dict[str, Any]]:
    """The fragments of CTF 2 metadata; TraceError naming the file when one is not a JSON object."""
    fragments = []
    for index, text in enumerate(raw.split(JSON_SEQUENCE_START)[1:]):
        try:
            fragment = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise TraceError(path, f"CTF 2 metadata fragment {index}: not JSON ({' '.join(str(exc).split())[:120]})") from None
        if not isinstance(fragment, dict) or not isinstance(fragment.get("type"), str):
            raise TraceError(path, f"CTF 2 metadata fragment {index}: not an object with a 'type'")
        fragments.append(fragment)
    return fragments


def _json_metadata(path: Path, raw: bytes) -> Metadata:
    """What :func:`read_metadata` gives, from CTF 2 metadata: the environment, the (first) clock,
    the UUID of the preamble and the event record classes' ids and names."""
    env: dict[str, str | int] = {}
    offset_ns, freq, uuid, events = 0, 1_000_000_000, "", {}
    clock_seen = False
    for fragment in json_fragments(path, raw):
        kind = fragment["type"]
        if kind == "preamble" and fragment.get("version") != 2:
            raise TraceError(path, f"CTF 2 metadata of version {fragment.get('version')!r}: this reader reads version 2")
        if kind == "preamble" and isinstance(fragment.get("uuid"), list) and len(fragment["uuid"]) == 16:
            try:
                uuid = str(uuid_mod.UUID(bytes=bytes(fragment["uuid"])))
            except (ValueError, TypeError):
                raise TraceError(path, "the preamble's uuid is not 16 bytes") from None
        elif kind == "trace-class" and isinstance(fragment.get("environment"), dict):
            env = {k: v for k, v in fragment["environment"].items() if isinstance(v, (str, int)) and not isinstance(v, bool)}
        elif kind == "clock-class" and not clock_seen:
            clock_seen = True
            freq = fragment.get("frequency", freq)
            origin = fragment.get("offset-from-origin", {})
            seconds, cycles = (origin.get("seconds", 0), origin.get("cycles", 0)) if isinstance(origin, dict) else (0, 0)
            if not all(isinstance(v, int) and not isinstance(v, bool) for v in (freq, seconds, cycles)) or not 0 < freq <= 10**15:
                raise TraceError(path, "the clock class's frequency or offset is not a number in range")
            offset_ns = seconds * 1_000_000_000 + cycles * 1_000_000_000 // freq
        elif kind == "event-record-class" and isinstance(fragment.get("id"), int) and isinstance(fragment.get("name"), str):
            events[fragment["id"]] = fragment["name"]
    return Metadata(path, raw.decode("utf-8", "replace"), env, offset_ns, freq, uuid, events, ctf_version="2")


def check_dfcompass(meta: Metadata) -> None:
    """Refuse a dfcompass trace whose catalogue differs from ours in a way we cannot read."""
    major = meta.env.get("dfcompass_schema_major")
    ours_major, ours_minor = schema.SCHEMA_VERSION
    if major != ours_major:
        raise SchemaVersionError(
            meta.path, f"written with dfcompass schema {major}.{meta.env.get('dfcompass_schema_minor')}, "
            f"this dfcompass reads schema {ours_major}.x (it has {ours_major}.{ours_minor})"
        )
    for event_id, name in meta.events.items():
        cls = schema.BY_ID.get(event_id)
        if cls is None or cls.name != name:
            raise SchemaVersionError(meta.path, f"event id {event_id} is {name!r} in the trace but "
                                     f"{cls.name if cls else 'unknown'!r} in this dfcompass's catalogue")


def read_dfcompass_metadata(trace_dir: str | Path) -> tuple[Metadata, bytes | None]:
    """Metadata of a dfcompass trace, checked against our catalogue, plus its packet uuid bytes."""
    meta = read_metadata(trace_dir)
    if not meta.is_dfcompass:
        raise TraceError(trace_dir, "not a dfcompass trace (the general CTF reader reads other CTF traces)")
    check_dfcompass(meta)
    return meta, bytes.fromhex(meta.uuid.replace("-", "")) if meta.uuid else None
