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
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from tracer.batch import Batch
from tracer.session import Session, active_session
from tracer.tf_graphs import FuncGraphSizes, watch_functions
from tracer.tf_xspace import Converted, GraphSet, XSpaceConverter


_active: "TFRecorder | None" = None


def active_recorder() -> "TFRecorder | None":
    """The TFRecorder recording now (``dfcompass record`` starts one), or None."""
    return _active


def _import_tf() -> Any:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TF's C++ start-up notices would bury the program's output
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
    active), it records into it. The profile is converted when the recorder stops.

    ``refresh_graphs`` (default on) clears TensorFlow's kernel cache at the start, so functions that
    ran before recording are instantiated again and their graphs are collected. Side effect: stateful
    random ops that keep their state in the kernel (``tf.random.normal`` with no generator) restart
    their sequence there. Off, functions that ran before recording give nodes without edges.
    """

    def __init__(self, trace: "str | os.PathLike[str] | Session | None" = None, *, refresh_graphs: bool = True,
                 **session_options: Any) -> None:
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
        self.session: Session | None = None
        self.result: Converted | None = None
        self.graphs: GraphSet | None = None  # the graphs that ran, once stopped
        self.sizes: FuncGraphSizes | None = None  # where the tensors' bytes came from, once stopped

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

        try:
            self._start(context)
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
        options = tf.profiler.experimental.ProfilerOptions(host_tracer_level=3, python_tracer_level=0,
                                                           device_tracer_level=1)
        tf.profiler.experimental.start(self._logdir, options=options)
        self.session.add_stop_hook(self.stop)  # a SIGTERM or exit that stops the session converts first

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
        self.end_step()
        self._step_open = (time.time_ns(), self._step_count, threading.get_native_id())
        self._step_count += 1

    def end_step(self) -> None:
        if self._step_open is not None:
            begin, number, tid = self._step_open
            self._steps.append((begin, time.time_ns(), number, tid))
            self._step_open = None

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
        logdir, self._logdir = self._logdir, None
        assert logdir is not None
        global _active
        if _active is self:
            _active = None
        session = self.session
        if session is not None:
            session.discard_stop_hook(self.stop)
        from tensorflow.python.eager import context

        try:
            self.end_step()
            try:
                self._tf.profiler.experimental.stop()
            except Exception as exc:  # the program stopped TF's profiler itself
                raise RuntimeError(f"TensorFlow's profiler was already stopped, its events are lost ({exc})") from exc
            finally:
                metadata = context.export_run_metadata()
                context.disable_run_metadata()
            if session is not None and session.active and session.trace is not None:
                self.result = self._convert(session, Path(logdir), metadata)
        finally:
            shutil.rmtree(logdir, ignore_errors=True)
            if self._own_session and session is not None:
                session.stop()

    def _convert(self, session: Session, logdir: Path, metadata: Any) -> Converted:
        from tensorflow.tsl.profiler.protobuf import xplane_pb2

        space = xplane_pb2.XSpace()
        files = sorted(logdir.glob("plugins/profile/*/*.xplane.pb"))
        if not files:
            raise RuntimeError(f"{logdir}: the TensorFlow profiler wrote no .xplane.pb")
        space.ParseFromString(files[-1].read_bytes())
        graphs = self.graphs = GraphSet([list(fg.partition_graphs) for fg in metadata.function_graphs])
        assert session.trace is not None
        batch = Batch(session, session.trace.origin_ts, session.clock.offset_to_wall_ns())
        self.sizes = FuncGraphSizes()
        converter = XSpaceConverter(batch, graphs, self.sizes, session.new_node_id,
                                    session.new_tensor_id, [step[:3] for step in self._steps], pid=os.getpid(),
                                    new_annotation_id=session.new_annotation_id)
        result = converter.convert(space)
        for begin, end, step, tid in self._steps:  # on the thread that marked the step
            batch.add("step_begin", f"tf-steps-{tid}", begin, step, tid)
            batch.add("step_end", f"tf-steps-{tid}", end, step, tid)
        batch.flush()
        return result


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


def _give_way_to_the_programs_profiler(recorder: TFRecorder) -> None:
    import tensorflow as tf
    from tensorflow.python.profiler import profiler_v2

    original = profiler_v2.start

    def start(*args: Any, **kwargs: Any) -> Any:
        if recorder.recording:
            print("dfcompass: the program starts TensorFlow's profiler: dfcompass records TensorFlow up to here",
                  file=sys.stderr)
            recorder.stop()
        return original(*args, **kwargs)

    profiler_v2.start = start
    tf.profiler.experimental.start = start
