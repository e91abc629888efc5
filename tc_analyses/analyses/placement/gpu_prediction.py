"""A GPU prediction made from a CPU trace, against the same program run on that GPU.

The prediction is what ``recommend-placement --devices cpu,cuda:0=MODEL`` computes from the CPU
trace: each op's cost on the GPU (:mod:`tc_analyses.perf.cost`: the roofline of its shapes plus a
launch constant, or its CPU time scaled by the peak ratio for ops without a FLOP model) and the host
time each op takes to issue, list-scheduled. Here every op is placed on the GPU, as the program
runs when its tensors are moved there. The measurement comes from the same program recorded on the
GPU (kernels per op, host time per op) and timed untraced there (each step ended by a
synchronisation): nothing of it is fitted.

Compared per op class (one step's predicted GPU time of the class's ops against their measured
kernel time, and the host time to issue them against what the model charges) and per step.
"""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tc_analyses.analyses.placement.heft import list_schedule
from tc_analyses.analyses.placement.recommend import model_factors, problem_from_trace, with_quantile
from tc_analyses.model.activity import Activity, read_activity
from tc_analyses.model.window import Window, restrict
from tc_analyses.reader.fast import DfcTrace, read_trace
from tc_analyses.model import graph_keys as K
from tc_analyses.model.step_kinds import graph_of_kind
from tc_analyses.perf import kernel_check as kc
from tc_analyses.perf.devices import parse_devices
from tc_analyses.perf.problem import PlacementProblem


@dataclass(frozen=True)
class OpClassRow:
    op: str
    per_step: float  # ops of this class per step
    predicted_gpu_us: float  # per step: the model's GPU cost of these ops
    measured_kernel_us: float  # per step: their kernels' time on the GPU run
    predicted_host_us: float  # per step: the host time the model charges to issue them
    measured_host_us: float  # per step: their spans on the GPU run's host thread


@dataclass(frozen=True)
class StepRange:
    median_ms: float
    p10_ms: float
    p90_ms: float


@dataclass(frozen=True)
class ProgramCheck:
    name: str
    device_model: str
    predicted_step_ms: float  # every op on the GPU, list-scheduled
    predicted_range_ms: tuple[float, float]  # p10-p90 of the measured costs, modelled costs widened by the kernel model's error
    measured_gpu: StepRange  # untraced steps on the GPU
    measured_cpu: StepRange  # untraced steps on the CPU (the recorded placement)
    rows: list[OpClassRow]

    @property
    def predicted_speedup(self) -> float:
        return self.measured_cpu.median_ms / self.predicted_step_ms

    @property
    def measured_speedup(self) -> float:
        return self.measured_cpu.median_ms / self.measured_gpu.median_ms

    @property
    def step_error(self) -> float:
        return self.predicted_step_ms / self.measured_gpu.median_ms - 1

    def holds(self) -> bool:
        """Whether the measured median step lies in the predicted range."""
        low, high = self.predicted_range_ms
        return low <= self.measured_gpu.median_ms <= high


def step_range(timing: Path) -> StepRange:
    """The untraced steps of a program's timing.json (tests/gpu_programs/eager_programs.py)."""
    walls = sorted(float(s["wall_ms"]) for s in json.loads(timing.read_text())["steps"])
    return StepRange(statistics.median(walls), kc.quantile(walls, 0.1), kc.quantile(walls, 0.9))


def _all_on(problem: PlacementProblem, device: str) -> dict[int, str]:
    return {t.id: device for t in problem.tasks}


def _read(path: Path) -> tuple[DfcTrace, Activity]:
    """The trace and its activity as every command reads it (the default window: a last step cut
    short by the end of recording is left out)."""
    trace = read_trace(path)
    return trace, restrict(read_activity(trace), Window())[0]


def _one_step_problem(cpu_trace: Path, devices: str) -> tuple[PlacementProblem, Any]:
    trace, activity = _read(cpu_trace)
    graph, _ = graph_of_kind(trace, activity)
    return problem_from_trace(activity, graph, parse_devices(devices)), graph


def _steps(activity: Activity) -> int:
    return max(1, len({run.step for run in activity.nodes if run.step is not None and run.step >= 0}))


