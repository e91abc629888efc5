"""``dfcompass record``: a program run with recording on, every Python process of it traced into
the job folder; and the embedded workloads, which record themselves (``demo``)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from tc_analyses.errors import ConfigurationError, DfcompassError
from tracer.job import JOB_ENV
from tracer.verbosity import verbose


def _package_root() -> str:
    import tracer

    return str(Path(tracer.__file__).resolve().parent.parent)


@dataclass
class Recorded:
    """What ``dfcompass record`` left: the program's exit code and the job's process traces."""

    code: int
    job: Path
    traces: list[Any]  # tc_analyses.reader.job.ProcessTrace, one per recorded process

    def cost_lines(self, most: int = 8) -> list[str]:
        """What recording cost each process that ran a framework recorder, a line each (the first
        `most`, then how many more)."""
        from tracer.recorder_cost import cost_line

        lines = [f"{trace.label}: {line}" if len(self.traces) > 1 else line
                 for trace in self.traces if (line := cost_line(trace.env)) is not None]
        return lines[:most] + ([f"... and {len(lines) - most} more processes"] if len(lines) > most else [])

    def warning(self) -> str | None:
        """Why the user should doubt this job: nothing recorded at all, or no node anywhere."""
        if any(t.has_nodes() for t in self.traces):
            return None
        return (f"{self.job}: {len(self.traces)} process trace(s) but no dataflow node in any: if the work ran "
                "in child processes, they were not recorded (not Python, started with a cleared environment, "
                "or DFCOMPASS_FOLLOW=0)")


def _process_is_gone(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive, owned by another user
        return False
    return False


def _wait_for_window_converters(traces: list[Any]) -> bool:
    """Profile windows convert in fork children that outlive a killed program (tracer/fork_chain.py):
    wait until they have written them. Whether any trace was waited for."""
    from tracer.fork_chain import wait_for_converters

    waited = False
    for trace in traces:
        if trace.host != socket.gethostname():
            continue
        started = time.monotonic()
        if not wait_for_converters(trace.path):
            print(f"dfcompass record: {trace.path}: a window converter of process {trace.pid} is still "
                  "writing after 120 s; its last windows may be missing", file=sys.stderr)
        waited = waited or time.monotonic() - started > 0.01
    return waited


def _cut_half_written_packets(traces: list[Any]) -> None:
    """A process killed while it appends a packet leaves that packet half-written: Linux ends a
    write at a page boundary for a fatal signal (SIGKILL, the OOM killer), and any process of the
    job may be the one killed. Cut such tails of the processes that are gone, so the trace opens
    without `dfcompass repair`; say what was cut, and how many events a process could not write
    (a full disk), which the trace reports as discarded. Reads packet headers only."""
    from tc_analyses.errors import TraceError
    from tc_analyses.reader.repair import repair_and_count

    for trace in traces:
        if trace.host != socket.gethostname() or not _process_is_gone(trace.pid):
            continue  # another host's process, or one still writing (an orphaned child)
        try:
            cuts, discarded = repair_and_count(trace.path)
        except (TraceError, OSError) as exc:
            print(f"dfcompass record: {trace.path}: not checked for a half-written packet: {exc}", file=sys.stderr)
            continue
        for cut in cuts:
            print(f"dfcompass record: {cut.path}: cut {cut.dropped_bytes:,} bytes that the end of process "
                  f"{trace.pid} left half-written ({cut.problem})", file=sys.stderr)
        if discarded:
            print(f"dfcompass record: {trace.path}: {discarded:,} events were not written and are reported as "
                  "discarded (Trace Compass shows them as lost events)", file=sys.stderr)


def run_recorded(output: Path, command: list[str], overwrite: bool, torch: bool = True,
                 extra_env: Mapping[str, str] | None = None, stdout: Any = None, calibrate: bool = True,
                 torch_engine: str | None = None) -> Recorded:
    """Run `command` with dfcompass recording the job into the folder `output`.

    Every Python process of the job writes ``output/<host>-<pid>/`` (tracer/job.py). `torch=False`
    leaves PyTorch's profiler off (programs that record their own nodes, such as graph programs,
    would otherwise get every aten op twice); `extra_env` is added to the environment; `stdout`
    redirects the program's standard output (None: inherited). `calibrate` measures this machine's
    hand-over and lane contention after the run and stores them with the job (tracer/calibrate.py):
    what a placement plan's range needs; the re-runs of `verify` leave it off. `torch_engine`: what
    records the CPU ops ("profiler" or "observer"; None: the environment's choice)."""
    from tc_analyses.reader.job import job_traces
    from tracer import job, schema
    from tracer.clock import OFFSET_ENV, measure_wall_offset_ns

    if output.exists() and not output.is_dir():
        raise ConfigurationError(f"{output}: is a file; -o names the folder the trace goes into")
    script = _script_of(command)
    if script is not None and not os.path.exists(script):  # said before anything runs or is made
        raise ConfigurationError(f"{script}: does not exist")
    created = not output.exists()
    try:  # a folder dfcompass cannot write is said before the program runs, not after
        output.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=output).close()
    except OSError as exc:
        raise ConfigurationError(f"{output}: cannot write the trace there ({exc.strerror or exc})") from None
    old = job_traces(output)
    if old and not overwrite:
        raise ConfigurationError(f"{output}: already holds a trace (use --overwrite to replace it)")
    for trace in old:  # only trace folders go: anything else the user keeps there stays
        shutil.rmtree(trace.path)
    if old:  # the old run's calibration is not this run's
        (output / schema.CALIBRATION_FILE).unlink(missing_ok=True)
    if command[0].endswith(".py"):
        command = [sys.executable, *command]
    elif command[0] in ("python", "python3"):  # the Python dfcompass runs on (its venv), not PATH's
        command = [sys.executable, *command[1:]]
    autostart = str(Path(_package_root()) / "tracer" / "_autostart")
    env = dict(os.environ)
    env[job.JOB_ENV] = str(output.resolve())
    env[OFFSET_ENV] = str(measure_wall_offset_ns())  # one time base for the processes of this host
    if not torch:
        env[job.TORCH_ENV] = "0"  # else the user's own DFCOMPASS_TORCH stands
    if torch_engine:
        from tracer.torch_observer import ENGINE_ENV

        env[ENGINE_ENV] = torch_engine
    env.update(extra_env or {})
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [autostart, _package_root(), env.get("PYTHONPATH")]))
    from tc_analyses.child_process import run_child

    try:
        code = run_child(command, env, stdout)
    except FileNotFoundError:
        if created and not any(output.iterdir()):
            output.rmdir()
        raise ConfigurationError(f"{command[0]}: command not found") from None
    traces = job_traces(output) if output.is_dir() else []
    if _wait_for_window_converters(traces):
        traces = job_traces(output)
    if not traces:
        error = NoTrace(output, command[0], code)  # before the folder goes: a full disk is seen there
        if created and not any(output.iterdir()):
            output.rmdir()
        raise error
    _cut_half_written_packets(traces)
    # A program that failed is rarely planned from, and a test of crashes should not pay ~2 s each;
    # one stopped with Ctrl-C (a long training run cut short) is.
    if calibrate and code in (0, 130, -signal.SIGINT):
        from tracer.calibrate import calibrate_into

        if (problem := calibrate_into(output)) is not None:
            print(f"dfcompass record: {output}: {problem} (plans from this trace assume a 90 us hand-over)",
                  file=sys.stderr)
    return Recorded(code, output, traces)


