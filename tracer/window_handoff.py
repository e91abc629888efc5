"""A recorder's windows written in fork children when that pays: the part PyTorch and TensorFlow share.

:class:`WindowHandoff` joins the chain of converter children (:class:`tracer.fork_chain.ForkChain`),
the policy that decides per window whether a fork pays (:class:`tracer.fork_chain.HandoffPolicy`) and
the session's state a child hands on (:class:`tracer.chain_state.SessionChainState`). A recorder
gives it its own state to hand on (``capture``/``apply``) and, at each window, the conversion to run.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, Callable

from tracer.chain_state import SessionChainState
from tracer.fork_chain import ForkChain, HandoffPolicy, handoff_mode
from tracer.session import Session


class WindowHandoff:
    """Windows to converter children. ``capture()`` returns the recorder's state after a window
    (picklable); ``apply(state)`` takes it in, in the next child and here when the chain drains."""

    def __init__(self, session: Session, mode: str, capture: Callable[[], Any], apply: Callable[[Any], None],
                 on_drain: Callable[[int], None] | None = None) -> None:
        assert session.trace is not None
        self._capture_recorder, self._apply_recorder, self._on_drain = capture, apply, on_drain
        self.policy = HandoffPolicy(mode)
        self.session_state = SessionChainState(session, session.share_ids())
        self.chain: ForkChain | None = ForkChain(session.trace.path, self._capture, self._apply)
        self.in_flight = 0  # windows with children now, not yet in the recorder's counts
        self.forked = 0
        self.failed = 0
        self.backpressure_ns = 0  # the program's time waiting for a full chain (inside its window cuts)

    @classmethod
    def start(cls, session: Session | None, capture: Callable[[], Any], apply: Callable[[Any], None],
              on_drain: Callable[[int], None] | None = None) -> "WindowHandoff | None":
        """A hand-off for `session`'s trace, or None where windows must convert here (the platform
        has no fork, ``DFCOMPASS_HANDOFF=0``, no trace). `on_drain(ns)`: the program waited for children."""
        mode = handoff_mode()
        if mode is None or session is None or session.trace is None:
            return None
        return cls(session, mode, capture, apply, on_drain)

    def _capture(self) -> dict[str, Any]:
        return {"session": self.session_state.capture(), "recorder": self._capture_recorder()}

    def _apply(self, state: dict[str, Any] | None, in_child: bool) -> None:
        if in_child:
            self.session_state.enter_child(state["session"] if state else None)
        elif state:
            self.session_state.apply(state["session"])
        if state:
            self._apply_recorder(state["recorder"])

    def write(self, window_s: float, convert: Callable[[], None]) -> None:
        """Write one window (`window_s` long): in a child when the policy says it pays, else here,
        after the children's state came back. A failed fork converts here and ends the chain."""
        chain = self.chain
        if chain is not None and self.policy.fork(window_s):
            try:
                started = time.perf_counter()
                chain.submit(convert)
                self.policy.forked(time.perf_counter() - started)
                self.in_flight += 1
                return
            except Exception as exc:  # noqa: BLE001 - the window is still converted, here
                print(f"dfcompass: process {os.getpid()}: cannot fork a window converter ({type(exc).__name__}: "
                      f"{exc}); windows convert on the program's thread from now on", file=sys.stderr)
                self.end()
        if chain is not None and chain.forked:
            self.sync()  # the children's state comes here before a window converts here
        started = time.perf_counter()
        convert()
        self.policy.converted_here(time.perf_counter() - started, window_s)

    def sync(self) -> None:
        """Wait for the children now converting and take the last one's state into this process."""
        if self.chain is None:
            return
        started = time.perf_counter_ns()
        self.chain.drain()
        self.in_flight = 0
        if self._on_drain is not None:
            self._on_drain(time.perf_counter_ns() - started)

    def end(self) -> None:
        """Wait for the converters and take their state: later windows convert here."""
        chain = self.chain
        if chain is None:
            return
        self.sync()
        self.chain = None
        self.forked, self.failed, self.backpressure_ns = chain.forked, chain.failed, chain.waited_ns
        if chain.failed:
            print(f"dfcompass: error: process {os.getpid()}: {chain.failed} of {chain.forked} window converters "
                  "failed (their windows are missing)", file=sys.stderr)