def measured_per_op(gpu_trace: Path, device_model: str) -> tuple[dict[str, float], dict[str, float], dict[str, int], int]:
    """The GPU run's kernel time and host time per op class (µs, whole trace), ops per class, and
    the number of steps recorded. Host time counts outermost ops only (an op inside another is
    inside its parent's span)."""
    trace, activity = _read(gpu_trace)
    kernel: dict[str, float] = defaultdict(float)
    for joined in kc.join_kernels(trace, activity, device_model):
        kernel[joined.op] += joined.kernel_ns / 1e3
    host: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    for run in activity.nodes:
        if run.outermost:
            host[run.op] += (run.end - run.start) / 1e3
            count[run.op] += 1
    return dict(kernel), dict(host), dict(count), _steps(activity)


def check_program(name: str, cpu_run: Path, gpu_run: Path, model_error: tuple[float, float],
                  device_model: str = "H200") -> ProgramCheck:
    """Predict `name` on `device_model` from its CPU run (trace and timing.json in `cpu_run`) and
    compare with its GPU run (`gpu_run`). `model_error`: the kernel model's p10 and p90 error
    (predicted / measured - 1) for the range, measured on other programs than this one."""
    problem, graph = _one_step_problem(cpu_run / "trace", f"cpu,cuda:0={device_model}")
    placement = _all_on(problem, "cuda:0")
    point = list_schedule(problem, placement).makespan_ns / 1e6
    fast, slow = model_factors(model_error)
    bounds = [list_schedule(with_quantile(problem, graph, key, factor), placement).makespan_ns / 1e6
              for key, factor in ((K.P10_NS, fast), (K.P90_NS, slow))]
    predicted_gpu: dict[str, float] = defaultdict(float)
    predicted_count: dict[str, int] = defaultdict(int)
    host_per_task = problem.host_ns.get("cuda:0", 0) / 1e3
    for task in problem.tasks:
        predicted_gpu[task.op] += problem.costs[(task.id, "cuda:0")].ns / 1e3
        predicted_count[task.op] += 1
    kernel, host, count, steps = measured_per_op(gpu_run / "trace", device_model)
    rows = [OpClassRow(op, predicted_count.get(op, count.get(op, 0) / steps), predicted_gpu.get(op, 0.0),
                       kernel.get(op, 0.0) / steps, predicted_count.get(op, 0) * host_per_task, host.get(op, 0.0) / steps)
            for op in set(predicted_gpu) | set(kernel)]
    rows.sort(key=lambda r: -(r.measured_kernel_us + r.predicted_gpu_us))
    return ProgramCheck(name, device_model, point, (min(bounds + [point]), max(bounds + [point])),
                        step_range(gpu_run / "timing.json"), step_range(cpu_run / "timing.json"), rows)


def kernel_model_rotation(gpu_runs: dict[str, Path], device_model: str = "H200") -> list[dict[str, Any]]:
    """Calibrate the kernel model on all programs but one, check it on that one, for each in turn:
    the median |error| of the datasheet roofline, of the model as the planner charges it (roofline
    plus launch constant) and of the calibrated model, on the held-out program's kernels."""
    joined = {name: kc.join_kernels(*_read(path / "trace"), device_model) for name, path in gpu_runs.items()}
    out = []
    for held_out, ops in joined.items():
        fitted = kc.calibrate([j for name, other in joined.items() if name != held_out for j in other])
        out.append({"held_out": held_out, "ops": len(ops),
                    "datasheet": kc.overall_median_abs_error(ops),
                    "as_used": kc.overall_median_abs_error(ops, kc.as_used(device_model)),
                    "calibrated": kc.overall_median_abs_error(ops, fitted),
                    "as_used_errors": as_used_errors(ops, device_model)})
    return out


def as_used_errors(ops: list[kc.JoinedOp], device_model: str = "H200") -> list[float]:
    """predicted / measured - 1 of the kernel model as the planner charges it, per op."""
    model = kc.as_used(device_model)
    return [model.predict(j) / j.kernel_ns - 1 for j in ops if j.kernel_ns > 0]


def error_quantiles(errors: list[float]) -> tuple[float, float]:
    """The p10 and p90 of relative errors (the form of devices.GPU_MODEL_ERROR)."""
    return (kc.quantile(errors, 0.1), kc.quantile(errors, 0.9)) if errors else (0.0, 0.0)