def _script_of(command: list[str]) -> str | None:
    """The script a Python command line runs (`prog.py`, `python3 -u prog.py`), or None (`-m`, `-c`,
    `-`, or a command that is no Python interpreter, such as `python3-coverage`)."""
    if command[0].endswith(".py"):
        return command[0]
    if not re.fullmatch(r"python[\d.]*", Path(command[0]).name):
        return None
    rest = iter(command[1:])
    for word in rest:
        if word in ("-m", "-c", "-") or word.startswith(("-m", "-c")) and len(word) > 2:
            return None  # a module, a string of code, standard input: no file to look for
        if word in ("-X", "-W"):
            next(rest, None)  # its argument
        elif not word.startswith("-"):
            return word
    return None


class NoTrace(DfcompassError):
    """The program ran and left no trace: why, as far as dfcompass can tell; the exit code is the
    program's own (128 + N for a program killed by signal N), 1 when it exited 0."""

    def __init__(self, output: Path, program: str, code: int) -> None:
        self.exit_code = shell_status(code) or 1
        ran = f"the program exited with code {code}" if code >= 0 else f"the program was killed by {signal_name(-code)}"
        if output.is_dir() and shutil.disk_usage(output).free < 1 << 20:
            why = "the disk holding it is full"
        elif code == 0:
            why = f"'{program}' did not start a Python interpreter that could import dfcompass's tracer"
        else:
            why = "it ended before its tracer wrote anything"
        super().__init__(f"{output}: no trace was written: {why} ({ran})")


