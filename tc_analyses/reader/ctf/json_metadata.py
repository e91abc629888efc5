"""CTF 2 metadata (a JSON text sequence of fragments) parsed into the field classes the CTF 1.8
parser makes (:mod:`.classes`), so one decoder reads both.

Fragments: ``preamble`` (version 2, the UUID), ``field-class-alias``, ``trace-class`` (the packet
header, the environment), ``clock-class``, ``data-stream-class`` (packet context, event record
header and common context, default clock), ``event-record-class`` (specific context, payload).
Field classes: fixed-length bit arrays, bit maps, booleans, integers (with mappings: enumerations)
and floating point numbers; variable-length integers; null-terminated, static- and dynamic-length
strings; static- and dynamic-length BLOBs and arrays; structures; optionals; variants. Roles mark
what the reader needs (magic, stream class id, sizes, clock timestamps, discarded counts, event
record class id). Attributes are kept on the classes, out of the records (they describe, not
decode); declared extensions are refused, as a consumer that does not know one must not read the
data. A field class this reader does not know is :class:`Unsupported`, naming the fragment.
"""

from __future__ import annotations

from typing import Any

from tc_analyses.reader.ctf.classes import (Array, Blob, Clock, Enum, EventClass, FieldClass, Float, Int, Location,
                                            Optional, Sequence, StreamClass, String, Struct, TraceClass, Unsupported,
                                            VarInt, Variant)

_CLOCKED_ROLES = {"default-clock-timestamp", "packet-end-default-clock-timestamp"}
_KINDS = frozenset({  # the field classes of CTF 2.0 (and an early draft's enumeration names)
    "fixed-length-bit-array", "fixed-length-bit-map", "fixed-length-boolean", "fixed-length-unsigned-integer",
    "fixed-length-signed-integer", "fixed-length-unsigned-enumeration", "fixed-length-signed-enumeration",
    "fixed-length-floating-point-number", "variable-length-unsigned-integer", "variable-length-signed-integer",
    "null-terminated-string", "static-length-string", "dynamic-length-string", "static-length-blob",
    "dynamic-length-blob", "structure", "static-length-array", "dynamic-length-array", "optional", "variant"})


