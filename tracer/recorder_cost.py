"""What recording cost the program: the time its own threads spent in the recorder.

Three parts are timed where they run, on the program's threads: the **start** (the session, the
profiler's first start), the **hooks** (the module scopes opened and closed around each forward,
the callback when the program's last record_function scope closes) and the **window cuts**
(stopping the profiler, converting and writing what it collected, starting it again; and the
last window at stop). A window cut that a hook triggers counts as a window cut only. Not
counted: the profiler's own collection inside each op (torch's C++ callbacks), which only a run
without recording can show (``bench/torch_overhead.py`` compares the two).

The TensorFlow recorder (``tracer/tf_source.py``) counts its start (the session, the kernel-cache
clear, the profiler's start), its window cuts (the profiler stopped and started again, the window
converted here or forked) and its stop (the last window, the wait for the children). Not counted
there: TF's profiler inside each op, and the functions' second instantiation after the cache clear.

The totals go into the trace's environment at stop (``recorder_*`` entries, with the session's
``events_discarded``), and ``dfcompass record`` prints them as one line per recorded process.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Mapping

from tracer import schema

if TYPE_CHECKING:
    from tracer.session import Session


class RecorderCost:
    """Time in the recorder's hooks and window cuts, and the steps it was spread over."""

    def __init__(self) -> None:
        self.start_ns = 0
        self.hooks_ns = 0
        self.windows_ns = 0
        self.windows = 0
        self.user_steps = 0  # rec.step() calls
        self.optimizer_steps = 0
        self.forwards = 0  # outermost forwards on the recorder's thread (inference loops have no other step)
        self.handed_off = 0  # windows converted in fork children (tracer/fork_chain.py)
        self.handoff_wait_ns = 0  # of windows_ns: waiting for those children (a full chain, or the stop)
        # The op observer inside the ops: not timed (it runs in torch's callbacks), estimated as the
        # ops it recorded times what it adds to one op, calibrated at the start (tracer/torch_observer.py).
        self.ops_observed = 0
        self.op_ns: float | None = None
        # CPU time of the recorder's window thread (tracer/window_thread.py): beside the program, it
        # costs the program nothing on a spare core and up to all of it where the program uses every core.
        self.beside_ns = 0
        self._local = threading.local()  # .windows_ns: window time of this thread, for the hooks around it

    def window_started(self) -> int:
        return time.perf_counter_ns()

    def window_done(self, started: int) -> None:
        spent = time.perf_counter_ns() - started
        self.windows_ns += spent
        self.windows += 1
        self._local.windows_ns = getattr(self._local, "windows_ns", 0) + spent

    def waited(self, ns: int) -> None:
        """Time the program waited for window converters, inside a window cut or the stop (both
        timed already: this only says how much of them was waiting)."""
        self.handoff_wait_ns += ns

    def hook_started(self) -> tuple[int, int]:
        return time.perf_counter_ns(), getattr(self._local, "windows_ns", 0)

    def hook_done(self, started: tuple[int, int]) -> None:
        at, windows_before = started
        inside = getattr(self._local, "windows_ns", 0) - windows_before  # a window this hook cut
        self.hooks_ns += time.perf_counter_ns() - at - inside

    @property
    def steps(self) -> int:
        """The program's steps as the recorder saw them: rec.step() calls, else optimizer steps,
        else outermost forwards."""
        return self.user_steps or self.optimizer_steps or self.forwards

    def env(self) -> dict[str, int]:
        env = {schema.ENV_RECORDER_START_NS: self.start_ns, schema.ENV_RECORDER_HOOKS_NS: self.hooks_ns,
               schema.ENV_RECORDER_WINDOWS_NS: self.windows_ns, schema.ENV_RECORDER_WINDOWS: self.windows,
               schema.ENV_RECORDER_STEPS: self.steps}
        if self.handed_off:
            env[schema.ENV_RECORDER_HANDED_OFF] = self.handed_off
            env[schema.ENV_RECORDER_HANDOFF_WAIT_NS] = self.handoff_wait_ns
        if self.op_ns is not None:
            env[schema.ENV_RECORDER_OPS] = self.ops_observed
            env[schema.ENV_RECORDER_OP_NS] = round(self.op_ns)
        if self.beside_ns:
            env[schema.ENV_RECORDER_BESIDE_NS] = self.beside_ns
        return env

    @property
    def in_ops_ns(self) -> int:
        """The estimate of the observer's time inside the ops (0 when the profiler recorded)."""
        return round(self.ops_observed * self.op_ns) if self.op_ns is not None else 0


def note_cost(session: "Session | None", cost: RecorderCost) -> None:
    """What recording cost the program, into the trace's environment (dfcompass record prints it)."""
    if session is None or session.trace is None or not session.active:
        return
    try:
        session.trace.update_env(**cost.env())
    except OSError as exc:  # the trace still closes; only the note is missing
        session.trace.report_error(f"metadata: {exc}")


def cost_line(env: Mapping[str, object]) -> str | None:
    """One line on what recording cost a process, from its trace's environment; None when no
    recorder of framework ops ran in it."""
    keys = (schema.ENV_RECORDER_START_NS, schema.ENV_RECORDER_HOOKS_NS, schema.ENV_RECORDER_WINDOWS_NS,
            schema.ENV_RECORDER_WINDOWS, schema.ENV_RECORDER_STEPS)
    values = [env.get(key) for key in keys]
    if not all(isinstance(v, int) and v >= 0 for v in values):
        return None
    start, hooks, windows, cuts, steps = (int(v) for v in values)  # type: ignore[call-overload]
    total = start + hooks + windows
    per_step = f", {total / steps / 1e6:.2f} ms per step over {steps:,} steps" if steps else ""
    discarded = env.get(schema.ENV_DISCARDED)
    lost = f"; {discarded:,} events discarded" if isinstance(discarded, int) else ""
    forked, waited = env.get(schema.ENV_RECORDER_HANDED_OFF), env.get(schema.ENV_RECORDER_HANDOFF_WAIT_NS)
    handed = (f" ({forked:,} converted in fork children, {waited / 1e9:.3f} s of it waiting for them)"
              if isinstance(forked, int) and isinstance(waited, int) else "")
    ops, op_ns = env.get(schema.ENV_RECORDER_OPS), env.get(schema.ENV_RECORDER_OP_NS)
    if isinstance(ops, int) and isinstance(op_ns, int):
        inside = (f"; inside the ops, the op observer: about {ops * op_ns / 1e9:.3f} s more ({ops:,} ops x "
                  f"{op_ns:,} ns, calibrated at the start)")
    else:
        inside = "; not counted: the collection inside each op, by the profiler"
    beside_ns = env.get(schema.ENV_RECORDER_BESIDE_NS)
    if isinstance(beside_ns, int) and beside_ns > 0:
        inside += (f"; beside the program, a recorder thread converting windows: {beside_ns / 1e9:.3f} s of CPU "
                   "(up to that much more where the program keeps every core busy)")
    return (f"recording took {total / 1e9:.3f} s of the program's time{per_step} (start {start / 1e9:.3f} s, "
            f"{cuts:,} window cuts {windows / 1e9:.3f} s{handed}, hooks {hooks / 1e9:.3f} s){inside}{lost}")


def timed_hook(cost: RecorderCost, hook: Callable[..., Any]) -> Callable[..., Any]:
    """`hook`, its time added to the cost's hooks (less any window it cut)."""
    def timed(*args: Any) -> Any:
        started = cost.hook_started()
        try:
            return hook(*args)
        finally:
            cost.hook_done(started)
    return timed
