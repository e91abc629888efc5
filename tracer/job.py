"""Recording a whole job: every Python process of a run writes its own trace into one job folder.

``dfcompass record -o JOB -- cmd`` names JOB in :data:`JOB_ENV` for the program and every process
it starts; each Python process that starts (the program, ``spawn``/``forkserver`` children,
torchrun's agents and workers, ``mp.spawn`` ranks) and each ``fork`` child writes
``JOB/<host>-<pid>/``, a complete CTF trace of its own.

Why one trace per process, not one trace with streams from many processes: string ids, node ids
and tensor ids are numbered per process without any coordination, so processes never share
state or lock across each other; a process killed mid-run damages only its own trace. It is the
layout LTTng uses for per-process buffers, and both readers open it as one job: babeltrace2 merges
every trace under a folder when their clocks are absolute (ours are: CLOCK_MONOTONIC plus an
offset to wall time, one offset per host shared through :data:`tracer.clock.OFFSET_ENV`), and
Trace Compass opens the traces together as an experiment.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path
from types import ModuleType

from tracer import schema
from tracer.fork_chain import in_converter_fork
from tracer.session import Session
from tracer.stack import DATA_LOADER_FILE, in_file
from tracer.verbosity import quiet_tensorflow

JOB_ENV = "DFCOMPASS_RECORD_DIR"
TORCH_ENV = "DFCOMPASS_TORCH"
TF_ENV = "DFCOMPASS_TF"  # "0": do not start a TFRecorder when the program imports TensorFlow
FOLLOW_ENV = "DFCOMPASS_FOLLOW"  # "0": record the first process only
# torch.compile's compiler pool: a process (and its pool of children) that inductor starts to build
# kernels. It runs no op of the program; recording it would add a process per core to the job.
_COMPILE_WORKER_DIR = os.path.join("_inductor", "compile_worker")


def is_compile_worker(command: list[str]) -> bool:
    """Whether the interpreter's command line (``sys.orig_argv``) runs inductor's compile worker
    pool, as a script or with ``-m``; the script comes after at most a few interpreter options."""
    return any(_COMPILE_WORKER_DIR in arg or arg == "torch._inductor.compile_worker" for arg in command[1:5])


def process_trace_path(job: Path) -> Path:
    """An unused ``JOB/<host>-<pid>`` folder for this process (a reused pid gets ``.1``, ``.2``...)."""
    base = f"{_safe(socket.gethostname())}-{os.getpid()}"
    path, n = job / base, 0
    while (path / "metadata").exists():
        n += 1
        path = job / f"{base}.{n}"
    return path


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name) or "host"


class _JobProcess:
    """This process's part of the job: its session, its PyTorch recorder, and forks to follow."""

    def __init__(self, job: Path, torch: bool, tensorflow: bool = True) -> None:
        self.job = job
        self.torch = torch
        self.tensorflow = tensorflow
        self.session: Session | None = None
        self.role = ""

    def start(self) -> None:
        env: dict[str, str | int] = {schema.ENV_PPID: os.getppid(), **({schema.ENV_PROCESS_ROLE: self.role} if self.role else {})}
        self.session = Session(process_trace_path(self.job), env=env).start()
        self.session.add_stop_hook(self._note_spawned_worker)
        from tracer.import_hooks import call_after_import

        if self.torch:
            call_after_import("torch", self._start_torch_recorder)
        if self.tensorflow:
            quiet_tensorflow()  # before TF loads: its C++ notices bury the output
            call_after_import("tensorflow", self._start_tf_recorder)

    def _start_torch_recorder(self, module: ModuleType) -> None:
        try:
            from tracer.torch_source import TorchRecorder

            if module.cuda._is_in_bad_fork():
                # Kineto does not start again in a fork child of a process that used CUDA (it
                # hung on an H200); such a child (a DataLoader worker) records no PyTorch ops.
                print(f"dfcompass: process {os.getpid()} is a fork child of a CUDA process: its PyTorch "
                      "ops are not recorded", file=sys.stderr)
                return
            # It stops when the session does (a stop hook: exit, SIGTERM), converting first.
            TorchRecorder(self.session).start()
        except Exception as exc:  # tracing must never stop the program from running
            print(f"dfcompass: error: cannot record PyTorch in process {os.getpid()}: {exc}", file=sys.stderr)

    def _start_tf_recorder(self, _module: ModuleType) -> None:
        try:
            from tracer.tf_source import start_when_ready

            assert self.session is not None
            start_when_ready(self.session)  # converts when the session stops (a stop hook)
        except Exception as exc:  # tracing must never stop the program from running
            print(f"dfcompass: error: cannot record TensorFlow in process {os.getpid()}: {exc}", file=sys.stderr)

    def after_fork_in_child(self) -> None:
        """A fork child: its parent's session is off here (tracer.session); start its own.

        TensorFlow is not recorded in a fork child: its runtime does not survive a fork (TF's own
        rule), and its profiler is the parent's. A window converter (tracer/fork_chain.py) is no new
        process of the job: it writes into its parent's trace."""
        if in_converter_fork():
            return
        self.tensorflow = False
        if _forked_by_data_loader():
            self.role = schema.DATA_LOADER_WORKER
        try:
            self.start()
            _stop_at_multiprocessing_exit(self.session)
            if "multiprocessing" in sys.modules:
                from multiprocessing import util

                # A multiprocessing child clears its finalizers right after the fork, then runs
                # its after-fork callbacks: register the finalizer again from there.
                util.register_after_fork(self, _JobProcess._finalize_session)
        except Exception as exc:
            print(f"dfcompass: error: cannot record forked process {os.getpid()}: {exc}", file=sys.stderr)

    def _finalize_session(self) -> None:
        _stop_at_multiprocessing_exit(self.session)

    def _note_spawned_worker(self) -> None:
        """A DataLoader worker started by spawn or forkserver is known only once it runs the
        worker loop (torch sets its worker info there): say so in the metadata when it stops."""
        data = sys.modules.get("torch.utils.data")
        if self.role or data is None or self.session is None or self.session.trace is None:
            return
        try:
            if data.get_worker_info() is not None:
                self.role = schema.DATA_LOADER_WORKER
                self.session.trace.update_env(**{schema.ENV_PROCESS_ROLE: self.role})
        except Exception:  # noqa: BLE001 - the role is a label; it must never stop the program
            pass


