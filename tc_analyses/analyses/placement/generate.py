"""Deterministic placement problems for tests and benchmarks (seeded numpy RNG).

Shapes: random layered DAGs, fork-join, series-parallel. Devices are heterogeneous: a CPU and one
to three GPU-like devices that are 3-20x faster on big operations but pay a launch overhead that
makes them slower on tiny ones. Links: PCIe between CPU and GPUs, NVLink-like between GPUs.

``two_host_case()`` is the shape of the distributed TensorFlow case in Zins & Dagenais (IJPP 2019,
docs/prior-art.md §1.a): two hosts with a GPU each, a model whose naive placement splits layers
across the hosts and pays a network transfer at every layer boundary.
"""

from __future__ import annotations

import numpy as np

from tc_analyses.perf.problem import (
    Cost,
    CostSource,
    Device,
    Link,
    PlacementProblem,
    Task,
)

GPU_LAUNCH_NS = 5_000
PCIE = Link(10_000.0, 25.0, "link spec: PCIe 4.0 x16 (synthetic)")
NVLINK = Link(3_000.0, 200.0, "link spec: NVLink (synthetic)")
NETWORK = Link(50_000.0, 1.25, "link spec: 10 GbE (synthetic)")


def _devices(n_devices: int) -> list[Device]:
    if not 2 <= n_devices <= 4:
        raise ValueError("the generators make 2 to 4 devices: a CPU and 1-3 GPUs")
    return [Device("cpu", "Xeon")] + [Device(f"cuda:{k}", "H100") for k in range(n_devices - 1)]


def _links(devices: list[Device]) -> dict[tuple[str, str], Link]:
    links: dict[tuple[str, str], Link] = {}
    for a in devices:
        for b in devices:
            if a.name == b.name:
                continue
            if a.host != b.host:
                links[(a.name, b.name)] = NETWORK
            elif a.name == "cpu" or b.name == "cpu" or a.name.endswith(":cpu") or b.name.endswith(":cpu"):
                links[(a.name, b.name)] = PCIE
            else:
                links[(a.name, b.name)] = NVLINK
    return links


def _problem(n: int, edges: list[tuple[int, int]], rng: np.random.Generator, n_devices: int,
             kind: str) -> PlacementProblem:
    devices = _devices(n_devices)
    # work: the CPU time of each op, log-uniform from 2 us to 2 ms
    work = np.exp(rng.uniform(np.log(2_000), np.log(2_000_000), size=n)).astype(np.int64)
    tasks = [Task(i, f"{kind}.op{i}", "matmul" if work[i] > 200_000 else "elementwise", None) for i in range(n)]
    costs: dict[tuple[int, str], Cost] = {}
    for i in range(n):
        costs[(i, "cpu")] = Cost(int(work[i]), CostSource.MODELLED)
        for d in devices[1:]:
            # big ops are 3-20x faster on a GPU; small ones barely faster, then the launch overhead dominates
            speedup = rng.uniform(3.0, 20.0) if work[i] > 50_000 else rng.uniform(1.0, 3.0)
            costs[(i, d.name)] = Cost(max(1, int(work[i] / speedup * rng.uniform(0.9, 1.1))), CostSource.MODELLED)
    nbytes = np.exp(rng.uniform(np.log(4_096), np.log(4_000_000), size=len(edges))).astype(np.int64)
    return PlacementProblem(tasks, devices, costs, {e: int(b) for e, b in zip(edges, nbytes)}, _links(devices),
                            {d.name: GPU_LAUNCH_NS for d in devices[1:]})


