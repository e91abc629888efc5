"""Three programs of different shapes, run as graph programs so that placement plans apply to them.

* ``cnn-train``: a training step (forward, cross-entropy, backward, SGD update) of a small CNN with
  two convolution branches per block, captured with ``make_fx`` over ``torch.func.grad``;
* ``transformer-infer``: inference of two pre-norm transformer blocks (attention written out);
* ``branchy-mlp``: four independent MLP branches on one input, summed (wide inter-op parallelism).

Each step runs through :func:`tracer.graph_program.run_step`, inside ``tracer.step(i)``, under the
plan that ``DFCOMPASS_PLAN`` names (``dfcompass verify`` sets it), else sequentially on one lane.
Record with ``dfcompass record -o DIR -- python -m tracer.workloads.graph_programs cnn-train``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad
from torch.fx.experimental.proxy_tensor import make_fx

import tracer
from tracer.graph_program import GraphProgram, Plan, PlanError, Runner, plan_from_env
from tracer.workloads.torch_models import TransformerBlock

CLASSES = 10


class _BranchyCNN(nn.Module):
    """Stem, then blocks of two parallel 3x3 convolution branches added together, pooled, a head."""

    def __init__(self, width: int = 24, blocks: int = 2) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, width, 3, padding=1)
        self.left = nn.ModuleList(nn.Conv2d(width, width, 3, padding=1) for _ in range(blocks))
        self.right = nn.ModuleList(nn.Conv2d(width, width, 3, padding=1) for _ in range(blocks))
        self.head = nn.Linear(width, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.stem(x))
        for left, right in zip(self.left, self.right):
            x = F.relu(left(x)) + F.relu(right(x))
        return self.head(x.mean(dim=(2, 3)))


class _BranchyMLP(nn.Module):
    def __init__(self, dim: int = 256, hidden: int = 512, branches: int = 4) -> None:
        super().__init__()
        self.branches = nn.ModuleList(
            nn.Sequential(nn.Linear(dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                          nn.Linear(hidden, dim)) for _ in range(branches))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.branches[0](x)
        for branch in self.branches[1:]:
            out = out + branch(x)
        return out


@dataclass
class Workload:
    """A graph program, its first inputs, and how a step's output feeds the next step's inputs."""

    program: GraphProgram
    inputs: list[Any]
    carry: Callable[[list[Any], Any], list[Any]]  # (inputs, output) -> next inputs


def cnn_train(batch: int = 16, seed: int = 0) -> Workload:
    torch.manual_seed(seed)
    model = _BranchyCNN()
    params = {k: v.detach() for k, v in model.named_parameters()}
    x, y = torch.randn(batch, 3, 32, 32), torch.randint(0, CLASSES, (batch,))

    def loss(p: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(functional_call(model, p, (x,)), y)

    def step(p: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor) -> list[torch.Tensor]:
        g = grad(loss)(p, x, y)
        return [p[k] - 0.01 * g[k] for k in p]  # SGD

    program = GraphProgram(make_fx(step)(params, x, y), "cnn-train")
    return Workload(program, [*params.values(), x, y], lambda inputs, out: [*out, *inputs[len(out):]])


def _inference(name: str, model: nn.Module, x: torch.Tensor) -> Workload:
    model.eval()
    params = {k: v.detach() for k, v in model.named_parameters()}

    def forward(p: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        return functional_call(model, p, (x,))

    with torch.no_grad():
        program = GraphProgram(make_fx(forward)(params, x), name)
    return Workload(program, [*params.values(), x], lambda inputs, out: inputs)


def transformer_infer(batch: int = 8, seed: int = 0) -> Workload:
    torch.manual_seed(seed)
    model = nn.Sequential(TransformerBlock(128, 4), TransformerBlock(128, 4))
    return _inference("transformer-infer", model, torch.randn(batch, 64, 128))


def branchy_mlp(batch: int = 256, seed: int = 0) -> Workload:
    torch.manual_seed(seed)
    return _inference("branchy-mlp", _BranchyMLP(), torch.randn(batch, 256))


PROGRAMS: dict[str, Callable[..., Workload]] = {
    "cnn-train": cnn_train, "transformer-infer": transformer_infer, "branchy-mlp": branchy_mlp,
}


def run(name: str, steps: int, plan: Plan | None = None, threads: int = 1, seed: int = 0) -> Any:
    """Build program `name` and run `steps` steps of it under `plan`; the last step's output."""
    workload = PROGRAMS[name](seed=seed)
    inputs, output = workload.inputs, None
    with Runner(workload.program, plan, threads) as runner:
        for i in range(steps):
            with tracer.step(i):
                output = runner.step(inputs, record_args=i == 0)
            inputs = workload.carry(inputs, output)
    return output


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("program", choices=sorted(PROGRAMS))
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads per lane")
    parser.add_argument("--plan", help="a plan.json to apply (default: $DFCOMPASS_PLAN, else sequential)")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.threads < 1:
        parser.error("steps and threads must be >= 1")
    try:
        plan = Plan.load(args.plan) if args.plan else plan_from_env()
        run(args.program, args.steps, plan, args.threads)
    except PlanError as exc:
        parser.exit(2, f"graph_programs: error: {exc}\n")
    lanes = sorted(set(plan.assignment.values())) if plan else ["cpu:0"]
    print(f"{args.program}: {args.steps} steps on {', '.join(lanes)}")


if __name__ == "__main__":
    main()
