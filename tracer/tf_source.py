"""TensorFlow source: tf.function graph ops with their exact edges, and eager ops, into a dfcompass trace.

Mechanism (docs/tensorflow.md): TensorFlow's own profiler (``tf.profiler.experimental``) for the
times, and the runtime's run metadata (``context.enable_run_metadata``) for the graphs that ran:
the post-optimisation partition graphs, whose node names are the profile's (``<node>:<OpType>``)
and whose nodes carry the device they were placed on. Tensor sizes come from the traced
``FuncGraph`` of each function (static shapes, :mod:`tracer.tf_graphs`). :mod:`tracer.tf_xspace` does the
conversion.

``with TFRecorder("out/trace") as rec:`` records everything in between; ``rec.step()`` (or the
Keras callback from ``rec.keras_callback()``) marks steps. ``dfcompass record -- python prog.py``
starts one on its own when the program imports TensorFlow.

TensorFlow is imported lazily: the rest of ``tracer`` still needs only the standard library.
"""

from __future__ import annotations

import contextlib
import gc
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from tracer.batch import Batch
from tracer.import_hooks import call_after_import
from tracer.recorder_cost import RecorderCost, note_cost
from tracer.session import Session, active_session
from tracer.tf_graphs import FuncGraphSizes, watch_functions
from tracer.tf_xspace import Converted, GraphSet, XSpaceConverter
from tracer.verbosity import quiet_tensorflow
from tracer.window_handoff import WindowHandoff


_active: "TFRecorder | None" = None


def active_recorder() -> "TFRecorder | None":
    """The TFRecorder recording now (``dfcompass record`` starts one), or None."""
    return _active


def _import_tf() -> Any:
    quiet_tensorflow()  # TF's C++ start-up notices would bury the program's output
    try:
        import tensorflow as tf
    except ImportError as exc:
        raise RuntimeError("recording TensorFlow needs tensorflow: pip install 'dfcompass[tf]'") from exc
    watch_functions()
    return tf


if "tensorflow" in sys.modules:  # functions the program makes from here on are found without a heap scan
    watch_functions()


