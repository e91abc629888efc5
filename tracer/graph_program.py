"""Run one step of a program as a graph of ops on device lanes, recorded: the apply half of
apply-and-verify.

A :class:`GraphProgram` is a step function captured as a ``torch.fx`` graph of aten ops
(``make_fx``: forward, backward and optimizer update of a training step alike). Running it executes
the graph node by node, each node recorded as a dataflow node (:mod:`tracer.dataflow`) named after
its fx node, with its exact tensor edges and input shapes. So the nodes of the trace are the nodes
of the graph, and a placement plan that names trace nodes applies to the program one to one.

A :class:`Plan` maps node names to devices. Each device is a *lane*: one worker thread that runs
the nodes placed on it in the plan's order, waiting for their inputs:

* ``cpu:N`` is a CPU lane, with ``threads`` intra-op threads (PyTorch keeps that setting per
  thread, so every lane sets its own). Lanes are not pinned to cores: the OS moves them away from a
  busy core. Pinned, a lane that shares its core with another job runs at half speed and holds the
  others back: beside a process spinning on one of 2 cores, the image pipeline of
  ``bench/verify_programs.py`` ran its plan at 0.50-0.93x of the sequential run pinned and at
  0.94-1.12x unpinned (7 rounds each, interleaved); alone, 1.65x and 1.69x at the median;
* ``cuda:N`` (or any other torch device) is a lane whose tensors live on that device; inputs made on
  another device are copied when the node starts (``Tensor.to``), inside the node's span.

Without a plan every node runs on one lane, ``cpu:0``: the sequential run that a plan is judged
against uses the same code path, threads and recording as the plan itself.

Lanes run real threads: aten kernels release the GIL, so two CPU lanes overlap on two cores, while
Python dispatch (a few microseconds a node) still takes turns on the GIL.

The heap is kept steady (:func:`steady_heap`): with glibc's defaults a freed buffer of a few MB goes
back to the kernel and the next step faults it in again, page by page, in whichever op writes it
first. How often that happens depends on how many threads allocate, so a sequential run and a plan
paid it differently (a ReLU over 2.4 MB: 1.7 ms alone, 0.35 ms under a two-lane plan), and a
comparison of placements measured glibc. Every run of a graph program, baseline and plan alike,
keeps freed memory instead.
"""

from __future__ import annotations

import os
import queue
import re
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tracer
from tracer import session as _session
from tracer.bounded_io import PLAN_LIMIT, load_json

PLAN_ENV = "DFCOMPASS_PLAN"  # path of a plan.json that graph programs apply (set by `dfcompass verify`)
DEFAULT_LANE = "cpu:0"
SWITCH_INTERVAL_S = 5e-5  # GIL hand-over interval while several lanes run


class PlanError(ValueError):
    """A plan that does not fit the program (unknown node, bad device)."""


@dataclass(frozen=True)
class Plan:
    """Node name -> device, and the order in which each lane runs its nodes."""

    assignment: dict[str, str]
    order: tuple[str, ...] = ()  # priority order of the nodes (the predicted start order); empty = program order
    source: str = ""

    @staticmethod
    def load(path: str | os.PathLike[str]) -> "Plan":
        """Read the ``schedule`` of a plan.json written by ``dfcompass recommend-placement``."""
        try:
            data = read_plan_file(path)
            schedule = data["schedule"] if isinstance(data, dict) else None
            if not isinstance(schedule, list) or not schedule:
                raise ValueError("no schedule rows")
            for at, row in enumerate(schedule):
                _check_row(at, row)
            rows = sorted(schedule, key=lambda row: (row["start_ns"], row["end_ns"], row["node"]))
            assignment = {str(row["node"]): str(row["device"]) for row in rows}
        except (OSError, EOFError, ValueError, KeyError, TypeError) as exc:  # EOFError: a cut plan.json.gz
            raise PlanError(f"{path}: not a placement plan with a schedule ({exc})") from None
        return Plan(assignment, tuple(assignment), str(path))


