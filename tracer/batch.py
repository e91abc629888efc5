"""One converted profile window, written into a live session's trace."""

from __future__ import annotations

from typing import Any

from tracer import schema
from tracer.session import Session

# Per event class, the positions of its string-id fields (a batch interns the text given there).
_SID_FIELDS = {cls.short: tuple(i for i, f in enumerate(cls.fields) if f.type == "sid") for cls in schema.CATALOGUE}


class Batch:
    """Events of one profile window, written sorted per stream into the session's trace.

    Sources that convert a profiler's output after the fact (torch, TensorFlow) add events with
    the profiler's epoch-ns times; ``offset`` takes them to the trace clock, ``floor`` keeps them
    after the trace's origin, and text fields are interned (defined before their first use).

    A definition goes into the string stream of the key (the thread) of its first use: a thread's
    events come in time order from window to window, where events of all threads together do not
    (a window drained while another thread runs holds some of its ops, the next window the rest),
    and a stream must not go back in time."""

    def __init__(self, session: Session, floor: int, offset: int) -> None:
        self.session = session
        self._floor = floor
        self._offset = offset
        self._rows: dict[tuple[str, str], list[tuple[Any, ...]]] = {}
        self._strings: list[tuple[int, int, str, str]] = []  # define at, sid, text, key of the first use
        self._defined: dict[str, tuple[int, int]] = {}  # text -> (sid, earliest definition time) seen here
        self._pending: dict[str, int] = {}  # text -> its definition's place in _strings (written at flush)

    def now(self) -> int:
        """The time now, in the clock of the times this batch is given (the profiler's epoch ns, or
        the op observer's CLOCK_MONOTONIC)."""
        return self.session.clock.now() + self._offset

    def device(self, name: str) -> int:
        return self.session.device(name)

    def add(self, short_name: str, key: str, epoch_ns: int, *values: Any) -> None:
        ts = epoch_ns - self._offset
        if ts < self._floor:
            ts = self._floor
        positions = _SID_FIELDS[short_name]
        if positions:
            row = list(values)
            for at in positions:
                if isinstance(row[at], str):
                    row[at] = self._sid(row[at], ts, key)
            values = tuple(row)
        rows = self._rows.get((short_name, key))
        if rows is None:
            rows = self._rows[(short_name, key)] = []
        rows.append((ts, *values))

    def define(self, text: str, epoch_ns: int, key: str) -> None:
        """Have `text` defined by a use at `epoch_ns` on `key`, as if an event used it then."""
        self._sid(text, max(epoch_ns - self._offset, self._floor), key)

    def _sid(self, text: str, ts: int, key: str) -> int:
        define_at = max(ts - 1, self._floor)
        known = self._defined.get(text)
        if known is not None and known[1] <= define_at:  # defined no later than this use
            return known[0]
        sid, needs_definition = self.session.intern_at(text, define_at)
        pending = self._pending.get(text)
        if needs_definition and pending is not None:
            # Defined by this batch, at a later use: move that definition earlier, not a second one
            # (a window's events are added by kind, so a name can be used earlier than first seen).
            self._strings[pending] = (define_at, sid, text, key)
        elif needs_definition:
            self._pending[text] = len(self._strings)
            self._strings.append((define_at, sid, text, key))
        self._defined[text] = (sid, define_at if known is None else min(known[1], define_at))
        return sid

    def flush(self) -> None:
        trace = self.session.trace
        assert trace is not None
        by_key: dict[str, list[tuple[int, int, str]]] = {}
        for define_at, sid, text, key in self._strings:
            by_key.setdefault(key, []).append((define_at, sid, text))
        for key, rows in sorted(by_key.items()):
            trace.write_events(schema.STRING_DEF, key, rows)
        for (short_name, key), rows in sorted(self._rows.items()):
            trace.write_events(schema.BY_SHORT[short_name], key, rows)
