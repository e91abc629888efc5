"""A PyTorch recorder's windows written into its trace: the conversion half of TorchRecorder.

:class:`WindowConversion` is the part of :class:`tracer.torch_source.TorchRecorder` that writes
one window (here, on the window thread, or in a fork child): the op observer's windows through the
C++ converter (:mod:`tracer.observed_convert`), the profiler's and the observer's in Python
(:mod:`tracer.torch_events`, :mod:`tracer.torch_observer`, :mod:`tracer.torch_convert`,
:mod:`tracer.torch_gpu`), then the steps, the rank and the annotations. A failed window is lost and
counted, never the program.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from tracer import schema
from tracer.batch import Batch
from tracer.observed_convert import NativeWindowConverter
from tracer.session import Session
from tracer.torch_convert import _WindowWriter
from tracer.torch_events import _Collector
from tracer.torch_gpu import mark_replays, write_gpu
from tracer.torch_observer import ObservedCut, ObservedWalk

_MAX_SEQ_SCOPES = 200_000


class WindowConversion:
    """Writes windows; the recorder owns the state declared here."""

    _torch: Any
    _writer: _WindowWriter
    _native: Any
    _walk: ObservedWalk | None
    _native_windows: NativeWindowConverter | None
    _os_tids: dict[int, int]
    _seq_scope: dict[int, str]
    _cuda: bool
    _record_memory: bool
    _streaming: bool
    _user_steps: bool
    _converting: bool
    _window_ops: int
    _convert_tid: int
    _monotonic_offset: int | None
    session: Session | None
    windows_written: int
    windows_lost: int

    def _convert_here(self, prof: Any) -> None:
        """Write one window. A failure loses that window, never the program."""
        try:
            self._convert_window(prof)
        except Exception as exc:  # the profiler calls this inside the user's step() or forward
            self.windows_lost += 1
            lost = max(1, self._window_ops)  # the window's op executions, when they were counted
            session = self.session
            if session is not None and session.trace is not None:  # shown as discarded events (dfcompass info)
                session.trace.stream(schema.BY_SHORT["node_begin"], f"torch-{self._convert_tid}").discard(lost)
            print(f"dfcompass: error: process {os.getpid()}: a PyTorch profile window ({lost} ops) was not "
                  f"recorded: {type(exc).__name__}: {exc}", file=sys.stderr)

    def _convert_window(self, prof: Any) -> None:
        session = self.session
        if session is None or not session.active or session.trace is None:
            return
        if isinstance(prof, ObservedCut) and self._native_windows is not None:
            # Not marked as converting: this may run on the window thread while the program cuts the next.
            self._convert_natively(prof, session, prof.user_steps)
            return
        self._converting = True
        self._window_ops = 0
        try:
            step_marks = prof.user_steps if isinstance(prof, ObservedCut) else self._user_steps or not self._streaming
            collector = _Collector(self._torch, self._os_tids, self._seq_scope, step_marks=step_marks,
                                   native=self._native)
            if isinstance(prof, ObservedCut):
                assert self._walk is not None
                results = None
                self._walk.collect(prof.window, prof.names, collector)
                if step_marks:
                    collector.steps += prof.steps
                offset = self._observer_offset(session)
            else:
                results = prof.profiler.kineto_results
                for root in results.experimental_event_tree():
                    collector.walk(root, "", schema.NO_STEP, "")
                offset = self._clock_offset(session)
            self._window_ops = len(collector.nodes)
            collector.steps_by_time()
            batch = Batch(session, session.trace.origin_ts, offset)
            self._writer.write_rank(batch, self._convert_tid)
            if self._cuda and results is not None:  # before the edges: a CUDA graph replay's outputs are written unseen
                mark_replays(results.events(), collector, self._torch.autograd.DeviceType.CUDA)
            self._writer.write_nodes(batch, collector, self.windows_written)
            if self._record_memory:
                self._writer.write_memory(batch, collector)
            _write_steps(batch, [(b, e, s, collector.os_tids.get(t, t)) for b, e, s, t in collector.steps])
            self._write_annotations(batch, collector)
            self._writer.predefine(batch, collector.open_nodes)
            if self._cuda and results is not None:
                self._write_gpu(batch, results.events(), collector)
            batch.flush()
            self.windows_written += 1
            if len(self._seq_scope) > _MAX_SEQ_SCOPES:  # a long run: keep the newest forward scopes
                for seq in sorted(self._seq_scope)[: len(self._seq_scope) // 2]:
                    del self._seq_scope[seq]
        finally:
            self._converting = False

    def _write_annotations(self, batch: Batch, collector: _Collector) -> None:
        """The window's annotations; with the op observer, also the ends of those begun in an earlier
        window, and the begins of those still open (their ids kept for their ends)."""
        if not (collector.annotations or collector.annotation_ends or collector.annotations_begun):
            return
        cpu = batch.device("cpu")
        session = batch.session
        for begin, end, ptid, name in collector.annotations:
            tid = collector.os_tids.get(ptid, ptid)
            annotation = session.new_annotation_id()
            batch.add("annotation_begin", f"torch-{tid}", begin, cpu, tid, annotation, name)
            batch.add("annotation_end", f"torch-{tid}", end, cpu, tid, annotation)
        for end, tid, annotation in collector.annotation_ends:
            batch.add("annotation_end", f"torch-{tid}", end, cpu, tid, annotation)
        for key, begin, tid, name in collector.annotations_begun:
            annotation = session.new_annotation_id()
            batch.add("annotation_begin", f"torch-{tid}", begin, cpu, tid, annotation, name)
            assert self._walk is not None
            self._walk.begun(key, annotation)

    def _convert_natively(self, cut: ObservedCut, session: Session, step_marks: bool) -> None:
        """One observed window, converted in C++ (tracer/observed_convert.py); the steps and the rank here.

        The C++ records and their strings go first, then the steps and the rank, dated at the cut:
        string definitions reach their stream in time order even when this runs after the program
        went on (on the window thread)."""
        assert self._native_windows is not None and session.trace is not None
        offset = self._observer_offset(session)
        steps = cut.steps if step_marks else []
        rank = self._writer.rank
        nodes, edges = self._native_windows.convert(cut, session, session.trace.origin_ts, offset, steps,
                                                    (rank[0], rank[1]) if rank is not None else None,
                                                    self._record_memory)
        batch = Batch(session, session.trace.origin_ts, offset)
        cut_at, cut_tid = cut.steps[-1][1], cut.steps[-1][3]  # when and on which thread the window was cut
        self._writer.write_rank(batch, cut_tid, at=cut_at)
        _write_steps(batch, steps)
        batch.flush()
        self._window_ops = nodes
        self._writer.nodes_recorded += nodes
        self._writer.edges_recorded += edges
        self.windows_written += 1

    def _observer_offset(self, session: Session) -> int:
        """The trace clock to the op observer's CLOCK_MONOTONIC: one value for the whole recording
        (two clock reads per window would move every window's times by tens of ns, and a window's
        events could then land before the last ones written)."""
        if self._monotonic_offset is None:
            same = getattr(session.clock, "now", None) is time.monotonic_ns  # the usual trace clock
            self._monotonic_offset = 0 if same else time.monotonic_ns() - session.clock.now()
        return self._monotonic_offset

    @staticmethod
    def _clock_offset(session: Session) -> int:
        # The profiler stamps events in ns since the Unix epoch; the trace clock is monotonic.
        return session.clock.offset_to_wall_ns()

    def _write_gpu(self, batch: Batch, events: Any, collector: _Collector) -> None:
        """The window's GPU activity (:func:`tracer.torch_gpu.write_gpu`)."""
        write_gpu(batch, events, collector, self._torch.autograd.DeviceType.CUDA, self._writer.nbytes)


def _write_steps(batch: Batch, steps: list[tuple[int, int, int, int]]) -> None:
    """Each step (begin, end, number, OS thread) on the thread that marked it."""
    for begin, end, step, tid in steps:
        batch.add("step_begin", f"torch-{tid}", begin, step, tid)
        batch.add("step_end", f"torch-{tid}", end, step, tid)
