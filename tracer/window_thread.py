"""Windows converted on a thread of the recorder's own, while the program runs its next step.

The op observer's windows convert in C++ (:mod:`tracer.observed_convert`), and ctypes lets go of
the GIL for each call into it: on a thread of its own, the conversion runs on another core while
the program goes on. One window converts at a time, in order; the program's next cut waits until
the window before it is written (the wait is back-pressure, counted in the recorder's cost line),
so a window the program finished is on disk by the end of the next one, and a SIGKILL loses at
most the window being converted and the step in flight.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable


class WindowThread:
    """Runs ``convert(window)`` for each submitted window on one thread, in submission order."""

    def __init__(self, convert: Callable[[Any], None], on_wait: Callable[[int], None]) -> None:
        self._convert = convert
        self._on_wait = on_wait
        self._ready = threading.Condition()
        self._window: Any = None
        self._pending = False  # a window submitted and not yet written
        self._closing = False
        self.converted = 0
        self.cpu_ns = 0  # CPU time of the conversions (this thread's, beside the program)
        self._thread = threading.Thread(target=self._run, name="dfcompass-windows", daemon=True)
        self._thread.start()

    @property
    def in_flight(self) -> int:
        """Windows handed over and not yet written (0 or 1)."""
        return int(self._pending)

    def submit(self, window: Any) -> None:
        """Hand one window over, after the one before it is written (the program waits for that)."""
        if threading.current_thread() is self._thread:
            self._convert(window)  # a cut made by the conversion itself (never expected): no deadlock
            return
        started = time.perf_counter_ns()
        with self._ready:
            while self._pending and self._thread.is_alive():
                self._ready.wait()
            waited = time.perf_counter_ns() - started
            if not self._thread.is_alive():
                self._convert(window)  # the thread is gone (never expected): convert here
            else:
                self._window, self._pending = window, True
                self._ready.notify_all()
        if waited > 50_000:
            self._on_wait(waited)

    def wait(self) -> None:
        """Until the window handed over is written."""
        started = time.perf_counter_ns()
        with self._ready:
            while self._pending and self._thread.is_alive():
                self._ready.wait()
        self._on_wait(time.perf_counter_ns() - started)

    def end(self) -> None:
        """Write the window handed over and stop the thread."""
        self.wait()
        with self._ready:
            self._closing = True
            self._ready.notify_all()
        self._thread.join()

    def _run(self) -> None:
        while True:
            with self._ready:
                while not self._pending and not self._closing:
                    self._ready.wait()
                if not self._pending:
                    return
                window = self._window
            cpu = time.thread_time_ns()
            try:
                self._convert(window)  # it catches what a window can raise: a lost window, not a dead thread
            finally:
                self.cpu_ns += time.thread_time_ns() - cpu
                with self._ready:
                    self._window, self._pending = None, False
                    self.converted += 1
                    self._ready.notify_all()
