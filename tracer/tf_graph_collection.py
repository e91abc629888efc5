"""The runtime's function graphs, collected once per process rather than once per recording.

TensorFlow hands out a function's post-optimisation graphs only when it instantiates the function,
and only while graph collection (``context.enable_run_metadata``) is on. A recording that starts
after the program's functions ran must clear the kernel cache so they are instantiated again, which
costs the program the instantiations (35-70 ms for the Keras CNN's train function, on its next
call). Done once per process, not once per recording: collection stays on after a recording ends,
so the graphs of functions instantiated between recordings are collected too and taken into the
process's :class:`GraphSet` at the next recording's first cut; that one then clears nothing.

Collection left on between recordings keeps the graphs of every instantiation until the next
recording drains them; to bound that memory it is switched off once ``IDLE_FUNCTION_LIMIT``
functions were made with no recording running (each ``fit`` makes a few dataset functions), and the
next recording clears the kernel cache again.
"""

from __future__ import annotations

import threading
from typing import Any

from tracer.tf_graphs import on_function_made
from tracer.tf_xspace import GraphSet

IDLE_FUNCTION_LIMIT = 64  # functions made with no recording running before collection goes off


class GraphCollection:
    """The process's graph collection; :data:`COLLECTION` is the one instance."""

    def __init__(self) -> None:
        self.graphs = GraphSet()  # every function graph collected in this process
        self.kernel_cache_clears = 0
        self._lock = threading.Lock()
        self._collecting = False  # graph collection on, by us
        self._complete = False  # every function instantiated since the last clear had its graphs collected
        self._recordings = 0
        self._made_while_idle = 0

    def begin(self, context: Any, refresh: bool) -> bool:
        """A recording starts: collection on, and with `refresh` the kernel cache cleared unless every
        function the runtime holds was instantiated under collection. Returns whether it was cleared."""
        with self._lock:
            if not self._collecting:  # else the graphs of what ran between recordings wait for take()
                context.enable_run_metadata()
                self._collecting = True
            cleared = refresh and not self._complete
            if cleared:
                # Functions that ran before this point are instantiated again, so their graphs are seen.
                context.context().clear_kernel_cache()
                self.kernel_cache_clears += 1
            self._complete = self._complete or cleared
            self._recordings += 1
            self._made_while_idle = 0
            return cleared

    def take(self, context: Any) -> None:
        """Add the graphs instantiated since the last take (at a window cut and at the stop)."""
        with self._lock:
            if self._collecting:
                self._drain(context)

    def end(self) -> None:
        """A recording ended; collection stays on for the next one (see the module's doc)."""
        with self._lock:
            self._recordings = max(0, self._recordings - 1)
            self._made_while_idle = 0

    def function_made(self) -> None:
        if self._collecting and self._recordings == 0:
            self._made_while_idle += 1
            if self._made_while_idle > IDLE_FUNCTION_LIMIT:
                from tensorflow.python.eager import context

                with self._lock:
                    self._stop_collecting(context)

    def _drain(self, context: Any) -> None:
        metadata = context.export_run_metadata()  # also clears what the runtime kept
        self.graphs.add(list(fg.partition_graphs) for fg in metadata.function_graphs)

    def _stop_collecting(self, context: Any) -> None:
        if self._collecting:
            self._collecting = False
            self._complete = False  # instantiations from now on go unseen
            try:
                context.disable_run_metadata()
            except Exception:  # the context is being torn down: nothing is collected any more anyway
                pass


COLLECTION = GraphCollection()
on_function_made(COLLECTION.function_made)
