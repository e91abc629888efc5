"""Profile windows converted in fork children, one after another, while the program runs on.

Converting a window of torch.profiler events into our events costs more than the profiler
collecting them (docs/pytorch.md, "What recording costs"). So the recorder's thread only cuts
the window and forks: the child holds the window's event tree (copy-on-write, nothing copied
up front), converts it and writes its packets, and the program goes on at once.

Windows depend on each other (each live tensor's last writer, interned strings, the packets'
running counts), so the children form a chain: each reads its predecessor's state from a pipe,
converts, then writes its own state for its successor. Only one converts at a time and packets
reach each stream in window order. At most ``max_in_flight`` children exist; a program that cuts
windows faster than they convert waits for the oldest (the wait is counted in the recorder's cost
line). Dropping a window instead would break the exact edges of every window after it.

A child survives its parent: a SIGKILLed program's finished windows are still written whole.
Each child holds a shared ``flock`` on the trace directory while it lives, so ``dfcompass record``
waits for them (:func:`wait_for_converters`) before it reads or repairs the trace.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import os
import pickle
import signal
import sys
import time
from pathlib import Path
from typing import Any, Callable

HANDOFF_ENV = "DFCOMPASS_HANDOFF"  # "0": convert on the program's thread, as before
DEFAULT_MAX_IN_FLIGHT = 4

_forking_converter = False


def in_converter_fork() -> bool:
    """Whether this process is a converter child (at-fork handlers leave it alone: no new trace)."""
    return _forking_converter


def handoff_mode() -> str | None:
    """None: windows convert on the program's thread (DFCOMPASS_HANDOFF=0, or not Linux: fork with
    threads is unsafe elsewhere); "always" (=1): every window in a child; "auto" (the default):
    a child when that costs the program less (:class:`HandoffPolicy`)."""
    value = os.environ.get(HANDOFF_ENV, "auto")
    if value == "0" or not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return None
    return "always" if value == "1" else "auto"


# A fork costs about this per MiB of the process's resident memory (page tables copied; measured
# 16 ms at 320 MiB, 37 ms at 1.2 GiB on 2 vCPU): the first guess, before a fork is timed.
_FORK_S_PER_MIB = 5e-5
_EMA = 0.3  # weight of the newest measurement


def _resident_mib() -> float:
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return 256.0


class HandoffPolicy:
    """Whether a window goes to a converter child: only when converting it here would cost the
    program clearly more than the fork (its page tables copied, and the copies on write that
    freeing the window's events then makes). A loop of 1 ms steps cut into one window per step
    converts here; long windows of many ops go to children. The cost of converting here is learnt
    per second of window from the windows converted here, starting with the first."""

    MARGIN = 2.0

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.fork_s: float | None = None
        self.convert_s_per_window_s: float | None = None

    def fork(self, window_s: float) -> bool:
        if self.mode == "always":
            return True
        if self.convert_s_per_window_s is None:
            return False  # learn what converting here costs first
        fork_s = self.fork_s if self.fork_s is not None else _resident_mib() * _FORK_S_PER_MIB
        return self.convert_s_per_window_s * window_s > self.MARGIN * fork_s

    def forked(self, seconds: float) -> None:
        self.fork_s = seconds if self.fork_s is None else (1 - _EMA) * self.fork_s + _EMA * seconds

    def converted_here(self, seconds: float, window_s: float) -> None:
        rate = seconds / max(window_s, 1e-4)
        old = self.convert_s_per_window_s
        self.convert_s_per_window_s = rate if old is None else (1 - _EMA) * old + _EMA * rate


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class ForkChain:
    """Runs conversions in a chain of fork children that hand their state on.

    ``capture()`` returns the state a conversion leaves (picklable); ``apply(state, in_child)`` takes
    it in: in each child before it converts (None for the first), and in this process when the
    chain drains.
    """

    def __init__(self, trace_dir: Path, capture: Callable[[], Any], apply: Callable[[Any, bool], None],
                 max_in_flight: int = DEFAULT_MAX_IN_FLIGHT) -> None:
        self._trace_dir = trace_dir
        self._capture = capture
        self._apply = apply
        # Two at least: the newest child blocks until its successor reads its state, so it is never waited for.
        self._max_in_flight = max(2, max_in_flight)
        self._children: list[int] = []
        self._state_fd: int | None = None  # read end of the newest child's state pipe
        self.forked = 0
        self.failed = 0  # children that ended without handing their state on
        self.waited_ns = 0  # the program's time spent waiting for a child (back-pressure)

    def submit(self, convert: Callable[[], None]) -> None:
        """Run `convert` in a new child, after the previous child's state; return at once."""
        global _forking_converter
        if len(self._children) >= self._max_in_flight:
            started = time.perf_counter_ns()
            self._reap(block=True, keep=self._max_in_flight - 1)
            self.waited_ns += time.perf_counter_ns() - started
        read_end, write_end = os.pipe()
        _forking_converter = True
        try:
            pid = os.fork()
        except OSError:
            _forking_converter = False
            os.close(read_end)
            os.close(write_end)
            raise
        if pid == 0:
            self._run_child(convert, read_end, write_end)  # never returns
        _forking_converter = False
        os.close(write_end)
        if self._state_fd is not None:
            os.close(self._state_fd)  # the child holds it now
        self._state_fd = read_end
        self._children.append(pid)
        self.forked += 1

    def drain(self) -> None:
        """Wait for every child, then take the last one's state into this process."""
        fd, self._state_fd = self._state_fd, None
        data = b""
        if fd is not None:
            try:
                data = _read_all(fd)  # before waiting: a child blocks until its state is read
            finally:
                os.close(fd)
        self._reap(block=True, keep=0)
        if data:
            self._apply(pickle.loads(data), False)
        elif fd is not None:
            self.failed += 1

    def _reap(self, block: bool, keep: int = 0) -> None:
        """Collect ended children; with `block`, wait (oldest first) until at most `keep` remain."""
        alive = []
        for index, pid in enumerate(self._children):
            must_wait = block and len(self._children) - index > keep
            try:
                done, status = os.waitpid(pid, 0 if must_wait else os.WNOHANG)
            except ChildProcessError:  # the program reaped it (os.wait); it has ended
                continue
            if done == 0:
                alive.append(pid)
            elif not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
                self.failed += 1
        self._children = alive

    def _run_child(self, convert: Callable[[], None], read_end: int, write_end: int) -> None:
        code = 1
        try:
            gc.disable()  # a collection would touch, and so copy, every page of the parent's heap
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the program; its windows still land
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            os.close(read_end)
            lock = os.open(self._trace_dir, os.O_RDONLY)
            fcntl.flock(lock, fcntl.LOCK_SH)  # `dfcompass record` waits for this (wait_for_converters)
            data = b""
            if self._state_fd is not None:
                data = _read_all(self._state_fd)
                os.close(self._state_fd)
                if not data:
                    print(f"dfcompass: error: process {os.getppid()}: the previous window's converter ended "
                          "without its state; edges into this window from earlier ones may be missing",
                          file=sys.stderr)
            self._apply(pickle.loads(data) if data else None, True)
            convert()
            state = pickle.dumps(self._capture(), protocol=pickle.HIGHEST_PROTOCOL)
            code = 0
            try:
                _write_all(write_end, state)
            except OSError:  # no successor will read it (the program was killed): nothing needs it
                pass
        except BaseException as exc:  # noqa: BLE001 - a child must end here, never run the program's code
            print(f"dfcompass: error: a window converter failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        finally:
            with contextlib.suppress(Exception):
                sys.stderr.flush()
            os._exit(code)


def wait_for_converters(trace_dir: Path, timeout_s: float = 120.0) -> bool:
    """Wait until no converter child writes into `trace_dir`; False if some still do at the timeout."""
    try:
        fd = os.open(trace_dir, os.O_RDONLY)
    except OSError:
        return True  # no such trace: nothing writes there
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    return False
                time.sleep(0.02)
    finally:
        os.close(fd)