def random_layered(n_tasks: int, n_devices: int = 3, seed: int = 0, width: int | None = None,
                   fan_in: int = 3) -> PlacementProblem:
    """Tasks in layers of about ``width`` (default ~sqrt(n)); each takes 1..fan_in inputs from the
    previous layer (and, with probability 0.2, one from an older layer)."""
    rng = np.random.default_rng(seed)
    width = width or max(1, int(round(n_tasks ** 0.5)))
    layers: list[list[int]] = []
    i = 0
    while i < n_tasks:
        w = min(n_tasks - i, max(1, int(rng.integers(max(1, width // 2), width + width // 2 + 1))))
        layers.append(list(range(i, i + w)))
        i += w
    edges: set[tuple[int, int]] = set()
    for li in range(1, len(layers)):
        prev = layers[li - 1]
        for v in layers[li]:
            for u in rng.choice(prev, size=min(len(prev), int(rng.integers(1, fan_in + 1))), replace=False):
                edges.add((int(u), v))
            if li >= 2 and rng.random() < 0.2:
                older = layers[int(rng.integers(0, li - 1))]
                edges.add((int(older[int(rng.integers(0, len(older)))]), v))
    return _problem(n_tasks, sorted(edges), rng, n_devices, "layered")


def fork_join(n_branches: int, branch_len: int, n_devices: int = 3, seed: int = 0,
              stages: int = 1) -> PlacementProblem:
    """``stages`` repetitions of: one fork task, ``n_branches`` chains of ``branch_len``, one join task."""
    rng = np.random.default_rng(seed)
    edges: list[tuple[int, int]] = []
    n = 0
    prev_join: int | None = None
    for _ in range(stages):
        fork = n
        n += 1
        if prev_join is not None:
            edges.append((prev_join, fork))
        tails = []
        for _b in range(n_branches):
            last = fork
            for _k in range(branch_len):
                edges.append((last, n))
                last = n
                n += 1
            tails.append(last)
        join = n
        n += 1
        edges += [(t, join) for t in tails]
        prev_join = join
    return _problem(n, edges, rng, n_devices, "forkjoin")


def series_parallel(n_tasks: int, n_devices: int = 3, seed: int = 0) -> PlacementProblem:
    """A random two-terminal series-parallel DAG grown by series and parallel expansions of its edges."""
    rng = np.random.default_rng(seed)
    edges: list[tuple[int, int]] = [(0, 1)]
    n = 2
    while n < n_tasks:
        k = int(rng.integers(0, len(edges)))
        u, v = edges[k]
        w = n
        n += 1
        if rng.random() < 0.5:  # series: u -> w -> v replaces u -> v
            edges[k] = (u, w)
            edges.append((w, v))
        else:  # parallel: add a branch u -> w -> v beside u -> v
            edges += [(u, w), (w, v)]
    edge_set = sorted(set(edges))
    return _problem(n, edge_set, rng, n_devices, "sp")


def two_host_case(layers: int = 12, ops_per_layer: int = 3,
                  activation_bytes: int = 8_000_000) -> tuple[PlacementProblem, dict[int, str]]:
    """Two hosts, each with a GPU; two model replicas (towers) of ``layers`` layers merge into a head.

    Returns the problem and the *naive* placement, layer ``k`` of both towers on host ``k % 2`` (what
    a round-robin split of the layers across the hosts does): every layer boundary then moves an
    activation over the 10 GbE network. Keeping each tower on one host pays the network once, at
    the merge. ``Task.actual_device`` holds the naive placement, as if read from a trace.
    """
    devices = [Device("hostA:cuda:0", "V100", host="hostA"), Device("hostB:cuda:0", "V100", host="hostB")]
    names = [d.name for d in devices]
    tasks: list[Task] = []
    costs: dict[tuple[int, str], Cost] = {}
    edges: dict[tuple[int, int], int] = {}
    naive: dict[int, str] = {}
    ops = ["matmul", "bias_add", "relu"]
    tails = []
    for tower in range(2):
        last: int | None = None
        for layer in range(layers):
            dev = names[layer % 2]
            for k in range(ops_per_layer):
                tid = len(tasks)
                op = ops[k % len(ops)]
                tasks.append(Task(tid, f"tower{tower}/layer{layer}/{op}", op, dev))
                ns = 400_000 if op == "matmul" else 30_000
                for d in names:
                    costs[(tid, d)] = Cost(ns, CostSource.MEASURED if d == dev else CostSource.MODELLED)
                naive[tid] = dev
                if last is not None:
                    edges[(last, tid)] = activation_bytes
                last = tid
        assert last is not None
        tails.append(last)
    for op in ("concat", "matmul", "softmax"):
        tid = len(tasks)
        dev = names[0]
        tasks.append(Task(tid, f"head/{op}", op, dev))
        for d in names:
            costs[(tid, d)] = Cost(400_000 if op == "matmul" else 30_000, CostSource.MODELLED)
        naive[tid] = dev
        if op == "concat":
            for t in tails:
                edges[(t, tid)] = activation_bytes
        else:
            edges[(tid - 1, tid)] = activation_bytes
    return PlacementProblem(tasks, devices, costs, edges, _links(devices), {}), naive