# What `--devices` takes ([host:]cpu[:N] or [host:]cuda:N), the host a plain name: a plan's device
# becomes part of paths and lane names, so it is checked before anything runs
_DEVICE = re.compile(r"(?:[A-Za-z0-9_.-]+:)?(?:cpu(?::[0-9]+)?|cuda:[0-9]+)")


def _check_row(at: int, row: Any) -> None:
    """A schedule row as recommend-placement writes it; ValueError naming what is wrong."""
    if not isinstance(row, dict):
        raise ValueError(f"schedule[{at}] is not an object")
    device = row.get("device")
    if not isinstance(device, str) or not _DEVICE.fullmatch(device):
        raise ValueError(f"schedule[{at}]: device {device!r} is not [host:]cpu or [host:]cuda:N")
    for key in ("start_ns", "end_ns"):
        value = row.get(key)
        if type(value) is not int or value < 0:
            raise ValueError(f"schedule[{at}]: {key} {value!r} is not a whole number of ns")
    if not isinstance(row.get("node"), (str, int)) or isinstance(row.get("node"), bool):
        raise ValueError(f"schedule[{at}]: node {row.get('node')!r} is not a node name")


def read_plan_file(path: str | os.PathLike[str]) -> Any:
    """A plan's JSON: plan.json, or plan.json.gz (large plans are written compressed)."""
    return load_json(path, PLAN_LIMIT, "a plan")  # gzip by content, inflated in bounded steps


def plan_file_in(folder: Path) -> Path:
    """The plan a recommend-placement or parallelism folder holds (plan.json, else plan.json.gz)."""
    plain = folder / "plan.json"
    return plain if plain.exists() or not (folder / "plan.json.gz").exists() else folder / "plan.json.gz"


def plan_from_env() -> Plan | None:
    path = os.environ.get(PLAN_ENV)
    return Plan.load(path) if path else None


@dataclass
class _Node:
    name: str
    op: str  # "aten::convolution"
    target: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    inputs: tuple[str, ...]  # names of the nodes whose values it reads
    getitems: dict[str, tuple[str, int]] = field(default_factory=dict)  # folded getitem -> (source, index)


def _op_name(target: Any) -> str:
    name = getattr(target, "_schema", None)
    if name is not None:  # an OpOverload: "aten::convolution"
        return str(name.name)
    return str(getattr(target, "__name__", target))


class GraphProgram:
    """One step of a program as a graph of ops, runnable on lanes (module docstring).

    `gm` is a ``torch.fx.GraphModule`` of aten ops, as ``make_fx(step)(*example_inputs)`` makes it.
    ``getitem`` nodes (picking one output of a multi-output op) are folded into their readers, as
    they only index a tuple. Placeholders are the step's inputs; the output node gives its result.
    """

    def __init__(self, gm: Any, name: str) -> None:
        import torch.fx  # noqa: PLC0415 - torch is only needed to run graph programs

        self.name = name
        self.placeholders: list[str] = []
        self.nodes: list[_Node] = []
        self.output: Any = None
        self._getitem: dict[str, tuple[str, int]] = {}
        for fx_node in gm.graph.nodes:
            if fx_node.op == "placeholder":
                self.placeholders.append(fx_node.name)
            elif fx_node.op == "output":
                self.output = fx_node.args[0]
            elif fx_node.op == "call_function" and getattr(fx_node.target, "__name__", "") == "getitem":
                source, index = fx_node.args
                self._getitem[fx_node.name] = (self._resolve(source.name)[0], int(index))
            elif fx_node.op == "call_function":
                reads: list[str] = []

                def read(n: Any, reads: list[str] = reads) -> Any:
                    reads.append(n.name)
                    return n

                torch.fx.node.map_arg((fx_node.args, fx_node.kwargs), read)
                inputs = tuple(dict.fromkeys(self._resolve(r)[0] for r in reads))
                self.nodes.append(_Node(fx_node.name, _op_name(fx_node.target), fx_node.target,
                                        tuple(fx_node.args), dict(fx_node.kwargs), inputs))
            else:
                raise PlanError(f"{name}: graph node {fx_node.name} is a {fx_node.op}; "
                                "graph programs take make_fx graphs of call_function nodes")
        self.by_name = {n.name: n for n in self.nodes}

    def _resolve(self, name: str) -> tuple[str, int | None]:
        return self._getitem.get(name, (name, None))

    def lanes(self, plan: Plan | None) -> dict[str, list[_Node]]:
        """Device -> the nodes it runs, in the plan's order (program order without a plan)."""
        if plan is None:
            return {DEFAULT_LANE: list(self.nodes)}
        unknown = sorted(set(plan.assignment) - set(self.by_name))
        missing = [n.name for n in self.nodes if n.name not in plan.assignment]
        if unknown or missing:
            raise PlanError(f"{plan.source or 'the plan'} does not fit program {self.name}: "
                            f"{len(unknown)} unknown nodes {unknown[:3]}, {len(missing)} missing {missing[:3]}")
        position = {name: i for i, name in enumerate(plan.order)}
        program_order = {n.name: i for i, n in enumerate(self.nodes)}
        out: dict[str, list[_Node]] = {}
        for node in sorted(self.nodes, key=lambda n: (position.get(n.name, len(position)), program_order[n.name])):
            out.setdefault(plan.assignment[node.name], []).append(node)
        return out