class _Builder:
    def __init__(self) -> None:
        self.aliases: dict[str, Any] = {}
        self.built: dict[tuple[str, str | None], FieldClass] = {}  # each alias made once (per clock)
        self.clock: str | None = None  # the default clock of the data stream class being read
        self.where = ""  # the fragment being read, for errors

    def field_class(self, spec: Any) -> FieldClass:
        if isinstance(spec, str):
            if spec not in self.aliases:
                raise ValueError(f"{self.where}: unknown field class alias {spec!r}")
            key = (spec, self.clock)
            if key not in self.built:  # an alias used N times is one class, not N copies
                self.built[key] = self.field_class(self.aliases.pop(spec))
                self.aliases[spec] = None  # being built: an alias that names itself is refused
            return self.built[key]
        if not isinstance(spec, dict):
            raise ValueError(f"{self.where}: a field class is an object or an alias name, not {type(spec).__name__}")
        kind = spec.get("type")
        if kind not in _KINDS:
            raise Unsupported(f"field class {kind!r} (in {self.where})")
        found: FieldClass = getattr(self, "_" + str(kind).replace("-", "_"))(spec)
        return found

    # ----------------------------------------------------------------- fixed and variable length
    def _integer(self, spec: dict[str, Any], signed: bool, boolean: bool = False) -> Int | VarInt | Enum:
        length, roles = _int(spec, "length"), spec.get("roles", [])
        if not 0 < length <= 64:
            raise Unsupported(f"a {length}-bit integer (in {self.where})")
        role = next((r for r in roles if isinstance(r, str)), None)
        clocked = self.clock if role in _CLOCKED_ROLES else None
        big = spec.get("byte-order", "little-endian") == "big-endian"
        if spec.get("bit-order", "last-to-first" if big else "first-to-last") != ("last-to-first" if big else "first-to-last"):
            raise Unsupported(f"a bit order other than its byte order's (in {self.where})")
        found = Int(length, _int(spec, "alignment", 1), signed, big, clock=clocked, role=role, boolean=boolean)
        return self._mapped(found, spec)

    def _mapped(self, container: Int | VarInt, spec: dict[str, Any]) -> Int | VarInt | Enum:
        mappings = spec.get("mappings")
        if not isinstance(mappings, dict) or not mappings:
            return container
        labels = tuple((str(label), _int_of(low), _int_of(high)) for label, ranges in mappings.items()
                       for low, high in ranges)
        return Enum(container, labels)

    def _fixed_length_unsigned_integer(self, spec: dict[str, Any]) -> FieldClass:
        return self._integer(spec, False)

    def _fixed_length_signed_integer(self, spec: dict[str, Any]) -> FieldClass:
        return self._integer(spec, True)

    def _fixed_length_unsigned_enumeration(self, spec: dict[str, Any]) -> FieldClass:  # an early draft's name
        return self._integer(spec, False)

    def _fixed_length_signed_enumeration(self, spec: dict[str, Any]) -> FieldClass:
        return self._integer(spec, True)

    def _fixed_length_bit_array(self, spec: dict[str, Any]) -> FieldClass:
        return self._integer(spec, False)

    def _fixed_length_bit_map(self, spec: dict[str, Any]) -> FieldClass:
        return self._integer({k: v for k, v in spec.items() if k != "mappings"}, False)

    def _fixed_length_boolean(self, spec: dict[str, Any]) -> FieldClass:
        return self._integer(spec, False, boolean=True)

    def _fixed_length_floating_point_number(self, spec: dict[str, Any]) -> FieldClass:
        length = _int(spec, "length")
        if length not in (32, 64):
            raise Unsupported(f"a {length}-bit floating point number (in {self.where})")
        exp, mant = (8, 24) if length == 32 else (11, 53)
        return Float(exp, mant, _int(spec, "alignment", 1), spec.get("byte-order") == "big-endian")

    def _variable_length_unsigned_integer(self, spec: dict[str, Any]) -> FieldClass:
        return self._variable(spec, False)

    def _variable_length_signed_integer(self, spec: dict[str, Any]) -> FieldClass:
        return self._variable(spec, True)

    def _variable(self, spec: dict[str, Any], signed: bool) -> FieldClass:
        role = next((r for r in spec.get("roles", []) if isinstance(r, str)), None)
        return self._mapped(VarInt(signed, self.clock if role in _CLOCKED_ROLES else None, role), spec)

    # ----------------------------------------------------------------- strings and BLOBs
    def _null_terminated_string(self, spec: dict[str, Any]) -> FieldClass:
        return String(None, str(spec.get("encoding", "utf-8")))

    def _static_length_string(self, spec: dict[str, Any]) -> FieldClass:
        return String(_int(spec, "length"), str(spec.get("encoding", "utf-8")))

    def _dynamic_length_string(self, spec: dict[str, Any]) -> FieldClass:
        return String(self.location(spec, "length-field-location"), str(spec.get("encoding", "utf-8")))

    def _static_length_blob(self, spec: dict[str, Any]) -> FieldClass:
        roles = spec.get("roles", [])
        return Blob(_int(spec, "length"), "metadata-stream-uuid" if "metadata-stream-uuid" in roles else None)

    def _dynamic_length_blob(self, spec: dict[str, Any]) -> FieldClass:
        return Blob(self.location(spec, "length-field-location"))

    # ----------------------------------------------------------------- compounds
    def _structure(self, spec: dict[str, Any]) -> FieldClass:
        members = spec.get("member-classes", [])
        if not isinstance(members, list):
            raise ValueError(f"{self.where}: member-classes is not a list")
        fields = []
        for member in members:
            if not isinstance(member, dict) or not isinstance(member.get("name"), str):
                raise ValueError(f"{self.where}: a structure member without a name")
            fields.append((member["name"], self.field_class(member.get("field-class"))))
        return Struct(tuple(fields), _int(spec, "minimum-alignment", 1))

    def _static_length_array(self, spec: dict[str, Any]) -> FieldClass:
        return Array(self.field_class(spec.get("element-field-class")), _int(spec, "length"),
                     _int(spec, "minimum-alignment", 1))

    def _dynamic_length_array(self, spec: dict[str, Any]) -> FieldClass:
        return Sequence(self.field_class(spec.get("element-field-class")), self.location(spec, "length-field-location"),
                        _int(spec, "minimum-alignment", 1))

    def _optional(self, spec: dict[str, Any]) -> FieldClass:
        ranges = spec.get("selector-field-ranges")
        return Optional(self.field_class(spec.get("field-class")), self.location(spec, "selector-field-location"),
                        _ranges(ranges) if ranges is not None else None)

    def _variant(self, spec: dict[str, Any]) -> FieldClass:
        options = spec.get("options", [])
        if not isinstance(options, list) or not options:
            raise ValueError(f"{self.where}: a variant without options")
        if not all(isinstance(o, dict) for o in options):
            raise ValueError(f"{self.where}: a variant option is not an object")
        named = tuple((str(o.get("name", i)), self.field_class(o.get("field-class"))) for i, o in enumerate(options))
        return Variant(self.location(spec, "selector-field-location"), named,
                       tuple(_ranges(o.get("selector-field-ranges")) for o in options))

    def location(self, spec: dict[str, Any], key: str) -> Location:
        found = spec.get(key)
        if not isinstance(found, dict) or not isinstance(found.get("path"), list):
            raise ValueError(f"{self.where}: {key} is not a field location")
        origin = found.get("origin")
        return Location(origin if isinstance(origin, str) else None,
                        tuple(None if p is None else str(p) for p in found["path"]))


