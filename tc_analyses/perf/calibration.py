"""The machine's measured lane costs, stored with a recorded job (tracer/calibrate.py), as the
placement model uses them.

* The **hand-over** between two CPU lanes of one host replaces the link spec's assumed 90 us: its
  median sets the link of the predicted plan, its p90 beside one busy core the slow end of the range.
* **Contention**: each of two lanes computing at once runs this much slower than one alone. The
  slow end of the speedup range runs every CPU cost of a multi-lane plan at the busy figure (the
  machine one background job away), since a range must hold on a busy machine too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tracer import schema
from tc_analyses.perf.devices import spec_of
from tc_analyses.perf.problem import Device, Link, PlacementProblem


@dataclass(frozen=True)
class Calibration:
    path: Path
    cores: int
    handover_p50_ns: float
    handover_p90_ns: float
    busy_handover_p90_ns: float
    contention: float
    busy_contention: float
    lanes: int = 2

    @property
    def busy_factor(self) -> float:
        """How much slower a multi-lane plan's nodes run beside one busy core, against the recorded
        placement beside the same load: the calibration's figure (two lanes meeting after every
        small node, ~0.4 ms), and never less than the fair share when the lanes and the background
        process outnumber the cores: each of them then gets cores / (lanes + 1) of a core, while the
        one-lane baseline still finds a core of its own."""
        fair_share = (self.lanes + 1) / self.cores if self.lanes + 1 > self.cores else 1.0
        return max(self.busy_contention, fair_share)

    def describe(self) -> str:
        return (f"measured on this machine at record ({self.path.name}): hand-over between CPU lanes "
                f"{self.handover_p50_ns / 1e3:.0f} us (p90 {self.handover_p90_ns / 1e3:.0f} us, "
                f"{self.busy_handover_p90_ns / 1e3:.0f} us beside a busy core); two lanes at once run "
                f"{self.contention:.2f}x slower each ({self.busy_factor:.2f}x beside a busy core, the range's slow end)")


def _candidates(path: Path) -> list[Path]:
    """The calibration of a job folder, or of the job a process trace folder belongs to."""
    return [path / schema.CALIBRATION_FILE, path.parent / schema.CALIBRATION_FILE] if path.is_dir() else []


def read_calibration(path: Path) -> Calibration | None:
    """The calibration stored with the trace at `path`; None when there is none (recorded without
    ``dfcompass record``, or by an older version) or it cannot be read."""
    for file in _candidates(path):
        if not file.is_file():
            continue
        try:
            data: dict[str, Any] = json.loads(file.read_text(encoding="utf-8"))
            return Calibration(file, int(data[schema.CAL_CORES]), float(data[schema.CAL_HANDOVER_P50_NS]),
                               float(data[schema.CAL_HANDOVER_P90_NS]), float(data[schema.CAL_BUSY_HANDOVER_P90_NS]),
                               max(1.0, float(data[schema.CAL_CONTENTION])),
                               max(1.0, float(data[schema.CAL_BUSY_CONTENTION])), int(data.get(schema.CAL_LANES, 2)))
        except (OSError, ValueError, KeyError, TypeError):
            return None
    return None


def cpu_pairs(devices: list[Device]) -> list[tuple[str, str]]:
    cpus = [d for d in devices if spec_of(d).kind == "cpu"]
    return [(a.name, b.name) for a in cpus for b in cpus if a.name != b.name and a.host == b.host]


def handover_links(calibration: Calibration, devices: list[Device], busy: bool = False) -> dict[tuple[str, str], Link]:
    """The links between CPU lanes of one host at the measured hand-over (its median, or its p90
    beside a busy core): nothing is copied, the consumer's thread wakes up."""
    if busy:  # the larger p90: two short measurements, either may catch the scheduler's worse moment
        latency = max(calibration.busy_handover_p90_ns, calibration.handover_p90_ns)
        text = "p90 beside a busy core"
    else:
        latency, text = calibration.handover_p50_ns, "median"
    link = Link(latency, 1e12, f"measured at record: thread hand-over, {text} ({latency / 1e3:.0f} us)")
    return {pair: link for pair in cpu_pairs(devices)}


def busy_plan(problem: PlacementProblem, plan: dict[int, str], calibration: Calibration) -> PlacementProblem:
    """`problem` as a plan that runs several CPU lanes at once meets a busy machine: every CPU cost
    at the busy contention, and the hand-over at its busy p90. Unchanged for a plan of one CPU lane."""
    cpus = {d.name for d in problem.devices if spec_of(d).kind == "cpu"}
    if len({device for device in plan.values() if device in cpus}) < 2:
        return problem
    factor = calibration.busy_factor
    costs = {key: (replace(cost, ns=int(round(cost.ns * factor))) if key[1] in cpus else cost)
             for key, cost in problem.costs.items()}
    return replace(problem, costs=costs, links={**problem.links, **handover_links(calibration, problem.devices, True)})
