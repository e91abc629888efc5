"""Live recording: per-thread buffers, a background flusher, lost-event accounting, finalization.

Hot path (one recorded event): a thread-local lookup, the timestamp, and one ``list +=`` of
the record's values onto that thread's buffer for the event class. No lock, no packing.

A buffer that reaches one packet's worth of records is handed to the flusher thread, which
packs it with one ``struct`` call and writes it as a packet. Every ``flush_interval`` the
flusher also takes the partly filled buffers of all threads, so a killed process loses at most
that much. When ``max_pending`` packets wait (the GIL starves the flusher when many threads
record), the recording thread writes them itself. Only when it cannot, because the writer is
stuck in a write for over ``_HELP_WAIT_S``, is the full buffer dropped, and its events are counted in its stream's
``events_discarded`` (never dropped silently).

Why no lock: the flusher swaps a thread's list for a new one while that thread records. In
CPython 3.11 a thread can only lose the GIL at a call or a backward jump, so every record
path takes its timestamp and ids *first*, then loads its list and extends it with no call in
between: the load and the ``+=`` cannot straddle a swap. As a second guard, a swapped
partial list is packed only ``_GRACE_S`` later. (A free-threaded build would need a lock.)
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import signal
import socket
import sys
import threading
import time
import weakref
from array import array
from collections import deque
from itertools import islice
from pathlib import Path
from types import FrameType
from typing import Any, Callable, Iterator

from tracer import schema
from tracer.clock import Clock, MonotonicClock
from tracer.id_blocks import BlockCursor, SharedIdBlocks
from tracer.ctf import DEFAULT_PACKET_SIZE, StreamFile, TraceDirectory, pack_fixed, pack_string_defs, records_per_packet

_GRACE_S = 0.02
_HELP_WAIT_S = 0.1
_U32 = 0xFFFFFFFF
_NCLASSES = len(schema.CATALOGUE)
_NFIELDS = [len(c.fields) + 2 for c in schema.CATALOGUE]  # id + timestamp + fields
_C = schema.BY_SHORT

_active: "Session | None" = None
_all_sessions: "weakref.WeakSet[Session]" = weakref.WeakSet()


def active_session() -> "Session | None":
    """The session recording now, or None."""
    return _active


class _ThreadState:
    __slots__ = ("tid", "key", "rows", "caps", "streams")

    def __init__(self, tid: int, caps: list[int]) -> None:
        self.tid = tid
        self.key = str(tid)
        self.rows: list[list[Any]] = [[] for _ in range(_NCLASSES)]
        self.caps = caps  # flat-list length at which a buffer is handed over
        self.streams: list[StreamFile | None] = [None] * _NCLASSES


def _machine_at_start() -> dict[str, str | int]:
    """The cores this process may use and the 1-minute load average when recording starts."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    try:
        load = f"{os.getloadavg()[0]:.2f}"
    except OSError:
        return {schema.ENV_CORES: cores}
    return {schema.ENV_CORES: cores, schema.ENV_LOAD_START: load}


