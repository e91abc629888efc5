"""Plan a large graph on a contracted one: chains folded into single tasks.

A chain is a run of tasks where each one is its predecessor's only successor and has no other
predecessor, and all ran on the same device with the same devices allowed. Placing such a run on
two devices only adds a transfer, so the optimiser places each chain whole. The plan it finds is
expanded back to every task and scheduled on the full problem, so the makespan reported is the
full graph's schedule under the same model, not the contracted one's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from tc_analyses.perf.problem import Cost, PlacementProblem, Task

CONTRACT_ABOVE = 5_000  # tasks: above this many, the optimiser works on the chains
MIN_FOLD = 0.8  # ... when folding leaves at most this share of the tasks


@dataclass(frozen=True)
class Contraction:
    problem: PlacementProblem  # one task per chain, keyed by the chain's first task
    members: dict[int, list[int]]  # chain task id -> the original tasks, in order

    def expand(self, assignment: dict[int, str]) -> dict[int, str]:
        """Each original task on its chain's device."""
        return {task: assignment[chain] for chain, tasks in self.members.items() for task in tasks}

    def notice(self, original: int) -> str:
        return (f"{original:,} nodes planned as {len(self.members):,} chains (runs of nodes with one "
                f"input and one output on one device, folded); the makespan is the full graph's schedule")


def contract_chains(problem: PlacementProblem) -> Contraction | None:
    """The problem with its chains folded, or None when folding keeps more than :data:`MIN_FOLD`
    of the tasks (a graph where most tensors have several readers, such as an LSTM's)."""
    succs, preds = problem.successors(), problem.predecessors()
    tasks = {t.id: t for t in problem.tasks}
    devices = problem.device_names()

    def kind(task: int) -> tuple[object, ...]:
        return (tasks[task].actual_device, tuple(problem.allowed(task, d) for d in devices))

    chain_of: dict[int, int] = {}
    members: dict[int, list[int]] = {}
    for task in problem.topological_order():
        before = preds[task]
        if len(before) == 1 and len(succs[before[0]]) == 1 and kind(before[0]) == kind(task):
            chain = chain_of[before[0]]
        else:
            chain = task
        chain_of[task] = chain
        members.setdefault(chain, []).append(task)
    if len(members) > MIN_FOLD * len(problem.tasks):  # too few chains to pay for a coarser plan
        return None

    def summed(pairs: dict[tuple[int, int], int]) -> dict[tuple[int, int], int]:
        out: dict[tuple[int, int], int] = {}
        for (u, v), nbytes in pairs.items():
            key = (chain_of[u], chain_of[v])
            if key[0] != key[1]:
                out[key] = out.get(key, 0) + nbytes
        return out

    new_tasks, costs = [], {}
    for chain, run in members.items():
        first = tasks[chain]
        name = first.name if len(run) == 1 else f"{first.name} (+{len(run) - 1} nodes)"
        new_tasks.append(Task(chain, name, first.op, first.actual_device, sum(tasks[t].memory_bytes for t in run)))
        for device in devices:
            if problem.allowed(chain, device):
                overhead = problem.launch_overhead_ns.get(device, 0)
                # problem.cost adds the launch overhead once per task: keep the members' others
                total = sum(problem.cost(t, device) for t in run) - overhead
                costs[(chain, device)] = Cost(total, problem.costs[(chain, device)].source)
    external: dict[int, int] = {}
    for task, nbytes in problem.external.items():
        external[chain_of[task]] = external.get(chain_of[task], 0) + nbytes
    tied: dict[int, int] = {}
    for task, root in problem.tied.items():
        if chain_of[task] != chain_of[root]:
            tied.setdefault(chain_of[task], chain_of[root])
    folded = replace(problem, tasks=new_tasks, costs=costs, edges=summed(problem.edges),
                     carried=summed(problem.carried), external=external, tied=tied,
                     forbidden=frozenset((chain_of[t], d) for t, d in problem.forbidden if chain_of[t] == t))
    return Contraction(folded, members)
