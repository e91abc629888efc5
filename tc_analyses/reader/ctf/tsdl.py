"""The TSDL of CTF 1.8 metadata (what LTTng, barectf and dfcompass write) parsed into field classes.

A tokenizer (one compiled regular expression, linear) and a recursive-descent parser over the
grammar of the CTF 1.8 specification's declarations: ``typealias``, ``trace``, ``env``, ``clock``,
``stream``, ``event`` (``callsite`` is read and left), and the type specifiers ``integer``,
``floating_point``, ``string``, ``enum``, ``struct``, ``variant`` with arrays and sequences.
What it does not take raises :class:`Unsupported`; a syntax error is a ValueError with the line.
"""

from __future__ import annotations

import re
import uuid as uuid_mod
from dataclasses import replace
from typing import Any

from tc_analyses.reader.ctf.classes import (Array, Clock, Enum, EventClass, FieldClass, Float, Int, Sequence, StreamClass,
                                            String, Struct, TraceClass, Unsupported, Variant, plain_name)

_TOKEN = re.compile(r"""
    (?P<space>\s+|/\*.*?\*/|//[^\n]*)
  | (?P<string>"(?:[^"\\]|\\.)*")
  | (?P<number>0[xX][0-9a-fA-F]+|\d+)
  | (?P<ident>[A-Za-z_][A-Za-z_0-9]*)
  | (?P<punct>:=|\.\.\.|[{}()\[\];=:,<>.+\-])
""", re.X | re.S)
_KEYWORDS = {"typealias", "typedef", "trace", "env", "clock", "stream", "event", "callsite", "integer",
             "floating_point", "string", "enum", "struct", "variant", "align"}
_LITTLE, _BIG = {"le", "little_endian"}, {"be", "big_endian", "network"}


def tokens(text: str) -> list[tuple[str, str, int]]:
    """(kind, text, line) of each token; a character no token starts with is a ValueError."""
    out, at, line = [], 0, 1
    while at < len(text):
        match = _TOKEN.match(text, at)
        if match is None:
            raise ValueError(f"line {line}: unexpected character {text[at]!r}")
        kind = match.lastgroup or ""
        if kind != "space":
            out.append((kind, match.group(), line))
        line += match.group().count("\n")
        at = match.end()
    return out


