"""What a converter child hands on to the next, on the session's side (tracer.fork_chain).

A child starts as a copy of the program at its fork, which knows nothing the earlier children
did: the strings they interned, where their id blocks stand, and the running counts of the
packets they wrote (events written and discarded, the last packet's end). This module captures
those after a conversion and applies them in the next child, and, when the chain drains, in the
program itself, so that its session closes the trace with the right counts.
"""

from __future__ import annotations

import threading
from typing import Any

from tracer import schema
from tracer.ctf import StreamFile
from tracer.id_blocks import NAMES, BlockCursor, SharedIdBlocks
from tracer.session import Session

_STREAM_FIELDS = ("events_written", "events_discarded", "reported_discarded", "packets_written", "last_end")
StreamKey = tuple[int, str]


def _stats(stream: StreamFile) -> tuple[int, ...]:
    return tuple(getattr(stream, name) for name in _STREAM_FIELDS)


class SessionChainState:
    """The session's part of a converter child's state: taken in at its start, handed on at its end."""

    def __init__(self, session: Session, shared: SharedIdBlocks) -> None:
        self.session = session
        self.shared = shared
        self.cursors: dict[str, BlockCursor] = {}
        self._chain_streams: set[StreamKey] = set()  # streams that converters wrote, so far
        self._before: dict[StreamKey, tuple[int, ...]] = {}

    def enter_child(self, state: dict[str, Any] | None) -> None:
        """In a fresh converter child: the session writes again, with the chain's strings, ids and counts."""
        session, trace = self.session, self.session.trace
        assert trace is not None
        # A lock that another thread of the program held at the fork stays held here: new ones.
        session._strings_lock = threading.Lock()
        session._devices_lock = threading.Lock()
        session._drain_lock = threading.RLock()
        trace._streams_lock = threading.Lock()
        for stream in list(trace.streams.values()):
            stream._lock = threading.Lock()
        session.active = True  # the at-fork handler turned it off (tracer.session._disable_in_child)
        positions = state["cursors"] if state else {}
        self.cursors = {name: BlockCursor(self.shared, name, *positions.get(name, (0, 0))) for name in NAMES}
        session.use_id_cursors(self.cursors)
        if state:
            self.apply(state)
        self._before = {key: _stats(stream) for key, stream in trace.streams.items()}

    def apply(self, state: dict[str, Any]) -> None:
        """Take in the chain's strings and stream counts (in the next child, or in the program at the end)."""
        session, trace = self.session, self.session.trace
        assert trace is not None
        session._strings.update(state["strings"])
        session._string_def_ts.update(state["def_ts"])
        for key, stats in state["streams"].items():
            stream = trace.stream(schema.CATALOGUE[key[0]], key[1])
            for name, value in zip(_STREAM_FIELDS, stats):
                setattr(stream, name, value)
            self._chain_streams.add(key)

    def capture(self) -> dict[str, Any]:
        """After a conversion in a child: what the next one needs."""
        session, trace = self.session, self.session.trace
        assert trace is not None
        if session._threads:  # the conversion emitted live events (a new device): write them, not lose them
            with session._drain_lock:
                session._collect_partials(due=0.0)
                session._drain(float("inf"))
        for key, stream in trace.streams.items():
            if key in self._chain_streams or self._before.get(key) != _stats(stream):
                self._chain_streams.add(key)
        return {"strings": dict(session._strings), "def_ts": dict(session._string_def_ts),
                "cursors": {name: cursor.position() for name, cursor in self.cursors.items()},
                "streams": {key: _stats(trace.streams[key]) for key in self._chain_streams}}