class TFRecorder:
    """Record a TensorFlow program into a dfcompass trace, like ``tf.profiler.experimental.start``.

    Given a path, the recorder runs its own :class:`Session`; given a session (or with one already
    active), it records into it.

    Windows: at the end of a step (:meth:`step`, :meth:`end_step`, a Keras training batch unless the
    program marks steps itself) the profile so far is cut off and written (in a fork child when that
    pays, tracer/window_handoff.py), and TF's profiler starts again, so a program killed later keeps
    its earlier steps and TF's profiler never holds a whole run. A restart costs 15-30 ms, so a
    window holds as many steps as keep restarts under ``restart_share`` of the run (and at least
    ``min_window_s``). With no steps marked the profile is written when the recorder stops.

    ``refresh_graphs`` (default on) clears TensorFlow's kernel cache at the start, so functions that
    ran before recording are instantiated again and their graphs are collected. Side effect: stateful
    random ops that keep their state in the kernel (``tf.random.normal`` with no generator) restart
    their sequence there. Off, functions that ran before recording give nodes without edges.
    """

    def __init__(self, trace: "str | os.PathLike[str] | Session | None" = None, *, refresh_graphs: bool = True,
                 min_window_s: float = 0.5, restart_share: float = 0.05, **session_options: Any) -> None:
        self._tf = _import_tf()
        self._refresh_graphs = refresh_graphs
        self._own_session = isinstance(trace, (str, os.PathLike))
        self._session_arg = trace
        self._session_options = session_options
        self._logdir: str | None = None
        self._pid = 0
        self._steps: list[tuple[int, int, int, int]] = []  # (begin, end, step, tid of the marking thread), epoch ns
        self._step_open: tuple[int, int, int] | None = None  # (begin, step, tid)
        self._step_count = 0
        self._steps_written = 0
        self._min_window_s = min_window_s
        self._restart_share = restart_share
        self._restart_s = 0.03  # a profiler restart, measured at each cut; a prior until the first
        self._window_start = 0.0
        self._cutting = False
        self._handoff: WindowHandoff | None = None  # cut windows convert in fork children (tracer/window_handoff.py)
        self.windows_handed_off = 0
        self.cost = RecorderCost()  # the program's time in the recorder: start, window cuts, stop
        self.user_steps = False  # the program marks steps: Keras's batches are then not marked on their own
        self.session: Session | None = None
        self.result = Converted()
        self.graphs = GraphSet()  # the graphs that ran (the runtime reports each function's once)
        self.sizes = FuncGraphSizes()  # where the tensors' bytes came from

    def __enter__(self) -> "TFRecorder":
        return self.start()

    def __exit__(self, exc_type: object, *exc: object) -> None:
        try:
            self.stop()
        except RuntimeError as error:
            if exc_type is None:
                raise
            # the program's own exception is the one to see; ours gets one line
            print(f"dfcompass: error: TensorFlow recording: {error}", file=sys.stderr)

    @property
    def recording(self) -> bool:
        return self._logdir is not None and self._pid == os.getpid()

    def start(self) -> "TFRecorder":
        """Start recording. A failure undoes what was set up (session, run metadata, profiler)
        and raises RuntimeError with one line."""
        if self._logdir is not None:
            raise RuntimeError("this TFRecorder is already recording")
        from tensorflow.python.eager import context

        started = time.perf_counter_ns()
        try:
            self._start(context)
            self.cost.start_ns += time.perf_counter_ns() - started
        except Exception as exc:
            self._undo_start(context)
            raise RuntimeError(f"cannot start recording TensorFlow: {type(exc).__name__}: "
                               f"{str(exc).splitlines()[0] if str(exc) else ''}") from exc
        global _active
        _active = self
        return self

    def _start(self, context: Any) -> None:
        tf = self._tf
        if self._own_session:
            options = dict(self._session_options)
            options["env"] = {"tf_version": tf.__version__,
                              "tf_intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
                              "tf_inter_op_threads": tf.config.threading.get_inter_op_parallelism_threads(),
                              **options.get("env", {})}
            self.session = Session(self._session_arg, **options).start()  # type: ignore[arg-type]
        else:
            self.session = self._session_arg or active_session()  # type: ignore[assignment]
            if self.session is None:
                raise RuntimeError("TFRecorder needs a trace path or an active dfcompass session")
        self.session.device("cpu")
        for gpu in tf.config.list_physical_devices("GPU"):
            self.session.device(f"cuda:{gpu.name.rsplit(':', 1)[-1]}")
        self._pid = os.getpid()
        self._logdir = tempfile.mkdtemp(prefix="dfcompass-tf-")
        context.enable_run_metadata()
        if self._refresh_graphs:
            # The runtime hands out a function's graphs when it instantiates the function: functions
            # that ran before this point are instantiated again, so their graphs (and edges) are seen.
            context.context().clear_kernel_cache()
        self._start_profiler()
        call_after_import("keras.src.callbacks.callback_list", _mark_keras_batches)
        self.session.add_stop_hook(self.stop)  # a SIGTERM or exit that stops the session converts first
        from tensorflow.tsl.profiler.protobuf import xplane_pb2  # noqa: F401 - imported here, not in a fork child

        if not tf.config.list_physical_devices("GPU"):  # as PyTorch's: no fork beside CUPTI until checked on a GPU
            self._handoff = WindowHandoff.start(self.session, self._chain_capture, self._chain_apply,
                                                on_drain=self.cost.waited)

    def _start_profiler(self) -> None:
        tf = self._tf
        options = tf.profiler.experimental.ProfilerOptions(host_tracer_level=3, python_tracer_level=0,
                                                           device_tracer_level=1)
        tf.profiler.experimental.start(self._logdir, options=options)
        self._window_start = time.monotonic()

    def _undo_start(self, context: Any) -> None:
        with contextlib.suppress(Exception):
            context.disable_run_metadata()
        if self._logdir is not None:
            shutil.rmtree(self._logdir, ignore_errors=True)
            self._logdir = None
        if self._own_session and self.session is not None:
            self.session.stop()

    # ------------------------------------------------------------------ steps
    def step(self) -> None:
        """End the step in progress (if any) and begin the next one."""
        self.end_step()
        self.begin_step()

    def begin_step(self) -> None:
        self.user_steps = True
        self._begin_step()

    def end_step(self) -> None:
        self.user_steps = True
        self._end_step()

    def _begin_step(self) -> None:
        self._end_step()
        self._step_open = (time.time_ns(), self._step_count, threading.get_native_id())
        self._step_count += 1

    def _end_step(self) -> None:
        if self._step_open is not None:
            begin, number, tid = self._step_open
            self._steps.append((begin, time.time_ns(), number, tid))
            self._step_open = None
            self.cost.user_steps += 1
            if self.recording and not self._cutting and self._window_due():
                self._cut()

    def _window_due(self) -> bool:
        ran = time.monotonic() - self._window_start
        return ran >= max(self._min_window_s, self._restart_s / self._restart_share)

    def _cut(self) -> None:
        """Write the profile so far and go on recording in a new one (at a step end)."""
        from tensorflow.python.eager import context

        session = self.session
        assert session is not None and self._logdir is not None
        cut_started = self.cost.window_started()
        started = time.perf_counter()
        window_s = time.monotonic() - self._window_start
        self._cutting = True
        logdir, self._logdir = self._logdir, None
        try:
            with session.sigterm_deferred():
                try:
                    self._tf.profiler.experimental.stop()
                except Exception as exc:  # the program stopped TF's profiler itself: nothing more to record
                    self._finish(context, logdir)
                    print(f"dfcompass: error: TensorFlow's profiler was stopped by the program ({exc}): "
                          "dfcompass recorded TensorFlow up to the previous window", file=sys.stderr)
                    return
                metadata = context.export_run_metadata()  # the graphs instantiated so far; clears them
                self._logdir = tempfile.mkdtemp(prefix="dfcompass-tf-")
                self._start_profiler()
                self._restart_s = time.perf_counter() - started
                convert = self._window_converter(Path(logdir), metadata)
                if self._handoff is not None:
                    self._handoff.write(window_s, convert)
                else:
                    convert()
        finally:
            self._cutting = False
            self.cost.window_done(cut_started)

    def keras_callback(self) -> Any:
        """A Keras callback that makes each training batch a step."""
        recorder = self

        class _Steps(self._tf.keras.callbacks.Callback):  # type: ignore[name-defined]
            def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
                recorder.begin_step()

            def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
                recorder.end_step()

        return _Steps()

    # ------------------------------------------------------------------ stop and convert
    def stop(self) -> None:
        """Stop the profiler and write what it recorded. Does nothing in a forked child (the
        profile is the parent's) or when not recording; raises RuntimeError (one line) if the
        profile cannot be read, after the trace is closed."""
        if not self.recording:
            return
        from tensorflow.python.eager import context

        logdir, self._logdir = self._logdir, None
        assert logdir is not None
        started = self.cost.window_started()  # the last window: its conversion, the wait for the children
        self._cutting = True  # the open step ends without a cut
        try:
            self._end_step()
        finally:
            self._cutting = False
        try:
            self._tf.profiler.experimental.stop()
        except Exception as exc:  # the program stopped TF's profiler itself
            self._finish(context, logdir)
            raise RuntimeError(f"TensorFlow's profiler was already stopped, its events are lost ({exc})") from exc
        try:
            metadata = context.export_run_metadata()
        finally:
            self._finish(context, None)
        try:
            self._end_handoff()
            self._convert_window(Path(logdir), *self._window_input(metadata))
            self.cost.window_done(started)
            note_cost(self.session, self.cost)
        finally:
            if self._own_session and self.session is not None:
                self.session.stop()

    def _finish(self, context: Any, logdir: str | None) -> None:
        """Recording is over: run metadata off, this recorder no longer the active one or a stop hook,
        the window converters done."""
        self._end_handoff()
        global _active
        if _active is self:
            _active = None
        self._logdir = None
        with contextlib.suppress(Exception):
            context.disable_run_metadata()
        if self.session is not None:
            self.session.discard_stop_hook(self.stop)
        if logdir is not None:
            shutil.rmtree(logdir, ignore_errors=True)
            if self._own_session and self.session is not None:
                self.session.stop()

    # ------------------------------------------------------------------ windows in fork children
    def _end_handoff(self) -> None:
        """Wait for the window converters and take their counts: the last window converts here."""
        handoff, self._handoff = self._handoff, None
        if handoff is not None:
            handoff.end()
            self.windows_handed_off = self.cost.handed_off = handoff.forked
            self.cost.handoff_wait_ns += handoff.backpressure_ns

    def _chain_capture(self) -> Converted:
        return self.result

    def _chain_apply(self, result: Converted) -> None:
        self.result = result

    def _window_input(self, metadata: Any) -> tuple[list[tuple[int, int, int, int]], list[tuple[int, int, int]]]:
        """Here, at the cut: the window's new graphs in, and the steps it writes (those that ended
        since the last window) with all steps so far (each node's step is looked up in them)."""
        self.graphs.add(list(fg.partition_graphs) for fg in metadata.function_graphs)
        ended, self._steps_written = self._steps[self._steps_written:], len(self._steps)
        return ended, [step[:3] for step in self._steps]

    def _window_converter(self, logdir: Path, metadata: Any) -> Callable[[], None]:
        """A cut window's conversion, to run here or in a converter child: a failure loses that
        window, never the program's step."""
        ended, steps = self._window_input(metadata)

        def convert() -> None:
            try:
                self._convert_window(logdir, ended, steps)
            except Exception as exc:
                self.result.windows_lost += 1
                print(f"dfcompass: error: process {os.getpid()}: a TensorFlow profile window was not recorded: "
                      f"{type(exc).__name__}: {exc}", file=sys.stderr)

        return convert

    def _convert_window(self, logdir: Path, ended: list[tuple[int, int, int, int]],
                        steps: list[tuple[int, int, int]]) -> None:
        """Write one profile (a window) and the steps that ended in it; then remove its folder."""
        try:
            session = self.session
            if session is not None and session.active and session.trace is not None:
                self.result.add(self._convert(session, logdir, ended, steps))
        finally:
            shutil.rmtree(logdir, ignore_errors=True)

    def _convert(self, session: Session, logdir: Path, ended: list[tuple[int, int, int, int]],
                 steps: list[tuple[int, int, int]]) -> Converted:
        from tensorflow.tsl.profiler.protobuf import xplane_pb2

        space = xplane_pb2.XSpace()
        files = sorted(logdir.glob("plugins/profile/*/*.xplane.pb"))
        if not files:
            raise RuntimeError(f"{logdir}: the TensorFlow profiler wrote no .xplane.pb")
        space.ParseFromString(files[-1].read_bytes())
        assert session.trace is not None
        batch = Batch(session, session.trace.origin_ts, session.clock.offset_to_wall_ns())
        converter = XSpaceConverter(batch, self.graphs, self.sizes, session.new_node_id, session.new_tensor_id,
                                    steps, pid=self._pid, new_annotation_id=session.new_annotation_id)
        with _gc_paused():  # the conversion makes objects by the ten thousand: collections cost 0.3 s a window
            result = converter.convert(space)
        result.windows = 1
        for begin, end, step, tid in ended:  # on the thread that marked the step
            batch.add("step_begin", f"tf-steps-{tid}", begin, step, tid)
            batch.add("step_end", f"tf-steps-{tid}", end, step, tid)
        batch.flush()
        return result


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def start_when_ready(session: Session) -> None:
    """For ``dfcompass record``: record TensorFlow into `session` once the program's TensorFlow is set up.

    Starting at import would set TF's runtime up before the program configures it (thread pools,
    logical devices, GPU memory growth must come first), so the recorder starts right after the
    runtime's context is initialised: the program's first op, or its first device query. If the
    program then starts TF's own profiler (tf.profiler.experimental.start, Keras's TensorBoard
    profile_batch), only one can run: the recorder gives way, keeping what it recorded so far.
    """
    from tensorflow.python.eager import context

    watch_functions()  # before the program makes its first function

    def start() -> None:
        try:
            recorder = TFRecorder(session).start()
        except Exception as exc:  # tracing must never stop the program from running
            print(f"dfcompass: error: cannot record TensorFlow in process {os.getpid()}: {exc}", file=sys.stderr)
            return
        _give_way_to_the_programs_profiler(recorder)

    if context.context()._context_handle is not None:  # already set up (the program initialised it)
        start()
        return
    original = context.Context.ensure_initialized

    def ensure_initialized(self: Any) -> None:
        original(self)
        if context.Context.ensure_initialized is ensure_initialized:  # once, and not from inside start()
            context.Context.ensure_initialized = original
            start()

    context.Context.ensure_initialized = ensure_initialized