class Parser:
    def __init__(self, text: str) -> None:
        self.toks = tokens(text)
        self.at = 0
        self.aliases: dict[str, FieldClass] = {}
        self.named: dict[tuple[str, str], FieldClass] = {}  # (struct|enum|variant, name) -> class
        self.trace = TraceClass()
        self.env: dict[str, str | int] = {}

    # ------------------------------------------------------------------ tokens
    def peek(self, ahead: int = 0) -> str:
        at = self.at + ahead
        return self.toks[at][1] if at < len(self.toks) else ""

    def kind(self, ahead: int = 0) -> str:
        at = self.at + ahead
        return self.toks[at][0] if at < len(self.toks) else ""

    def take(self, expected: str | None = None) -> str:
        if self.at >= len(self.toks):
            raise ValueError("unexpected end of metadata" + (f" (expected {expected!r})" if expected else ""))
        kind, text, line = self.toks[self.at]
        if expected is not None and text != expected:
            raise ValueError(f"line {line}: expected {expected!r}, found {text!r}")
        self.at += 1
        return text

    def ident(self) -> str:
        kind, text, line = self.toks[self.at] if self.at < len(self.toks) else ("", "", 0)
        if kind != "ident":
            raise ValueError(f"line {line}: expected a name, found {text!r}")
        self.at += 1
        return text

    def dotted(self) -> str:
        parts = [self.ident()]
        while self.peek() == ".":
            self.take(".")
            parts.append(self.ident())
        return ".".join(parts)

    def value(self) -> str | int:
        """An attribute's value: a number (maybe negative), a string, or a dotted name."""
        sign = -1 if self.peek() == "-" else 1
        if self.peek() in "+-" and self.peek():
            self.take()
        kind, text, _ = self.toks[self.at] if self.at < len(self.toks) else ("", "", 0)
        if kind == "number":
            self.at += 1
            if text[:2] in ("0x", "0X"):
                return sign * int(text, 16)
            return sign * int(text, 8 if len(text) > 1 and text[0] == "0" else 10)
        if kind == "string":
            self.at += 1
            return re.sub(r"\\(.)", r"\1", text[1:-1])
        return self.dotted()

    # ------------------------------------------------------------------ top level
    def parse(self) -> tuple[TraceClass, dict[str, str | int]]:
        while self.at < len(self.toks):
            word = self.peek()
            if word == "typealias":
                self.take()
                target = self.type_spec()
                self.take(":=")
                self.aliases[self.words(";")] = target
            elif word == "typedef":
                self.take()
                target = self.type_spec()
                self.aliases[self.words(";")] = target
            elif word in ("trace", "env", "clock", "stream", "event", "callsite"):
                self.take()
                self.block(word)
            else:
                self.type_spec()  # a named struct, enum or variant declared on its own
            self.take(";")
        return self.trace, self.env

    def words(self, end: str) -> str:
        names = []
        while self.peek() != end:
            names.append(self.ident())
        return " ".join(names)

    def block(self, kind: str) -> None:
        values: dict[str, Any] = {}
        self.take("{")
        while self.peek() != "}":
            name = self.dotted()
            if self.peek() == ":=":
                self.take()
                values[name] = self.type_spec()
            else:
                self.take("=")
                values[name] = self.value()
            self.take(";")
        self.take("}")
        if kind == "trace":
            self.trace.big_endian = values.get("byte_order") in _BIG
            if "uuid" in values:
                self.trace.uuid = uuid_mod.UUID(str(values["uuid"])).bytes
            self.trace.packet_header = self.as_struct(values.get("packet.header"))
        elif kind == "env":
            self.env.update(values)
        elif kind == "clock":
            name = str(values.get("name", ""))
            freq = int(values.get("freq", 1_000_000_000))
            if freq <= 0:
                raise ValueError(f"clock {name}: frequency {freq}")
            self.trace.clocks[name] = Clock(name, freq, int(values.get("offset_s", 0)), int(values.get("offset", 0)))
        elif kind == "stream":
            stream = self.trace.streams.setdefault(int(values.get("id", 0)), StreamClass(int(values.get("id", 0))))
            stream.packet_context = self.as_struct(values.get("packet.context"))
            stream.event_header = self.as_struct(values.get("event.header"))
            stream.event_context = self.as_struct(values.get("event.context"))
        elif kind == "event":
            stream_id = int(values.get("stream_id", 0))
            stream = self.trace.streams.setdefault(stream_id, StreamClass(stream_id))
            event_id = int(values.get("id", 0))
            stream.events[event_id] = EventClass(event_id, str(values.get("name", "")), stream_id,
                                                 self.as_struct(values.get("context")), self.as_struct(values.get("fields")))

    @staticmethod
    def as_struct(found: Any) -> Struct | None:
        if found is None or isinstance(found, Struct):
            return found
        raise Unsupported(f"a scope that is not a structure ({type(found).__name__})")

    # ------------------------------------------------------------------ types
    def type_spec(self) -> FieldClass:
        word = self.peek()
        if word == "integer":
            self.take()
            return self.integer(self.attributes())
        if word == "floating_point":
            self.take()
            attrs = self.attributes()
            exp, mant = int(attrs.get("exp_dig", 8)), int(attrs.get("mant_dig", 24))
            if (exp, mant) not in ((8, 24), (11, 53)):
                raise Unsupported(f"a {exp + mant}-bit floating point number")
            return Float(exp, mant, int(attrs.get("align", 8)), self.big_endian(attrs))
        if word == "string":
            self.take()
            if self.peek() == "{":
                self.attributes()
            return String()
        if word == "struct":
            return self.struct()
        if word == "variant":
            return self.variant()
        if word == "enum":
            return self.enum()
        name = self.words_of_alias()
        if name not in self.aliases:
            raise ValueError(f"unknown type {name!r}")
        return self.aliases[name]

    def words_of_alias(self) -> str:
        """The longest run of names that is a known alias (``unsigned long``), or a single name."""
        words: list[str] = []
        while self.kind(len(words)) == "ident":
            words.append(self.toks[self.at + len(words)][1])
        for count in range(len(words), 0, -1):
            if " ".join(words[:count]) in self.aliases:
                self.at += count
                return " ".join(words[:count])
        return self.ident()  # unknown: named in the caller's error

    def attributes(self) -> dict[str, Any]:
        attrs: dict[str, Any] = {}
        self.take("{")
        while self.peek() != "}":
            name = self.ident()
            self.take("=")
            attrs[name] = self.value()
            self.take(";")
        self.take("}")
        return attrs

    def big_endian(self, attrs: dict[str, Any]) -> bool:
        order = attrs.get("byte_order", "native")
        return order in _BIG or (order not in _LITTLE and self.trace.big_endian)

    def integer(self, attrs: dict[str, Any]) -> Int:
        size = int(attrs["size"])
        if not 0 < size <= 64:
            raise Unsupported(f"a {size}-bit integer")
        signed = str(attrs.get("signed", "false")).lower() in ("true", "1")
        clock = attrs.get("map")
        clock_name = clock.split(".")[1] if isinstance(clock, str) and clock.startswith("clock.") else None
        return Int(size, int(attrs.get("align", 8 if size % 8 == 0 else 1)), signed, self.big_endian(attrs),
                   str(attrs.get("encoding", "none")).lower() in ("utf8", "ascii"), clock_name)

    def struct(self) -> Struct:
        self.take("struct")
        name = self.ident() if self.kind() == "ident" and self.peek() != "align" else None
        if self.peek() != "{":
            known = self.lookup("struct", name)
            assert isinstance(known, Struct)
            return known
        found = Struct(tuple(self.declarations()))
        if self.peek() == "align":
            self.take()
            self.take("(")
            found = Struct(found.fields, int(self.value()))
            self.take(")")
        if name:
            self.named[("struct", name)] = found
        return found

    def variant(self) -> Variant:
        self.take("variant")
        name = self.ident() if self.kind() == "ident" else None
        tag = ""
        if self.peek() == "<":
            self.take()
            tag = self.dotted()
            self.take(">")
        if self.peek() != "{":
            known = self.lookup("variant", name)
            assert isinstance(known, Variant)
            return Variant(tag or known.tag, known.options)
        found = Variant(tag, tuple(self.declarations()))
        if name:
            self.named[("variant", name)] = found
        return found

    def enum(self) -> Enum:
        self.take("enum")
        name = self.ident() if self.kind() == "ident" else None
        container: FieldClass | None = None
        if self.peek() == ":":
            self.take()
            container = self.type_spec()
        if self.peek() != "{":
            known = self.lookup("enum", name)
            assert isinstance(known, Enum)
            return known
        container = container if container is not None else self.aliases.get("int")
        if not isinstance(container, Int):
            raise Unsupported("an enumeration whose container is not an integer")
        labels, following = [], 0
        self.take("{")
        while self.peek() != "}":
            label = self.value() if self.kind() == "string" else self.ident()
            low = high = following
            if self.peek() == "=":
                self.take()
                low = high = int(self.value())
                if self.peek() == "...":
                    self.take()
                    high = int(self.value())
            labels.append((str(label), low, high))
            following = high + 1
            if self.peek() == ",":
                self.take()
        self.take("}")
        found = Enum(container, tuple(labels))
        if name:
            self.named[("enum", name)] = found
        return found

    def lookup(self, kind: str, name: str | None) -> FieldClass:
        found = self.named.get((kind, name or ""))
        if found is None:
            raise ValueError(f"unknown {kind} {name!r}")
        return found

    def declarations(self) -> list[tuple[str, FieldClass]]:
        """The fields of a struct or variant body: `type name[len]...;`, in order."""
        out: list[tuple[str, FieldClass]] = []
        self.take("{")
        while self.peek() != "}":
            if self.peek() in ("typealias", "typedef"):
                raise Unsupported("a type alias inside a structure")
            kind = self.peek()
            if kind in ("integer", "floating_point", "string", "struct", "variant", "enum"):
                declared = self.type_spec()
                name = self.ident()
            else:  # an alias: its words, then the field's name
                words = []
                while self.kind() == "ident" and self.peek(1) not in (";", "["):
                    words.append(self.ident())
                words_text = " ".join(words)
                if not words:
                    kind_, text, line = self.toks[self.at] if self.at < len(self.toks) else ("", "end", 0)
                    raise ValueError(f"line {line}: expected a field's type, found {text!r}")
                if words_text not in self.aliases:
                    raise ValueError(f"unknown type {words_text!r}")
                declared, name = self.aliases[words_text], self.ident()
            lengths = []
            while self.peek() == "[":
                self.take()
                lengths.append(self.value())
                self.take("]")
            for length in reversed(lengths):  # a[2][3]: two arrays of three
                declared = Array(declared, length) if isinstance(length, int) else Sequence(declared, str(length))
            out.append((plain_name(name), declared))
            self.take(";")
        self.take("}")
        return out


