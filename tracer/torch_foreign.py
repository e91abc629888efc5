"""The program's own use of torch's profiler: its profilers, which the recorder steps aside for,
and its ``record_function`` scopes, inside which the recorder never ends a window.

torch runs one profiler at a time in a process: a second ``torch.profiler.profile`` (or
``torch.autograd.profiler.profile``) started while the recorder's is on takes the profiler over,
and the recorder's window then ends empty. Programs do start their own (pytorch/examples'
fx profiling tracer, HF Trainer and Lightning with profiling on), so the recorder watches every
profiler start and stop in the process: when one that is not its own starts, the recorder ends
its window (converting what it holds, so the ops before the block are kept) and stops; when the
last such profiler stops, it starts again. The program's profile gets its events and its
``export_chrome_trace`` works as without dfcompass; the ops inside the block are in that profile
only, which the recorder says in one line.

Both profiler APIs go through ``torch.autograd.profiler.profile``: ``_prepare_trace`` starts a
profiling session (``__enter__`` and ``torch.profiler.profile``'s every cycle call it) and
``__exit__`` ends one, so those two methods are wrapped, once per recorder.
"""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Any, Callable, Iterator


class ForeignProfilers:
    """Calls `step_aside` when the first profiler that is not the recorder's starts, and `come_back`
    when the last one stops. The recorder runs its own profiler calls inside :meth:`own`."""

    def __init__(self, torch: Any, step_aside: Callable[[], None], come_back: Callable[[], None]) -> None:
        self._profile_class = torch.autograd.profiler.profile
        self._step_aside = step_aside
        self._come_back = come_back
        self._local = threading.local()  # .own: this thread is inside one of the recorder's own calls
        self._running: set[int] = set()  # id() of the program's profiling sessions now on
        self._lock = threading.Lock()
        self._originals: tuple[Any, Any] | None = None
        self._pid = os.getpid()
        self.blocks = 0  # how many times the recorder stepped aside

    @contextlib.contextmanager
    def own(self) -> Iterator[None]:
        """The recorder's own profiler calls: not the program's."""
        before = getattr(self._local, "own", False)
        self._local.own = True
        try:
            yield
        finally:
            self._local.own = before

    @property
    def active(self) -> bool:
        """Whether a profiler of the program's is on now."""
        return bool(self._running)

    def install(self) -> None:
        cls = self._profile_class
        prepare, exit_ = cls._prepare_trace, cls.__exit__
        self._originals = (prepare, exit_)
        watcher = self

        def _prepare_trace(profile: Any) -> Any:
            if watcher._watching():
                watcher._started(profile)
            return prepare(profile)

        def __exit__(profile: Any, *exc: Any) -> Any:
            try:
                return exit_(profile, *exc)
            finally:
                if watcher._watching():
                    watcher._stopped(profile)

        cls._prepare_trace, cls.__exit__ = _prepare_trace, __exit__

    def _watching(self) -> bool:
        """Not inside the recorder's own calls, and in the process that installed the watch: a fork
        child (a DataLoader worker) inherits the wrapped methods, but its recorder is its own."""
        return not getattr(self._local, "own", False) and os.getpid() == self._pid

    def remove(self) -> None:
        if self._originals is not None:
            self._profile_class._prepare_trace, self._profile_class.__exit__ = self._originals
            self._originals = None

    def _started(self, profile: Any) -> None:
        with self._lock:
            first = not self._running
            self._running.add(id(profile))
        if first:
            self.blocks += 1
            with self.own():
                self._step_aside()

    def _stopped(self, profile: Any) -> None:
        with self._lock:
            if id(profile) not in self._running:
                return  # a session that never started (enabled=False) or was not seen starting
            self._running.discard(id(profile))
            last = not self._running
        if last:
            with self.own():
                self._come_back()


class OpenScopes:
    """How many ``record_function`` scopes are open on each thread (the program's, the
    DataLoader's ``__next__``, the optimizer's ``step``): a window must not end inside one, since
    stopping torch's profiler under an open record function crashes the process (segfaults seen
    with a training step wrapped in ``record_function``, and under the DataLoader's fetch)."""

    def __init__(self, torch: Any, on_closed: Callable[[], None] | None = None) -> None:
        self._class = torch.autograd.profiler.record_function
        self._local = threading.local()
        self._originals: tuple[Any, Any] | None = None
        self._on_closed = on_closed  # called when the last scope open on a thread closes

    def open(self) -> bool:
        """Whether a record_function scope is open on this thread."""
        return getattr(self._local, "depth", 0) > 0

    def install(self) -> None:
        cls, local, on_closed = self._class, self._local, self._on_closed
        enter, exit_ = cls.__enter__, cls.__exit__
        self._originals = (enter, exit_)
        pid = os.getpid()  # a fork child inherits the wrapped methods; its own recorder counts for it

        def __enter__(scope: Any) -> Any:
            entered = enter(scope)
            if not _is_step_mark(scope) and os.getpid() == pid:
                local.depth = getattr(local, "depth", 0) + 1
            return entered

        def __exit__(scope: Any, *exc: Any) -> Any:
            result = exit_(scope, *exc)
            if not _is_step_mark(scope) and os.getpid() == pid:
                local.depth = max(0, getattr(local, "depth", 0) - 1)
                if local.depth == 0 and on_closed is not None:
                    on_closed()  # the first point since the scope opened where a window may end
            return result

        cls.__enter__, cls.__exit__ = __enter__, __exit__

    def remove(self) -> None:
        if self._originals is not None:
            self._class.__enter__, self._class.__exit__ = self._originals
            self._originals = None


def _is_step_mark(scope: Any) -> bool:
    """A scheduled profiler's ``ProfilerStep#N`` scope, open for the whole step: the recorder's own
    (always open while it records) or the program's (the recorder is stepped aside then)."""
    return str(getattr(scope, "name", "")).startswith("ProfilerStep#")