def signal_name(number: int) -> str:
    """SIGKILL for 9; "signal 40" for one Python has no name for (a real-time signal)."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def shell_status(code: int) -> int:
    """A child's status as a shell gives it: 128 + N for one killed by signal N."""
    return 128 - code if code < 0 else code


def record_torch_workload(trace: Path, args: list[str]) -> int:
    """Record the embedded torch workload into `trace` (it records itself); its exit code."""
    return _record_workload("torch", "tracer.workloads.torch_models", trace, args,
                            "the torch demo workload needs torch (pip install torch==2.13.0); "
                            "or run: dfcompass demo --workload pipeline")


def record_tf_workload(trace: Path, args: list[str]) -> int:
    """Record the embedded Keras CNN into `trace` (it records itself with TFRecorder); its exit code."""
    return _record_workload("tensorflow", "tracer.workloads.tf_models", trace, args,
                            "the TensorFlow demo workload needs tensorflow: pip install -e '.[tf]'")


# TensorFlow's C++ log (oneDNN and absl notices at import), PyTorch's C++ warnings (the profiler's
# CPUAllocator notice): what the embedded workloads print that is no finding of dfcompass. A user's
# own setting of either variable wins; `dfcompass --verbose` sets neither and drops no line.
QUIET_FRAMEWORKS = {"TF_CPP_MIN_LOG_LEVEL": "2", "TORCH_CPP_LOG_LEVEL": "ERROR"}
# What TensorFlow 2.21 prints at import whatever its log level (absl's pre-init notice, oneDNN's and
# the CPU features'): dropped from the workload's stderr, every other line passed on as it comes.
FRAMEWORK_NOTICE = re.compile(r"WARNING: All log messages before absl::InitializeLog|I0000 [\d:.]+ +\d+ "
                              r"(?:port|cpu_feature_guard)\.cc|To enable the following instructions: ")


def _record_workload(package: str, module: str, trace: Path, args: list[str], missing: str) -> int:
    import importlib.util

    if importlib.util.find_spec(package) is None:
        raise ConfigurationError(missing)
    env = dict(os.environ)
    env.pop(JOB_ENV, None)  # the workload records itself: no autostarted session beside it
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [_package_root(), env.get("PYTHONPATH")]))
    quiet = not verbose()
    for key, value in QUIET_FRAMEWORKS.items() if quiet else ():  # the frameworks' start-up notices are not the demo's
        env.setdefault(key, value)
    command = [sys.executable, "-m", module, "--out", str(trace), "--overwrite", *args]
    # Ctrl-C reaches the workload (same process group), which ends and says so; meanwhile this
    # process keeps reading its stderr to the end instead of leaving it running alone.
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True, errors="replace") as child:
            assert child.stderr is not None
            for line in child.stderr:
                if not quiet or not FRAMEWORK_NOTICE.match(line):
                    sys.stderr.write(line)
            return child.wait()
    finally:
        signal.signal(signal.SIGINT, previous)