class Session:
    """Records events into a CTF trace directory.

    Parameters
    ----------
    path : output directory; it must not already hold a trace unless ``overwrite``.
    clock : the trace clock (default CLOCK_MONOTONIC).
    packet_size : bytes per full packet.
    flush_interval : seconds between periodic flushes of partly filled buffers.
    max_pending : packets the flusher may fall behind before events are discarded.
    handle_signals : finalize on SIGTERM (only when started in the main thread).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        clock: Clock | None = None,
        packet_size: int = DEFAULT_PACKET_SIZE,
        flush_interval: float = 0.2,
        max_pending: int = 256,
        overwrite: bool = False,
        handle_signals: bool = True,
        env: dict[str, str | int] | None = None,
    ) -> None:
        self.path = Path(path)
        self.clock = clock or MonotonicClock()
        self._now: Callable[[], int] = self.clock.now
        self._packet_size = packet_size
        self._flush_interval = flush_interval
        self._max_pending = max_pending
        self._overwrite = overwrite
        self._handle_signals = handle_signals
        self._env = env or {}
        self._caps = [
            (_NFIELDS[c.id] * records_per_packet(c, packet_size)) if not c.is_variable else 4 * 64
            for c in schema.CATALOGUE
        ]
        self._local = threading.local()
        self._threads: list[_ThreadState] = []
        self._strings: dict[str, int] = {}
        self._string_def_ts: dict[int, int] = {}  # sid -> timestamp of its dfc:string_def
        self._sids: Iterator[int] = itertools.count()
        self._shared_ids: SharedIdBlocks | None = None  # once fork children number ids too (share_ids)
        self._strings_lock = threading.Lock()
        self._devices_lock = threading.Lock()
        self._devices: dict[str, int] = {}
        self._node_ids: Iterator[int] = itertools.count()
        self._tensor_ids: Iterator[int] = itertools.count()
        self._annotation_ids: Iterator[int] = itertools.count(1)
        self._pending: deque[tuple[float, StreamFile, list[Any]]] = deque()
        self._wake = threading.Event()
        self._stop_lock = threading.Lock()
        # Held by whoever writes pending packets, so packets of one stream stay in order.
        # Reentrant: SIGTERM may finalize from a handler that interrupted a drain.
        self._drain_lock = threading.RLock()
        self._flusher: threading.Thread | None = None
        self._previous_sigterm: Any = None
        self._started_at: tuple[float, float] | None = None  # process CPU time and monotonic time at start
        self._stop_hooks: list[Callable[[], None]] = []
        self._sigterm_deferrals = 0
        self._deferred_sigterm: int | None = None
        # The thread running stop(), if any: a SIGTERM handled in it waits for the end of stop (the
        # stop lock is not reentrant), and a hook that stops the session again returns at once.
        self._stopping: int | None = None
        self.step = schema.NO_STEP
        self.dataflow: Any = None  # producer table of tracer.dataflow, kept per session
        self.node_keys: dict[tuple[str, str, str], tuple[int, int, int]] = {}  # (op, name, device) -> ids
        self.active = False
        self.trace: TraceDirectory | None = None

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> "Session":
        global _active
        if _active is not None and _active is not self:
            raise RuntimeError(f"another dfcompass session is recording to {_active.path}")
        self.trace = TraceDirectory(
            self.path,
            clock_offset_ns=self.clock.offset_to_wall_ns(),
            hostname=socket.gethostname(),
            env={"pid": os.getpid(), **launcher_env(), **_machine_at_start(), **self._env},
            packet_size=self._packet_size,
            overwrite=self._overwrite,
        )
        self.trace.origin_ts = self._now()
        self._started_at = (time.process_time(), time.monotonic())
        self.active = True
        _active = self
        _all_sessions.add(self)
        self._flusher = threading.Thread(target=self._flush_loop, name="dfcompass-flusher", daemon=True)
        self._flusher.start()
        atexit.register(self.stop)
        if self._handle_signals and threading.current_thread() is threading.main_thread():
            self._install_sigterm()
        argv0 = sys.argv[0] if sys.argv and sys.argv[0] else "python"
        self.emit("process_info", os.getpid(), self.intern(argv0), self.intern(socket.gethostname()))
        return self

    def __enter__(self) -> "Session":
        return self.start() if not self.active else self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def add_stop_hook(self, hook: Callable[[], None]) -> None:
        """Run `hook` when the session stops, before it closes the trace (once; LIFO).

        Batch sources (the PyTorch recorder) write what they still hold here, so a SIGTERM or
        an exit that stops the session still gets their last events into the trace.
        """
        self._stop_hooks.append(hook)

    def discard_stop_hook(self, hook: Callable[[], None]) -> None:
        """Forget `hook` (a source that stopped on its own has nothing left to write)."""
        with contextlib.suppress(ValueError):
            self._stop_hooks.remove(hook)

    def stop(self) -> None:
        """Flush everything and close the trace. Safe to call twice, from atexit or a signal."""
        me = threading.get_ident()
        if self._stopping == me:
            return
        self._stopping = me
        try:
            self._stop()
        finally:
            self._stopping = None
            if self._deferred_sigterm is not None and not self._sigterm_deferrals:
                signum, self._deferred_sigterm = self._deferred_sigterm, None
                self._on_sigterm(signum, None)

    def _stop(self) -> None:
        global _active
        while self._stop_hooks:  # outside the lock: a hook may stop the session itself
            hook = self._stop_hooks.pop()
            try:
                hook()
            except Exception as exc:  # the trace must still close
                if self.trace is not None:
                    self.trace.report_error(f"stop hook {getattr(hook, '__qualname__', hook)}: {type(exc).__name__}: {exc}")
        with self._stop_lock:
            if not self.active:
                return
            self.active = False
            if _active is self:
                _active = None
            self._wake.set()
            if self._flusher is not None and self._flusher is not threading.current_thread():
                self._flusher.join(timeout=10)
            with self._drain_lock:
                self._collect_partials(due=0.0)
                self._drain(float("inf"))
            assert self.trace is not None
            self._note_machine()
            for stream in list(self.trace.streams.values()):
                stream.report_discarded()
            self.trace.close()
            atexit.unregister(self.stop)
            self._restore_sigterm()

    def _note_machine(self) -> None:
        """The load at stop and this process's CPU use while it recorded: a busy machine inflates
        every measured cost, and the reports say so (tc_analyses/analyses/machine_load.py)."""
        if self.trace is None or self._started_at is None:
            return
        cpu0, wall0 = self._started_at
        try:
            notes: dict[str, str | int] = {
                schema.ENV_LOAD_END: f"{os.getloadavg()[0]:.2f}",
                schema.ENV_CPU_S: f"{time.process_time() - cpu0:.3f}",
                schema.ENV_WALL_S: f"{time.monotonic() - wall0:.3f}",
                schema.ENV_DISCARDED: sum(stream.events_discarded for stream in list(self.trace.streams.values()))}
            self.trace.update_env(**notes)
        except OSError as exc:  # the trace still closes; only the note is missing
            self.trace.report_error(f"metadata: {exc}")

    def _install_sigterm(self) -> None:
        try:
            self._previous_sigterm = signal.getsignal(signal.SIGTERM)
            signal.signal(signal.SIGTERM, self._on_sigterm)
        except ValueError:  # not the main thread of the main interpreter
            self._previous_sigterm = None

    def _restore_sigterm(self) -> None:
        if self._previous_sigterm is not None and threading.current_thread() is threading.main_thread():
            try:
                if signal.getsignal(signal.SIGTERM) == self._on_sigterm:
                    signal.signal(signal.SIGTERM, self._previous_sigterm)
            except (ValueError, TypeError):
                pass

    @contextlib.contextmanager
    def sigterm_deferred(self) -> Iterator[None]:
        """Within the block a SIGTERM waits for its end: a batch write is never cut in half.

        Only the main thread runs Python signal handlers, so this is for work done there (the
        PyTorch recorder converting a window inside the program's own step).
        """
        self._sigterm_deferrals += 1
        try:
            yield
        finally:
            self._sigterm_deferrals -= 1
            if not self._sigterm_deferrals and self._deferred_sigterm is not None:
                signum, self._deferred_sigterm = self._deferred_sigterm, None
                self._on_sigterm(signum, None)

    def _on_sigterm(self, signum: int, frame: FrameType | None) -> None:
        if self._sigterm_deferrals or self._stopping == threading.get_ident():
            self._deferred_sigterm = signum
            return
        previous = self._previous_sigterm
        self.stop()
        if callable(previous):
            previous(signum, frame)
        elif previous == signal.SIG_IGN:
            return
        else:  # default action: die of SIGTERM, as the program would have without us
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)

    # ------------------------------------------------------------------ threads and strings
    def _thread_state(self) -> _ThreadState:
        try:
            return self._local.state
        except AttributeError:
            state = _ThreadState(threading.get_native_id(), self._caps)
            self._local.state = state
            self._threads.append(state)
            name = threading.current_thread().name
            self._append(state, _C["thread_info"].id, (os.getpid(), state.tid, self.intern(name)))
            return state

    def intern(self, text: str) -> int:
        """The string id of `text`, defining it (a dfc:string_def) on first use."""
        sid = self._strings.get(text)
        if sid is not None:
            return sid
        state = self._thread_state()  # outside the lock: a new thread interns its own name
        with self._strings_lock:
            sid = self._strings.get(text)
            if sid is None:
                sid = next(self._sids)
                # The definition is timestamped before the dict entry exists, so every
                # event that can see the id is later than its definition.
                ts = self._now()
                self._string_def_ts[sid] = ts
                self._append_at(state, schema.STRING_DEF.id, ts, (sid, text))
                self._strings[text] = sid
        return sid

    def device(self, name: str, model: str = "") -> int:
        """The trace-local index of device `name` ("cpu", "cuda:0"...), described on first use."""
        index = self._devices.get(name)
        if index is not None:
            return index
        kind, _, ordinal = name.partition(":")
        sids = (self.intern(name), self.intern(kind), self.intern(model))
        with self._devices_lock:
            index = self._devices.get(name)
            if index is None:
                index = len(self._devices)
                if index > 0xFFFF:
                    raise ValueError(f"too many devices in one trace ({index})")
                # Described before the index is published: no event can use it undescribed.
                self.emit("device_info", index, sids[0], sids[1], int(ordinal) if ordinal.isdigit() else 0, sids[2])
                self._devices[name] = index
        return index

    def new_node_id(self) -> int:
        return next(self._node_ids) & _U32

    def new_tensor_id(self) -> int:
        return next(self._tensor_ids) & _U32

    def new_annotation_id(self) -> int:
        """An annotation id unique in the trace (sources that write annotations share it)."""
        return next(self._annotation_ids) & _U32

    def take_ids(self, kind: str, count: int) -> array:
        """`count` new ids of one kind ("node", "tensor", "annotation") at once, in order."""
        counter = {"node": self._node_ids, "tensor": self._tensor_ids, "annotation": self._annotation_ids}[kind]
        ids = array("q", islice(counter, count))
        if ids and max(ids) > _U32:  # ids are u32 in the trace, as new_node_id gives them
            ids = array("q", [value & _U32 for value in ids])
        return ids

    def share_ids(self) -> SharedIdBlocks:
        """From now on take ids in blocks from counters that fork children share (tracer.id_blocks):
        a child that converts windows (tracer.fork_chain) then numbers nothing this process does."""
        if self._shared_ids is not None:
            return self._shared_ids
        with self._strings_lock:
            counters = {"node": self._node_ids, "tensor": self._tensor_ids, "annotation": self._annotation_ids,
                        "string": self._sids}
            # Each counter's next value starts the shared count (the one read here is skipped: a hole).
            shared = SharedIdBlocks({name: next(counter) for name, counter in counters.items()})
            self._node_ids, self._tensor_ids = shared.ids("node"), shared.ids("tensor")
            self._annotation_ids, self._sids = shared.ids("annotation"), shared.ids("string")
        self._shared_ids = shared
        return shared

    def use_id_cursors(self, cursors: dict[str, BlockCursor]) -> None:
        """In a converting fork child: number from the chain's own blocks (tracer.fork_chain)."""
        self._node_ids, self._tensor_ids = cursors["node"], cursors["tensor"]
        self._annotation_ids, self._sids = cursors["annotation"], cursors["string"]

    # ------------------------------------------------------------------ recording
    def intern_at(self, text: str, ts: int) -> tuple[int, bool]:
        """For batch sources: the id of `text`, and whether a definition must be written at `ts`.

        True when the string is new, or when its live definition is later than `ts` (the batch
        then writes its own definition, same id and value, so no use precedes a definition).
        """
        with self._strings_lock:
            sid = self._strings.get(text)
            if sid is None:
                sid = self._strings[text] = next(self._sids)
                self._string_def_ts[sid] = ts
                return sid, True
            if self._string_def_ts[sid] > ts:
                self._string_def_ts[sid] = ts
                return sid, True
            return sid, False

    def _append(self, state: _ThreadState, cid: int, values: tuple[Any, ...]) -> None:
        self._append_at(state, cid, self._now(), values)

    def _append_at(self, state: _ThreadState, cid: int, ts: int, values: tuple[Any, ...]) -> None:
        record = (cid, ts, *values)
        rows = state.rows[cid]
        rows += record
        if len(rows) >= state.caps[cid]:
            self._handoff(state, cid, rows)

    def emit(self, short_name: str, *values: Any) -> None:
        """Record one event of class `short_name` (fields in catalogue order) at the current time."""
        cls = _C[short_name]
        if len(values) != len(cls.fields):
            raise TypeError(f"{cls.name} takes {len(cls.fields)} values ({', '.join(cls.field_names)}), got {len(values)}")
        if self.active:
            self._append(self._thread_state(), cls.id, values)

    def node_begin(self, op_sid: int, name_sid: int, device: int) -> int:
        """Record a dfc:node_begin and return the new node id (the hot path of the dataflow API)."""
        try:
            state = self._local.state
        except AttributeError:
            state = self._thread_state()
        node_id = next(self._node_ids) & _U32
        ts = self._now()
        rows = state.rows[6]
        rows += (6, ts, node_id, op_sid, name_sid, device, state.tid, self.step)
        if len(rows) >= state.caps[6]:
            self._handoff(state, 6, rows)
        return node_id

    def node_end(self, node_id: int, device: int) -> None:
        try:
            state = self._local.state
        except AttributeError:
            state = self._thread_state()
        ts = self._now()
        rows = state.rows[7]
        rows += (7, ts, node_id, device, state.tid)
        if len(rows) >= state.caps[7]:
            self._handoff(state, 7, rows)

    def tensor_edge(self, producer: int, consumer: int, tensor_id: int, nbytes: int, src: int, dst: int) -> None:
        try:
            state = self._local.state
        except AttributeError:
            state = self._thread_state()
        ts = self._now()
        rows = state.rows[8]
        rows += (8, ts, producer, consumer, tensor_id, nbytes, src, dst)
        if len(rows) >= state.caps[8]:
            self._handoff(state, 8, rows)

    def step_begin(self, step: int) -> None:
        self.step = step & _U32
        self.emit("step_begin", self.step, self._thread_state().tid)

    def step_end(self) -> None:
        if self.step != schema.NO_STEP:
            self.emit("step_end", self.step, self._thread_state().tid)
        self.step = schema.NO_STEP

    # ------------------------------------------------------------------ flushing
    def _stream(self, state: _ThreadState, cid: int) -> StreamFile:
        stream = state.streams[cid]
        if stream is None:
            assert self.trace is not None
            stream = state.streams[cid] = self.trace.stream(schema.CATALOGUE[cid], state.key)
        return stream

    def _handoff(self, state: _ThreadState, cid: int, rows: list[Any]) -> None:
        if state.rows[cid] is not rows:  # the flusher took this list meanwhile; it writes it
            return
        state.rows[cid] = []
        stream = self._stream(state, cid)
        pending = self._pending
        if len(pending) >= self._max_pending:
            # Help the flusher catch up. Wait a little for the lock: its holder may only be
            # short of the GIL; if it is stuck in a write longer than that, drop.
            if self._drain_lock.acquire(timeout=_HELP_WAIT_S):
                try:
                    self._drain(time.monotonic())
                finally:
                    self._drain_lock.release()
            if len(pending) >= self._max_pending:  # the writer is stuck: drop and count
                stream.discard(len(rows) // _NFIELDS[cid])
                return
        pending.append((0.0, stream, rows))
        self._wake.set()

    def _collect_partials(self, due: float) -> None:
        for state in list(self._threads):
            for cid in range(_NCLASSES):
                if state.rows[cid]:
                    rows = state.rows[cid]
                    state.rows[cid] = []
                    self._pending.append((due, self._stream(state, cid), rows))

    def _drain(self, now: float) -> None:
        """Write the pending packets that are due, oldest first. Callers hold ``_drain_lock``."""
        pending = self._pending
        while pending and pending[0][0] <= now:
            _, stream, rows = pending.popleft()
            if rows:
                self._write_rows(stream, rows)

    @staticmethod
    def _write_rows(stream: StreamFile, rows: list[Any]) -> None:
        cls = stream.cls
        if cls.is_variable:
            count = len(rows) // 4
            body = pack_string_defs(rows)
            last_ts = rows[-3]
        else:
            nfields = _NFIELDS[cls.id]
            count = len(rows) // nfields
            body = pack_fixed(cls, rows, count)
            last_ts = rows[-nfields + 1]
        stream.write_packet(body, count, rows[1], last_ts)

    def _flush_loop(self) -> None:
        next_periodic = time.monotonic() + self._flush_interval
        while self.active:
            self._wake.wait(timeout=min(self._flush_interval, _GRACE_S * 2))
            self._wake.clear()
            now = time.monotonic()
            if now >= next_periodic:
                self._collect_partials(due=now + _GRACE_S)
                next_periodic = now + self._flush_interval
            try:
                with self._drain_lock:
                    self._drain(now)
            except Exception as exc:  # a packing bug must not kill recording silently
                assert self.trace is not None
                self.trace.report_error(f"flusher: {type(exc).__name__}: {exc}")


# Variables that launchers (torchrun, torch.distributed.elastic, SLURM wrappers) set for each rank.
_LAUNCHER_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK")


def launcher_env() -> dict[str, str | int]:
    """The rank variables a launcher gave this process, as trace environment entries."""
    return {name.lower(): int(value) for name in _LAUNCHER_VARS
            if (value := os.environ.get(name, "")).isdigit()}


def _disable_in_child() -> None:
    # A forked child shares the parent's file descriptors: it must not write into its trace.
    global _active
    for session in list(_all_sessions):
        session.active = False
        session._pending.clear()
        session._threads.clear()
        session._stop_hooks.clear()  # the parent's sources (profilers) are the parent's to stop
    _active = None


os.register_at_fork(after_in_child=_disable_in_child)
