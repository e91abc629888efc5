"""PyTorch source: every aten op, exact tensor edges, memory and GPU activity, into a dfcompass trace.

Mechanism, chosen by measurement (docs/pytorch.md, ``make bench``): torch.profiler's C++ collection
with ``record_shapes`` and ``profile_memory``, turned into dfcompass events after each active window.
This module holds the recorder, :class:`TorchRecorder`: the profiler, its windows (scheduled, or
streamed while the program runs), stepping aside for the program's own profiler, and the
conversion of each window, done by these modules:

* :mod:`tracer.torch_scopes`: **module scope**, from global ``nn.Module`` hooks that open a cheap
  C++ record function per forward call; and where a streaming window may end.
* :mod:`tracer.torch_events`: the profile's event tree walked into **nodes** (the outermost
  ``aten::`` ops, forward, backward and optimizer alike, and ``c10d::`` collectives), their inner
  reads and allocations, memory events, steps, annotations and thread names.
* :mod:`tracer.torch_edges`: **exact edges**, each read linked to the last writer of its storage.
* :mod:`tracer.torch_convert`: nodes, edges, **collectives** (``dfc:collective``, with
  ``dfc:process_rank`` once ``torch.distributed`` is up) and **memory** (every allocation and
  free with bytes in use per device) written into the trace.
* :mod:`tracer.torch_gpu`: **GPU** activity (when CUDA is available): runtime API calls, kernels,
  memcpy and memset on their (device, stream), joined by correlation id.

torch is imported lazily: the rest of ``tracer`` still needs only the standard library.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import threading
import time
import warnings
from typing import Any, Iterator

from tracer.native import op_observer, profile_walk, window_converter
from tracer.recorder_cost import RecorderCost, note_cost, timed_hook
from tracer.session import Session, active_session
from tracer.torch_convert import _WindowWriter
from tracer.torch_events import _Node  # noqa: F401  (_Node: imported from here by tests)
from tracer.torch_foreign import ForeignProfilers, OpenScopes
from tracer.observed_convert import NativeWindowConverter
from tracer.torch_observer import BEGIN_COLUMNS, ENGINE_ENV, ObservedCut, ObservedProfile, ObservedWalk, OpObserver
from tracer.torch_scopes import _in_data_loader, _may_end_window_at, _ModuleScopes
from tracer.verbosity import verbose
from tracer.fork_chain import handoff_mode
from tracer.window_handoff import WindowHandoff
from tracer.window_thread import WindowThread
from tracer.torch_windows import WindowConversion

_CHAIN_SEQ_SCOPES = 20_000  # forward scopes handed to the next window's converter: backward comes soon after


def _import_torch() -> Any:
    try:
        import torch
    except ImportError as exc:
        raise ImportError(f"dfcompass's PyTorch source needs torch ({exc}); install torch==2.13.0") from None
    return torch


# Lines that torch writes on stderr at every profiler start and stop; with one window per step
# they would flood the program's stderr.
_KINETO_NOISE = (b"USDT:", b"Memory block of unknown size was allocated before the profiling started")


@contextlib.contextmanager
def _kineto_log_filtered() -> Iterator[None]:
    """Hold back torch's per-window log lines on stderr (fd 2); pass every other line on. All
    pass with ``dfcompass --verbose``."""
    if verbose():
        yield
        return
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):
        yield
        return
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            with contextlib.suppress(OSError, ValueError, AttributeError):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            kept = [line for line in sink.read().splitlines(keepends=True)
                    if not any(noise in line for noise in _KINETO_NOISE)]
            if kept:
                os.write(2, b"".join(kept))


def _cpus() -> int:
    """CPUs this process may run on: a thread of the recorder's own helps only beside another."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _experimental_config(torch: Any, **options: bool) -> Any:
    """The profiler's experimental config with the options this torch knows (an older one lacks
    overload names and CUDA sync events; without overload names, writes are not told per overload)."""
    while True:
        try:
            return torch._C._profiler._ExperimentalConfig(**options)
        except TypeError:
            if not options:
                raise
            options.popitem()