def _mark_keras_batches(module: Any) -> None:
    """Each Keras training batch is a step of the recorder recording now (and may end a window),
    unless the program marks steps itself. Installed once."""
    callbacks = module.CallbackList
    if getattr(callbacks, "_dfcompass_steps", False):
        return
    callbacks._dfcompass_steps = True
    begin, end = callbacks.on_train_batch_begin, callbacks.on_train_batch_end

    def on_train_batch_begin(self: Any, batch: Any, logs: Any = None) -> Any:
        recorder = _active
        if recorder is not None and recorder.recording and not recorder.user_steps:
            recorder._begin_step()
        return begin(self, batch, logs)

    def on_train_batch_end(self: Any, batch: Any, logs: Any = None) -> Any:
        result = end(self, batch, logs)
        recorder = _active
        if recorder is not None and recorder.recording and not recorder.user_steps:
            recorder._end_step()
        return result

    callbacks.on_train_batch_begin, callbacks.on_train_batch_end = on_train_batch_begin, on_train_batch_end


def _give_way_to_the_programs_profiler(recorder: TFRecorder) -> None:
    import tensorflow as tf
    from tensorflow.python.profiler import profiler_v2

    original = profiler_v2.start

    def start(*args: Any, **kwargs: Any) -> Any:
        if recorder.recording and not recorder._cutting:  # not the recorder's own restart at a window cut
            print("dfcompass: the program starts TensorFlow's profiler: dfcompass records TensorFlow up to here",
                  file=sys.stderr)
            recorder.stop()
        return original(*args, **kwargs)

    profiler_v2.start = start
    tf.profiler.experimental.start = start
