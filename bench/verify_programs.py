"""Three graph programs for bench/verify_bench.py that no test uses: plans are checked on programs
the model was never tuned on.

* ``image-pipeline``: gray, blur, edge filters (Sobel x/y, Laplacian), a colour branch on a
  downsampled copy, pooled features, a linear head: ~30 nodes of convolutions and elementwise ops;
* ``map-reduce``: a tall matrix split in four, each part projected and squashed (the map), its Gram
  matrix taken, the four summed by a tree (the reduce): matrix products of uneven cost;
* ``heavy-branches``: a chain, then two branches of three large matrix products each, joined, then
  a chain again: little parallelism outside the branches.

Run: ``python bench/verify_programs.py NAME --steps N`` (applies ``$DFCOMPASS_PLAN`` as
tracer/workloads/graph_programs.py does).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tracer  # noqa: E402
from tracer.graph_program import GraphProgram, PlanError, Runner, plan_from_env  # noqa: E402
from tracer.workloads.graph_programs import Workload  # noqa: E402


def _stateless(name: str, fn: Callable[..., torch.Tensor], inputs: list[torch.Tensor]) -> Workload:
    with torch.no_grad():
        program = GraphProgram(make_fx(fn)(*inputs), name)
    return Workload(program, inputs, lambda inputs, out: inputs)


def image_pipeline(seed: int = 0) -> Workload:
    g = torch.Generator().manual_seed(seed)
    images = torch.rand(6, 3, 160, 160, generator=g)
    gauss = torch.tensor([1.0, 4.0, 6.0, 4.0, 1.0])
    gauss = (gauss[:, None] * gauss[None, :] / 256).reshape(1, 1, 5, 5)
    sobel_x = torch.tensor([[-1.0, 0.0, 1.0], [-2.0, 0.0, 2.0], [-1.0, 0.0, 1.0]]).reshape(1, 1, 3, 3)
    laplace = torch.tensor([[0.0, 1.0, 0.0], [1.0, -4.0, 1.0], [0.0, 1.0, 0.0]]).reshape(1, 1, 3, 3)
    colour = torch.randn(16, 3, 3, 3, generator=g) * 0.2
    head = torch.randn(10, 16 + 3 * 64, generator=g) * 0.05
    luma = torch.tensor([0.299, 0.587, 0.114]).reshape(1, 3, 1, 1)
    sobel_y = sobel_x.transpose(2, 3).contiguous()

    def step(x: torch.Tensor, luma: torch.Tensor, gauss: torch.Tensor, sobel_x: torch.Tensor,
             sobel_y: torch.Tensor, laplace: torch.Tensor, colour: torch.Tensor, head: torch.Tensor) -> torch.Tensor:
        gray = (x * luma).sum(1, keepdim=True)
        blur = F.conv2d(gray, gauss, padding=2)
        gx = F.conv2d(blur, sobel_x, padding=1)
        gy = F.conv2d(blur, sobel_y, padding=1)
        edges = torch.sqrt(gx * gx + gy * gy + 1e-6)
        lap = F.conv2d(blur, laplace, padding=1).abs()
        sharp = (gray - 0.5 * lap).clamp(0, 1)
        down = F.avg_pool2d(x, 2)
        col = F.relu(F.conv2d(down, colour, padding=1))
        col_features = col.mean(dim=(2, 3))
        pooled = [F.adaptive_avg_pool2d(m, 8).flatten(1) for m in (edges, lap, sharp)]
        features = torch.cat([col_features, *pooled], dim=1)
        return torch.softmax(features @ head.T, dim=1)

    return _stateless("image-pipeline", step, [images, luma, gauss, sobel_x, sobel_y, laplace, colour, head])


def map_reduce(seed: int = 0) -> Workload:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(6144, 384, generator=g)
    w = torch.randn(384, 384, generator=g) / 20

    def step(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        parts = torch.chunk(x, 4, dim=0)
        grams = []
        for i, part in enumerate(parts):
            mapped = torch.tanh(part @ w) * (i + 1)
            grams.append(mapped.T @ mapped)
        total = (grams[0] + grams[1]) + (grams[2] + grams[3])
        return total / total.diagonal().sum()

    return _stateless("map-reduce", step, [x, w])


def heavy_branches(seed: int = 0) -> Workload:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(1024, 512, generator=g)
    weights = [torch.randn(512, 512, generator=g) / 23 for _ in range(6)]

    def step(x: torch.Tensor, *w: torch.Tensor) -> torch.Tensor:
        h = torch.relu(x * 1.5 - 0.1)
        h = h / (h.norm(dim=1, keepdim=True) + 1e-3)
        left = torch.relu(torch.relu(torch.relu(h @ w[0]) @ w[1]) @ w[2])
        right = torch.sigmoid(torch.sigmoid(torch.sigmoid(h @ w[3]) @ w[4]) @ w[5])
        joined = left * right + h
        return torch.log_softmax(joined - joined.mean(dim=1, keepdim=True), dim=1)

    return _stateless("heavy-branches", step, [x, *weights])


PROGRAMS: dict[str, Callable[..., Workload]] = {
    "image-pipeline": image_pipeline, "map-reduce": map_reduce, "heavy-branches": heavy_branches,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("program", choices=sorted(PROGRAMS))
    parser.add_argument("--steps", type=int, default=8)
    args = parser.parse_args()
    torch.set_num_threads(1)
    try:
        plan = plan_from_env()
        workload = PROGRAMS[args.program]()
        with Runner(workload.program, plan, 1) as runner:
            for i in range(args.steps):
                with tracer.step(i):
                    runner.step(workload.inputs, record_args=i == 0)
    except PlanError as exc:
        parser.exit(2, f"verify_programs: error: {exc}\n")
    lanes = sorted(set(plan.assignment.values())) if plan else ["cpu:0"]
    print(f"{args.program}: {args.steps} steps on {', '.join(lanes)}", file=sys.stderr)


if __name__ == "__main__":
    main()