def _int(spec: dict[str, Any], key: str, default: int | None = None) -> int:
    value = spec.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{spec.get('type')}: {key} is {value!r}, not a natural number")
    return value


def _int_of(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"a range bound {value!r} is not an integer")
    return value


def _ranges(ranges: Any) -> tuple[tuple[int, int], ...]:
    if not isinstance(ranges, list):
        raise ValueError(f"selector ranges {ranges!r} are not a list")
    return tuple((_int_of(low), _int_of(high)) for low, high in ranges)


def parse_json_metadata(fragments: list[dict[str, Any]]) -> tuple[TraceClass, dict[str, Any]]:
    """The trace class and environment of CTF 2 metadata fragments (see the module docstring)."""
    trace, env, build = TraceClass(), {}, _Builder()
    streams: dict[int, dict[str, Any]] = {}
    for index, fragment in enumerate(fragments):
        kind = fragment.get("type")
        build.where = f"fragment {index} ({kind})"
        if kind == "preamble":
            if fragment.get("version") != 2:
                raise ValueError(f"{build.where}: version {fragment.get('version')!r}, this reader reads version 2")
            if isinstance(fragment.get("uuid"), list):
                trace.uuid = bytes(fragment["uuid"])
            if fragment.get("extensions"):  # a consumer that does not know one must not read the streams (5.1)
                raise Unsupported(f"the metadata's extensions ({', '.join(map(str, fragment['extensions']))})")
        elif kind == "field-class-alias":
            build.aliases[str(fragment.get("name"))] = fragment.get("field-class")
        elif kind == "trace-class":
            env = dict(fragment.get("environment") or {})
            trace.attributes = _attributes(fragment)
            if "packet-header-field-class" in fragment:
                trace.packet_header = _struct(build.field_class(fragment["packet-header-field-class"]), build.where)
        elif kind == "clock-class":
            origin = fragment.get("offset-from-origin") or {}
            if not isinstance(origin, dict):
                raise ValueError(f"{build.where}: offset-from-origin is not an object")
            name = str(fragment.get("id", fragment.get("name", "")))
            frequency = _int(fragment, "frequency")
            if frequency == 0:
                raise ValueError(f"{build.where}: a clock of frequency 0")
            trace.clocks[name] = Clock(name, frequency, _int_of(origin.get("seconds", 0)), _int_of(origin.get("cycles", 0)))
        elif kind == "data-stream-class":
            sid = _int(fragment, "id", 0)
            build.clock = _default_clock(fragment)
            stream = trace.streams.setdefault(sid, StreamClass(sid))
            stream.packet_context = _optional_struct(build, fragment, "packet-context-field-class")
            stream.event_header = _optional_struct(build, fragment, "event-record-header-field-class")
            stream.event_context = _optional_struct(build, fragment, "event-record-common-context-field-class")
            streams[sid] = fragment
        elif kind == "event-record-class":
            sid = _int(fragment, "data-stream-class-id", 0)
            if sid not in trace.streams:
                raise ValueError(f"{build.where}: data stream class {sid} is not declared before it")
            build.clock = _default_clock(streams[sid])
            eid = _int(fragment, "id", 0)
            trace.streams[sid].events[eid] = EventClass(
                eid, str(fragment.get("name", "")), sid, _optional_struct(build, fragment, "specific-context-field-class"),
                _optional_struct(build, fragment, "payload-field-class"), _attributes(fragment))
        elif not isinstance(kind, str):
            raise ValueError(f"{build.where}: a fragment without a type")
    return trace, env


def _default_clock(stream: dict[str, Any]) -> str | None:
    """The data stream class's default clock: by id (CTF 2.0), or by name (the draft Trace Compass's
    parser follows, with clock classes named, not identified)."""
    found = stream.get("default-clock-class-id", stream.get("default-clock-class-name"))
    return found if isinstance(found, str) else None


def _attributes(fragment: dict[str, Any]) -> dict[str, Any]:
    """A fragment's attributes (LTTng's log level, an application's own), kept as they are
    (``attributes`` in CTF 2.0; ``user-attributes`` in the drafts before it)."""
    found = fragment.get("attributes", fragment.get("user-attributes"))
    return dict(found) if isinstance(found, dict) else {}


def _optional_struct(build: _Builder, fragment: dict[str, Any], key: str) -> Struct | None:
    return _struct(build.field_class(fragment[key]), build.where) if fragment.get(key) is not None else None


def _struct(found: FieldClass, where: str) -> Struct:
    if not isinstance(found, Struct):
        raise ValueError(f"{where}: a scope's field class is a structure, not {type(found).__name__}")
    return found
