"""The placement problem every optimiser, the simulator and the CLI share.

A problem is a DAG of tasks (graph nodes), each with a cost on every device (measured where it ran,
modelled elsewhere), data dependencies carrying bytes, a transfer-time model per pair of devices,
and memory: each task's footprint and each device's capacity. A placement maps every task to a
device; a schedule adds start and end times.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from enum import Enum

from tc_analyses.errors import DfcompassError


class PlacementError(DfcompassError):
    """A problem that cannot be solved as given (cycle, unknown device, costs that do not fit)."""


class CostSource(Enum):
    MEASURED = "measured"  # the task ran on this device in the trace
    MODELLED = "modelled"  # estimated from FLOPs, bytes and device peaks
    IDENTICAL = "measured on an identical device"  # ran on another device of the same model
    SCALED = "scaled from measured"  # no FLOP model: its measured time scaled by the devices' peak ratio


@dataclass(frozen=True)
class Cost:
    ns: int
    source: CostSource


@dataclass(frozen=True)
class Device:
    name: str  # as the user wrote it: "cpu", "cuda:0", "hostB:cuda:0"
    model: str  # hardware model used for modelled costs, e.g. "H100"
    host: str = "localhost"
    memory_bytes: int | None = None  # capacity; None = unlimited
    model_is_default: bool = False  # the model was not given: a documented default was used


@dataclass(frozen=True)
class Link:
    """Transfer time between two devices: ``latency_ns + bytes / bytes_per_ns``."""

    latency_ns: float
    bytes_per_ns: float
    source: str  # "fitted from N copies in the trace" or "link spec: PCIe 4.0 x16"

    def time_ns(self, nbytes: int) -> int:
        return 0 if nbytes <= 0 else int(round(self.latency_ns + nbytes / self.bytes_per_ns))


@dataclass(frozen=True)
class Task:
    id: int
    name: str  # human-readable: "layer1.0.conv1 (aten::conv2d)"
    op: str
    actual_device: str | None  # where it ran in the trace (None for synthetic graphs)
    memory_bytes: int = 0  # output bytes it keeps resident on its device


@dataclass
class PlacementProblem:
    tasks: list[Task]
    devices: list[Device]
    costs: dict[tuple[int, str], Cost]  # (task id, device name) -> cost
    edges: dict[tuple[int, int], int]  # (producer, consumer) -> bytes
    links: dict[tuple[str, str], Link]  # (src device, dst device) -> transfer model; same device = free
    launch_overhead_ns: dict[str, int] = field(default_factory=dict)  # per device, added to each task
    forbidden: frozenset[tuple[int, str]] = frozenset()  # (task id, device name) pairs the task cannot run on
    # Per device: how much of each task's time, from its start, holds the one host thread that issues
    # every op (Python and the GIL: dispatch, launch). Tasks of different devices take turns on it.
    host_ns: dict[str, int] = field(default_factory=dict)
    # task -> the task whose device it must share: a view or an in-place op stays with its base tensor.
    tied: dict[int, int] = field(default_factory=dict)
    # (producer, consumer) -> bytes of tensors made in one step and read in the next (a weight the
    # optimizer writes, the forward reads): placed apart, the consumer waits for that copy from the
    # start of the step.
    carried: dict[tuple[int, int], int] = field(default_factory=dict)
    # task -> bytes it reads that no task of the step made (the input batch, a parameter), held on the
    # device where it ran: placed elsewhere, the task waits for that copy from the step's start.
    external: dict[int, int] = field(default_factory=dict)
    # (task, device) pairs whose whole time holds the host thread: a sync-bearing op on a GPU (the
    # host waits for the device-to-host copy and the queue before it goes on).
    blocking: frozenset[tuple[int, str]] = frozenset()
    # what validate() last passed, so the optimisers that each validate do it once (a changed problem
    # changes one of these sizes or objects, and is checked again)
    _validated: tuple[int, ...] = field(default=(), init=False, repr=False, compare=False)
    # the last topological order, with the task ids and edges it was made from (compared whole, so an
    # edit in place is seen): the optimisers, the scheduler and validate() each ask for it
    _order: tuple[list[int], list[tuple[int, int]], list[int]] = field(default=([], [], []), init=False, repr=False,
                                                                        compare=False)

    def carried_into(self) -> dict[int, list[tuple[int, int]]]:
        """consumer -> [(producer, bytes)] of the tensors it reads from the previous step."""
        out: dict[int, list[tuple[int, int]]] = {}
        for (u, v), nbytes in self.carried.items():
            out.setdefault(v, []).append((u, nbytes))
        return out

    def tie_root(self, task: int) -> int:
        """The task that decides `task`'s device (itself when it is not tied)."""
        seen = 0
        while task in self.tied and seen <= len(self.tasks):
            task, seen = self.tied[task], seen + 1
        return task

    def allowed(self, task: int, device: str) -> bool:
        return (task, device) not in self.forbidden

    def device_names(self) -> list[str]:
        return [d.name for d in self.devices]

    def cost(self, task: int, device: str) -> int:
        return self.costs[(task, device)].ns + self.launch_overhead_ns.get(device, 0)

    def host(self, task: int, device: str) -> int:
        """The part of `task`'s time on `device` that holds the host thread (at most the whole task)."""
        if (task, device) in self.blocking:
            return self.cost(task, device)
        held = self.host_ns.get(device, 0)
        return min(held, self.cost(task, device)) if held > 0 else 0

    def transfer_ns(self, src: str, dst: str, nbytes: int) -> int:
        if src == dst:
            return 0
        link = self.links.get((src, dst))
        if link is None:
            raise PlacementError(f"no transfer model from {src} to {dst}")
        return link.time_ns(nbytes)

    def predecessors(self) -> dict[int, list[int]]:
        preds: dict[int, list[int]] = {t.id: [] for t in self.tasks}
        for (u, v) in self.edges:
            preds[v].append(u)
        return preds

    def successors(self) -> dict[int, list[int]]:
        succs: dict[int, list[int]] = {t.id: [] for t in self.tasks}
        for (u, v) in self.edges:
            succs[u].append(v)
        return succs

    def topological_order(self) -> list[int]:
        """Tasks in dependency order; PlacementError naming a task on a cycle if there is one."""
        ids, edges = [t.id for t in self.tasks], list(self.edges)
        if self._order[2] and ids == self._order[0] and edges == self._order[1]:
            return list(self._order[2])
        preds = {t: len(p) for t, p in self.predecessors().items()}
        succs = self.successors()
        ready = deque(sorted(t for t, n in preds.items() if n == 0))
        order: list[int] = []
        while ready:
            task = ready.popleft()
            order.append(task)
            for nxt in succs[task]:
                preds[nxt] -= 1
                if preds[nxt] == 0:
                    ready.append(nxt)
        if len(order) != len(self.tasks):
            stuck = sorted(set(preds) - set(order))[:5]
            raise PlacementError(f"the graph has a cycle (through tasks {stuck}): placement needs a DAG")
        self._order = (ids, edges, order)
        return list(order)

    def validate(self) -> None:
        """Every task has a cost on every device it may run on, and at least one such device; every
        edge joins known tasks; else a one-line error."""
        fingerprint = (id(self.tasks), len(self.tasks), id(self.costs), len(self.costs), id(self.edges),
                       len(self.edges), id(self.devices), len(self.devices), len(self.forbidden))
        if fingerprint == self._validated:
            return
        ids = {t.id for t in self.tasks}
        for (u, v) in self.edges:
            if u not in ids or v not in ids:
                raise PlacementError(f"edge {u}->{v} names a task that does not exist")
        for task in self.tasks:
            if not any(self.allowed(task.id, d.name) for d in self.devices):
                raise PlacementError(f"task {task.id} ({task.name}) may run on none of the devices")
            for device in self.devices:
                if not self.allowed(task.id, device.name):
                    continue
                cost = self.costs.get((task.id, device.name))
                if cost is None:
                    raise PlacementError(f"task {task.id} ({task.name}) has no cost on {device.name}")
                if cost.ns < 0:
                    raise PlacementError(f"task {task.id} ({task.name}) has a negative cost on {device.name}")
        self.topological_order()
        self._validated = fingerprint


@dataclass(frozen=True)
class Slot:
    task: int
    device: str
    start_ns: int
    end_ns: int


@dataclass
class Placement:
    """Task -> device, with the schedule an algorithm or the simulator produced."""

    assignment: dict[int, str]
    makespan_ns: int
    schedule: list[Slot] = field(default_factory=list)
    algorithm: str = ""