class _Values:
    """Node outputs of one step, with one event per node so lanes can wait for their inputs."""

    def __init__(self, inputs: dict[str, Any]) -> None:
        self.values = dict(inputs)
        self.ready: dict[str, threading.Event] = {}
        self.failed: BaseException | None = None
        self._lock = threading.Lock()

    def event(self, name: str) -> threading.Event:
        with self._lock:
            found = self.ready.get(name)
            if found is None:
                found = self.ready[name] = threading.Event()
                if name in self.values:
                    found.set()
            return found

    def put(self, name: str, value: Any) -> None:
        self.values[name] = value
        self.event(name).set()

    def fail(self, exc: BaseException) -> None:
        self.failed = exc
        for event in list(self.ready.values()):
            event.set()


def _check_device(lane: str) -> None:
    """PlanError when this machine cannot run lane `lane` (a GPU it does not have)."""
    import torch  # noqa: PLC0415

    kind, _, index = lane.partition(":")
    if kind == "cpu":
        return
    if kind != "cuda" or not index.isdigit():
        raise PlanError(f"lane {lane!r}: graph programs run on cpu:N and cuda:N lanes")
    if not torch.cuda.is_available() or int(index) >= torch.cuda.device_count():
        raise PlanError(f"lane {lane!r}: this machine has {torch.cuda.device_count()} CUDA device(s); "
                        "run the plan where that GPU is")


def _torch_device(lane: str) -> Any:
    import torch  # noqa: PLC0415

    return torch.device("cpu") if lane.split(":")[0] == "cpu" else torch.device(lane)


class _Lane(threading.Thread):
    """One device: a long-lived thread that runs its nodes of each step in order, each when its
    inputs are there. Started once per :class:`Runner`, so no step pays for thread start-up."""

    def __init__(self, program: GraphProgram, device: str, nodes: list[_Node], threads: int) -> None:
        super().__init__(name=f"lane-{device}", daemon=True)
        self.program, self.device, self.nodes = program, device, nodes
        self.threads = threads
        self.torch_device = _torch_device(device)
        self.jobs: queue.SimpleQueue[_Values | None] = queue.SimpleQueue()
        self.done: queue.SimpleQueue[None] = queue.SimpleQueue()
        self.values = _Values({})
        self.record_args = False

    def run(self) -> None:
        import torch  # noqa: PLC0415

        torch.set_num_threads(self.threads)  # per thread in PyTorch: each lane sets its own
        while (values := self.jobs.get()) is not None:
            self.values = values
            try:
                for node in self.nodes:
                    for name in node.inputs:
                        values.event(name).wait()
                    if values.failed is not None:
                        break
                    self._run(node)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread, which re-raises it
                values.fail(exc)
            self.done.put(None)

    def _value(self, name: str) -> Any:
        source, index = self.program._resolve(name)
        value = self.values.values[source]
        return value[index] if index is not None else value

    def _run(self, node: _Node) -> None:
        import torch  # noqa: PLC0415
        import torch.fx  # noqa: PLC0415

        read: list[Any] = []

        def fetch(n: Any) -> Any:
            value = self._value(n.name)
            read.append(value)
            return value

        args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), fetch)
        with tracer.node(node.name, node.op, device=self.device, inputs=read) as scope:
            if self.record_args:
                _record_args(scope, [t for t in read if isinstance(t, torch.Tensor)])
            if any(isinstance(t, torch.Tensor) and t.device != self.torch_device for t in read):
                # A transfer, paid inside the consumer's span.
                args, kwargs = torch.fx.node.map_aggregate((args, kwargs), self._moved)
            result = node.target(*args, **kwargs)
            outputs = result if isinstance(result, (tuple, list)) else (result,)
            scope.output(*[o for o in outputs if isinstance(o, torch.Tensor)])
        self.values.put(node.name, result)

    def _moved(self, value: Any) -> Any:
        import torch  # noqa: PLC0415

        if isinstance(value, torch.Tensor) and value.device != self.torch_device:
            return value.to(self.torch_device)
        return value