# CTF 1.8 gives these fields their meaning by name (CTF 2 by role): the reader reads roles
_PACKET_HEADER_ROLES = {"magic": "packet-magic-number", "uuid": "metadata-stream-uuid",
                        "stream_id": "data-stream-class-id", "stream_instance_id": "data-stream-id"}
_PACKET_CONTEXT_ROLES = {"timestamp_begin": "default-clock-timestamp",
                         "timestamp_end": "packet-end-default-clock-timestamp", "content_size": "packet-content-length",
                         "packet_size": "packet-total-length", "events_discarded": "discarded-event-record-counter-snapshot",
                         "packet_seq_num": "packet-sequence-number"}
_EVENT_HEADER_ROLES = {"id": "event-record-class-id", "timestamp": "default-clock-timestamp"}


def with_roles(cls: Any, roles: dict[str, str], name: str = "") -> Any:
    """`cls` with the role its name gives each integer in it (at any depth, as babeltrace2 does)."""
    if isinstance(cls, Int):
        return replace(cls, role=roles[name]) if name in roles else cls
    if isinstance(cls, Enum):
        return replace(cls, container=with_roles(cls.container, roles, name))
    if isinstance(cls, Struct):
        return replace(cls, fields=tuple((n, with_roles(f, roles, n)) for n, f in cls.fields))
    if isinstance(cls, Variant):
        return replace(cls, options=tuple((n, with_roles(f, roles, n)) for n, f in cls.options))
    return cls


def parse_tsdl(text: str) -> tuple[TraceClass, dict[str, str | int]]:
    """The trace's declarations and its env of TSDL `text`; ValueError on a syntax error,
    :class:`Unsupported` on what this reader does not take."""
    trace, env = Parser(text).parse()
    trace.packet_header = with_roles(trace.packet_header, _PACKET_HEADER_ROLES)
    for stream in trace.streams.values():
        stream.packet_context = with_roles(stream.packet_context, _PACKET_CONTEXT_ROLES)
        stream.event_header = with_roles(stream.event_header, _EVENT_HEADER_ROLES)
    return trace, env