def _forked_by_data_loader() -> bool:
    """Whether this fork child was started by a DataLoader: right after the fork the child still
    runs the parent's stack, which holds the loader's iterator when it starts its workers."""
    return in_file(DATA_LOADER_FILE)


def _stop_at_multiprocessing_exit(session: Session | None) -> None:
    """multiprocessing ends a fork child with os._exit, which skips atexit; its finalizers still run."""
    if session is None or "multiprocessing" not in sys.modules:
        return
    from multiprocessing import util

    util.Finalize(None, session.stop, exitpriority=1000)


def start_from_environment() -> _JobProcess | None:
    """Called at interpreter start (tracer/_autostart): join the job named in :data:`JOB_ENV`.

    With :data:`FOLLOW_ENV` = "0" the job variable is removed, so only this process records.
    """
    job = os.environ.get(JOB_ENV)
    if not job:
        return None
    follow = os.environ.get(FOLLOW_ENV, "1") != "0"
    torch = os.environ.get(TORCH_ENV, "1") != "0"
    tensorflow = os.environ.get(TF_ENV, "1") != "0"
    if is_compile_worker(getattr(sys, "orig_argv", [sys.executable, *sys.argv])):
        os.environ.pop(JOB_ENV, None)  # nor its pool's children
        return None
    if not follow:
        os.environ.pop(JOB_ENV, None)
    process = _JobProcess(Path(job), torch, tensorflow)
    process.start()
    _stop_at_multiprocessing_exit(process.session)
    if follow:
        os.register_at_fork(after_in_child=process.after_fork_in_child)
    return process