def _record_args(scope: tracer.node, read: list[Any]) -> None:
    session = _session._active
    if session is None or scope.node_id < 0:
        return
    shapes = str([list(t.shape) for t in read])
    dtypes = ",".join(str(t.dtype).removeprefix("torch.") for t in read)
    session.emit("node_args", scope.node_id, session.intern(shapes), session.intern(dtypes))


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)
_MMAP_THRESHOLD_MAX = 32 << 20  # glibc's largest on 64-bit: larger buffers are still mapped


def steady_heap() -> bool:
    """Keep freed memory in the heap (glibc only; elsewhere nothing changes): no trimming, and
    buffers up to 32 MB from the heap rather than fresh mappings. True when glibc took both."""
    import ctypes
    import platform

    if platform.libc_ver()[0] != "glibc":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_TRIM_THRESHOLD, 1 << 30)) and bool(mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_MAX))


class Runner:
    """Runs steps of `program` under `plan` (module docstring) on long-lived lane threads.

    ``with Runner(program, plan) as runner: out = runner.step(inputs)``. `threads` is the number of
    intra-op threads of each lane.
    """

    def __init__(self, program: GraphProgram, plan: Plan | None = None, threads: int = 1) -> None:
        self.program = program
        steady_heap()
        lanes = program.lanes(plan)
        for device in lanes:
            _check_device(device)
        self.lanes = [_Lane(program, device, nodes, threads) for device, nodes in lanes.items()]
        # A lane that comes back from a kernel waits for the GIL until another lane's Python code
        # gives it up: by default after 5 ms, longer than most ops. Lanes hand it over sooner.
        self._interval = sys.getswitchinterval()
        if len(self.lanes) > 1:
            sys.setswitchinterval(SWITCH_INTERVAL_S)
        for lane in self.lanes:
            lane.start()

    def __enter__(self) -> "Runner":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for lane in self.lanes:
            lane.jobs.put(None)
        for lane in self.lanes:
            lane.join()
        sys.setswitchinterval(self._interval)

    def step(self, inputs: Sequence[Any], record_args: bool = False) -> Any:
        """Run one step on `inputs` (one per placeholder); its output. `record_args` records each
        node's input shapes (once is enough: the graph keeps the first)."""
        program = self.program
        if len(inputs) != len(program.placeholders):
            raise PlanError(f"{program.name} takes {len(program.placeholders)} inputs, got {len(inputs)}")
        values = _Values(dict(zip(program.placeholders, inputs)))
        for lane in self.lanes:
            lane.record_args = record_args
            lane.jobs.put(values)
        for lane in self.lanes:
            lane.done.get()
        if values.failed is not None:
            raise values.failed
        import torch.fx  # noqa: PLC0415

        return torch.fx.node.map_arg(program.output, lambda n: _output_value(program, values, n.name))


def _output_value(program: GraphProgram, values: _Values, name: str) -> Any:
    source, index = program._resolve(name)
    value = values.values[source]
    return value[index] if index is not None else value