class TorchRecorder(WindowConversion):
    """Record PyTorch execution into a dfcompass trace, like ``torch.profiler.profile``.

    ``with TorchRecorder("out/trace", wait=1, warmup=1, active=3) as rec:`` then call
    ``rec.step()`` after each step: steps in ``active`` windows are recorded (``repeat`` windows,
    0 = until the end). With ``active=None`` everything between enter and exit is recorded.
    Given a path, the recorder runs its own :class:`Session`; given a session (or with one
    already active), it records into it.

    Streaming: with ``active=None`` the profile is cut into windows that are converted and
    written while the program runs, so a killed program loses at most the window in progress.
    A window ends at each ``rec.step()``; without those calls, at the first outermost
    ``nn.Module`` forward (of a module with parameters, outside a DataLoader fetch) after an
    optimizer step, or after ``flush_interval`` seconds (checked at outermost forwards). Memory
    then holds one window's profiler events, not the run's.

    Threads: by default the profiler covers the thread that starts the recorder and the threads
    that inherit its state (autograd engine threads, ``at::launch``). ``all_threads=True`` adds
    every other Python thread, but torch 2.13 then reports no allocations, so that mode records
    ops without memory events and without tensor edges.
    """

    def __init__(self, trace: "str | Session | None" = None, *, wait: int = 0, warmup: int = 0,
                 active: int | None = None, repeat: int = 0, record_memory: bool = True,
                 record_modules: bool = True, cuda: bool | None = None, all_threads: bool = False,
                 flush_interval: float = 0.2, engine: str | None = None, **session_options: Any) -> None:
        self._torch = _import_torch()
        self._own_session = isinstance(trace, str) or hasattr(trace, "__fspath__")
        self._session_arg = trace
        self._session_options = session_options  # for the Session made from a path (overwrite=...)
        self._schedule = (wait, warmup, active, repeat) if active is not None else None
        # torch 2.13 records allocations only without profile_all_threads, and edges need them.
        self._all_threads = all_threads
        self._record_memory = record_memory and not all_threads
        self._streaming = active is None
        self._flush_interval = flush_interval
        self._record_modules = record_modules
        self._scopes: _ModuleScopes | None = None
        # A fork child of a process that used CUDA cannot use it (torch raises on any CUDA call).
        usable = self._torch.cuda.is_available() and not self._torch.cuda._is_in_bad_fork()
        self._cuda = usable if cuda is None else cuda and usable
        # Each window's conversion, and what outlives a window: each live tensor's last writer, the rank.
        self._writer = _WindowWriter(self._torch)
        self._native = profile_walk(self._torch)  # the C++ reading of each op's inside, when built
        # The CPU ops of a streamed recording come from the native op observer where it can do the
        # whole job and is built (tracer/torch_observer.py); GPU activity and scheduled windows need
        # torch.profiler. "auto" (the default) takes the observer only with its C++ window converter.
        self._observer: OpObserver | None = None
        self._walk: ObservedWalk | None = None
        self._native_windows: NativeWindowConverter | None = None
        wanted = engine or os.environ.get(ENGINE_ENV) or "auto"
        if wanted == "auto" and (op_observer(self._torch) is None or window_converter() is None):
            wanted = "profiler"
        if self._observer_wanted(wanted, all_threads):
            library = op_observer(self._torch)
            if library is not None:
                self._observer, self._walk = OpObserver.of(library), ObservedWalk(self._torch)
                converter = window_converter()  # else the windows convert in Python (same records)
                if converter is not None:
                    self._native_windows = NativeWindowConverter(converter, self._torch)
            else:
                print(f"dfcompass: process {os.getpid()}: the op observer is not built for this torch (python -m "
                      "tracer.native build): torch.profiler records", file=sys.stderr)
        self._profiler: Any = None
        self._profiler_options: dict[str, Any] = {}
        self._foreign: ForeignProfilers | None = None  # the program's own profilers, which we step aside for
        self._open_scopes: OpenScopes | None = None  # record_function scopes open now, per thread
        self._optimizer_hook: Any = None
        self._owner_thread = 0
        self._user_steps = False  # rec.step() was called: windows follow the user's steps
        self._optimizer_stepped = False
        self._window_start = 0.0
        self._converting = False
        # Outlive one window: thread names and forward scopes.
        self._os_tids: dict[int, int] = {}
        self._seq_scope: dict[int, str] = {}
        self._destroy_original: Any = None
        self.session: Session | None = None
        self.windows_written = 0
        self.windows_lost = 0
        self._window_ops = 0  # op executions of the window being converted (lost with it on an error)
        self.cost = RecorderCost()  # the program's time in our hooks and window cuts (tracer/recorder_cost.py)
        # Windows convert in fork children (tracer/window_handoff.py) when this platform allows.
        self._handoff: WindowHandoff | None = None
        self._window_thread: WindowThread | None = None  # the native converter's, off the program's thread
        self._cut_window_s = 0.0  # how long the window being converted ran
        self._convert_tid = 0  # the program's thread that cut the window being converted
        self._monotonic_offset: int | None = None  # the trace clock to the op observer's (_observer_offset)

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self) -> "TorchRecorder":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> "TorchRecorder":
        started = time.perf_counter_ns()
        try:
            return self._start()
        finally:
            self.cost.start_ns += time.perf_counter_ns() - started

    def _start(self) -> "TorchRecorder":
        torch = self._torch
        # The thread settings go into the metadata: the roofline's thread advice and parallelism read them.
        threads: dict[str, str | int] = {"torch_num_threads": torch.get_num_threads(),
                                         "torch_interop_threads": torch.get_num_interop_threads(),
                                         "torch_engine": self.engine}  # which engine recorded the ops
        if os.environ.get("OMP_NUM_THREADS"):
            threads["omp_num_threads"] = os.environ["OMP_NUM_THREADS"]
        if self._own_session and (running := active_session()) is not None and running.trace is not None:
            # `dfcompass record` of a program that records itself: one recorder per process (the
            # profiler is one per process too); the job's keeps recording, this one writes nothing.
            print(f"dfcompass: TorchRecorder({str(self._session_arg)!r}) is not recording: this process is "
                  f"already recorded into {running.trace.path}", file=sys.stderr)
            return self
        if self._own_session:
            options = dict(self._session_options)
            options["env"] = {**threads, **options.get("env", {})}
            self.session = Session(self._session_arg, **options).start()  # type: ignore[arg-type]
        else:
            self.session = self._session_arg or active_session()  # type: ignore[assignment]
            if self.session is None:
                raise RuntimeError("TorchRecorder needs a trace path or an active dfcompass session")
            if self.session.trace is not None:  # `dfcompass record`: the job's session, started before torch
                self.session.trace.update_env(**threads)
        self.session.device("cpu")
        if self._cuda:
            for index in range(torch.cuda.device_count()):
                self.session.device(f"cuda:{index}", torch.cuda.get_device_name(index))
        profiler = torch.profiler
        activities = [profiler.ProfilerActivity.CPU] + ([profiler.ProfilerActivity.CUDA] if self._cuda else [])
        # Streaming is a schedule of one-step windows: each step() ends one and starts the next.
        wait, warmup, active, repeat = self._schedule or (0, 0, 1, 0)
        with warnings.catch_warnings():  # torch advises a warmup; with wait=warmup=0 we accept the cost
            if not verbose():
                warnings.filterwarnings("ignore", message=".*warmup.*")
            schedule = profiler.schedule(wait=wait, warmup=warmup, active=active, repeat=repeat)
        config = _experimental_config(torch, profile_all_threads=self._all_threads, capture_overload_names=True,
                                      enable_cuda_sync_events=self._cuda)
        self._profiler_options = dict(activities=activities, record_shapes=True, profile_memory=self._record_memory,
                                      schedule=schedule, on_trace_ready=self._convert, experimental_config=config)
        self._profiler = self._new_profile()
        self._foreign = ForeignProfilers(torch, self._step_aside, self._come_back)
        self._foreign.install()
        if self._streaming:
            self._open_scopes = OpenScopes(torch, timed_hook(self.cost, self._after_scope))
            self._open_scopes.install()
        if self._record_modules or self._streaming:
            self._scopes = _ModuleScopes(torch, self._at_outermost_forward if self._streaming else None,
                                         record=self._record_modules, cost=self.cost)
            self._scopes.install()
        if self._streaming:
            from torch.optim.optimizer import register_optimizer_step_post_hook

            self._optimizer_hook = register_optimizer_step_post_hook(self._after_optimizer_step)
        self._watch_destroy()
        self._owner_thread = threading.get_ident()
        self._window_start = time.monotonic()
        with _kineto_log_filtered(), self._foreign.own():
            self._profiler.__enter__()
        if self._scopes is not None and self._record_modules:
            self._scopes.mark_thread()
        self.session.add_stop_hook(self.stop)  # a SIGTERM or exit that stops the session converts first
        self._start_chain()
        return self

    def _observer_wanted(self, wanted: str, all_threads: bool) -> bool:
        """Whether the op observer is asked for (or left to choose: "auto") and can do the whole job;
        one line when it was asked for and cannot."""
        if wanted not in ("observer", "profiler", "auto"):
            print(f"dfcompass: unknown PyTorch engine {wanted!r} (auto, profiler or observer): torch.profiler "
                  "records", file=sys.stderr)
            return False
        why = ("a scheduled recording (active=...)" if not self._streaming else "CUDA" if self._cuda
               else "all_threads=True" if all_threads else "")
        if wanted == "observer" and why:
            print(f"dfcompass: process {os.getpid()}: the op observer does not record {why}: torch.profiler "
                  "records", file=sys.stderr)
        return wanted in ("observer", "auto") and not why

    def _new_profile(self) -> Any:
        if self._observer is not None:
            return ObservedProfile(self._torch, self._observer, self._record_memory, self._convert)
        return self._torch.profiler.profile(**self._profiler_options)

    @property
    def engine(self) -> str:
        """What records the CPU ops: "observer" (tracer/torch_observer.py) or "profiler"."""
        return "observer" if self._observer is not None else "profiler"

    def _start_chain(self) -> None:
        """Convert windows in fork children. Not with CUDA: a fork child of a CUDA process has not been
        checked against CUPTI's state on a GPU machine yet, so GPU windows convert here."""
        # The native window converter runs on a thread of its own instead: a window costs it less
        # than a fork, its state stays in this process, and it lets go of the GIL.
        if self._native_windows is not None and handoff_mode() is not None and _cpus() > 1:
            self._window_thread = WindowThread(self._convert_here, self.cost.waited)
        elif not self._cuda and self._native_windows is None:
            self._handoff = WindowHandoff.start(self.session, self._chain_capture, self._chain_apply,
                                                on_drain=self.cost.waited)

    def _end_chain(self) -> None:
        """Wait for the converters and take their state: later windows convert here."""
        handoff, self._handoff = self._handoff, None
        if handoff is not None:
            handoff.end()
            self.cost.handoff_wait_ns += handoff.backpressure_ns  # inside the window cuts' time already
            self.cost.handed_off += handoff.forked

    def _chain_capture(self) -> dict[str, Any]:
        scopes = self._seq_scope
        if len(scopes) > _CHAIN_SEQ_SCOPES:  # insertion order is issue order: keep the newest
            scopes = dict(list(scopes.items())[-_CHAIN_SEQ_SCOPES:])
        return {"windows": (self.windows_written, self.windows_lost), "os_tids": self._os_tids, "seq_scope": scopes,
                "writer": self._writer.chain_state(), "walk": self._walk.chain_state() if self._walk else None}

    def _chain_apply(self, state: dict[str, Any]) -> None:
        self.windows_written, self.windows_lost = state["windows"]
        self._os_tids.update(state["os_tids"])
        self._seq_scope.clear()
        self._seq_scope.update(state["seq_scope"])
        self._writer.take_chain_state(state["writer"])
        if self._walk is not None and state["walk"] is not None:
            self._walk.take_chain_state(state["walk"])

    def step(self) -> None:
        """End one step (as ``torch.profiler.profile.step``)."""
        self._user_steps = True
        self.cost.user_steps += 1
        self._end_window()

    def _end_window(self) -> None:
        if self._profiler is None or self._converting or self._foreign is None or self._foreign.active:
            return
        self._optimizer_stepped = False
        now = time.monotonic()
        self._cut_window_s, self._window_start = now - self._window_start, now
        assert self.session is not None
        started = self.cost.window_started()
        with self.session.sigterm_deferred(), warnings.catch_warnings(), _kineto_log_filtered(), self._foreign.own():
            # "Profiler clears events at the end of each cycle": we convert each cycle as it ends.
            if not verbose():
                warnings.filterwarnings("ignore", message=".*clears events at the end of each cycle.*")
            self._profiler.step()
        self.cost.window_done(started)
        if self._scopes is not None and self._record_modules:
            self._scopes.mark_thread()

    def _after_optimizer_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        # Inside Optimizer.step's own record function: ending the window here would close a
        # profile under an open scope. The next outermost forward ends it instead.
        self._optimizer_stepped = True
        self.cost.optimizer_steps += 1

    def _at_outermost_forward(self, module: Any) -> None:
        if self._user_steps or threading.get_ident() != self._owner_thread:
            return  # the profiler is stopped and started only by the thread that started it
        self.cost.forwards += 1
        if self._open_scopes is not None and self._open_scopes.open():
            return  # under an open record_function: stopping the profiler there crashes torch
        due = self._optimizer_stepped or time.monotonic() - self._window_start >= self._flush_interval
        if due and _may_end_window_at(module):  # the frame walk only when a window is due
            self._end_window()

    def _after_scope(self) -> None:
        """The last record_function scope open on a thread closed: a program that wraps each whole
        step in one never reaches an outermost forward outside it, so a due window ends here."""
        try:
            if (self._user_steps or threading.get_ident() != self._owner_thread or self._converting
                    or (self._scopes is not None and self._scopes.open())):
                return
            due = self._optimizer_stepped or time.monotonic() - self._window_start >= self._flush_interval
            if due and not _in_data_loader():
                self._end_window()
        except Exception as exc:  # recording must never stop the program
            print(f"dfcompass: error: process {os.getpid()}: a profile window could not end: {exc}", file=sys.stderr)

    def _step_aside(self) -> None:
        """The program starts a profiler of its own: end our window (its ops are converted) and
        stop ours until the program's stops. torch runs one profiler at a time."""
        if self._profiler is None or self._converting:
            return
        if self._foreign is not None and self._foreign.blocks == 1:
            print(f"dfcompass: process {os.getpid()}: the program started its own torch profiler; dfcompass "
                  "records no PyTorch op while it runs (they are in the program's own profile)", file=sys.stderr)
        profiler, self._profiler = self._profiler, None
        self._cut_window_s = time.monotonic() - self._window_start
        started = self.cost.window_started()
        with _kineto_log_filtered():
            profiler.__exit__(None, None, None)
        self.cost.window_done(started)

    def _come_back(self) -> None:
        """The program's profiler stopped: profile again, in a new window."""
        if self._profiler is not None or self.session is None or not self.session.active:
            return
        self._profiler = self._new_profile()
        self._window_start = time.monotonic()
        with _kineto_log_filtered():
            self._profiler.__enter__()
        if self._scopes is not None and self._record_modules:
            self._scopes.mark_thread()

    def stop(self) -> None:
        foreign, self._foreign = self._foreign, None
        if foreign is None:
            return  # never started, or stopped already
        foreign.remove()
        if self._open_scopes is not None:
            self._open_scopes.remove()
            self._open_scopes = None
        profiler, self._profiler = self._profiler, None  # None while stepped aside for the program's profiler
        if self.session is not None:
            self.session.discard_stop_hook(self.stop)
        try:
            # The last window, with the wait for the converter children before it.
            started = self.cost.window_started()
            self._end_chain()
            if profiler is not None and not self._converting:  # not mid-conversion (a signal interrupted one)
                with _kineto_log_filtered():
                    profiler.__exit__(None, None, None)  # runs on_trace_ready for the last window
            window_thread, self._window_thread = self._window_thread, None
            if window_thread is not None:
                window_thread.end()
                self.cost.beside_ns += window_thread.cpu_ns
            self.cost.window_done(started)
            note_cost(self.session, self.cost)
        finally:
            if self._scopes is not None:
                self._scopes.remove()
            if self._optimizer_hook is not None:
                self._optimizer_hook.remove()
                self._optimizer_hook = None
            self._unwatch_destroy()
            if self._own_session and self.session is not None:
                self.session.stop()

    # ------------------------------------------------------------------ conversion
    def _convert(self, prof: Any) -> None:
        """on_trace_ready: write one window, in a converter child when there is a chain."""
        self._convert_tid = threading.get_native_id()
        self._writer.note_rank()  # here: a child does not ask torch.distributed
        if isinstance(prof, ObservedCut):  # whether its steps are the user's is known now, not later
            prof = prof._replace(user_steps=self._user_steps or not self._streaming)
            self.cost.ops_observed += len(prof.window.begins) // BEGIN_COLUMNS
            if self._observer is not None:
                self.cost.op_ns = self._observer.op_ns
        if self._window_thread is not None and isinstance(prof, ObservedCut):
            self._window_thread.submit(prof)
        elif self._handoff is not None:
            self._handoff.write(self._cut_window_s, lambda: self._convert_here(prof))
        else:
            self._convert_here(prof)

    @property
    def windows_ended(self) -> int:
        """Windows ended so far: written, lost, or with a converter child now."""
        in_flight = self._handoff.in_flight if self._handoff else 0
        return self.windows_written + self.windows_lost + in_flight + (
            self._window_thread.in_flight if self._window_thread else 0)

    @property
    def nodes_recorded(self) -> int:
        """Op executions written so far."""
        return self._writer.nodes_recorded

    @property
    def edges_recorded(self) -> int:
        """Tensor edges written so far."""
        return self._writer.edges_recorded

    def _watch_destroy(self) -> None:
        """Just before the program tears its process group down, note the rank and (streaming, on
        the owner thread) write the window so far: the job's collectives are then in the trace even
        if the teardown kills the process."""
        dist = getattr(self._torch, "distributed", None)
        if dist is None or not dist.is_available() or self._destroy_original is not None:
            return
        original = dist.destroy_process_group

        def destroy_process_group(*args: Any, **kwargs: Any) -> Any:
            self._writer.note_rank()
            if self._streaming and not self._user_steps and threading.get_ident() == self._owner_thread:
                self._end_window()
            return original(*args, **kwargs)

        self._destroy_original = original
        dist.destroy_process_group = destroy_process_group

    def _unwatch_destroy(self) -> None:
        if self._destroy_original is not None:
            self._torch.distributed.destroy_process_group = self._destroy_original
            self._destroy_original = None
