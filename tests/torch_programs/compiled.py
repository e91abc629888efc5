"""A small CNN or transformer block trained through torch.compile.

Usage: compiled.py cnn|transformer [default|fullgraph|reduce-overhead|graph-break] [cpu|cuda] [STEPS (3)]
The transformer with graph-break prints from inside forward (dynamo splits the graph there). On
cuda, inductor writes Triton kernels (and reduce-overhead replays them as CUDA graphs).
"""

import sys

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, graph_break: bool) -> None:
        super().__init__()
        self.attn = nn.MultiheadAttention(32, 4, batch_first=True)
        self.ff = nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 32))
        self.norm = nn.LayerNorm(32)
        self.graph_break = graph_break

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(x, x, x, need_weights=False)[0]
        if self.graph_break:
            print("", end="")  # a Python side effect: dynamo breaks the graph here
        return self.norm(x + self.ff(x))


def main() -> None:
    kind = sys.argv[1]
    mode = sys.argv[2] if len(sys.argv) > 2 else "default"
    device = sys.argv[3] if len(sys.argv) > 3 else "cpu"
    steps = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    torch.manual_seed(0)
    if kind == "cnn":
        model: nn.Module = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 14 * 14, 10))
        shape = (4, 3, 16, 16)
    else:
        model = Block(graph_break=mode == "graph-break")
        shape = (2, 8, 32)
    options = {"fullgraph": True} if mode == "fullgraph" else {"mode": "reduce-overhead"} if mode == "reduce-overhead" else {}
    model = model.to(device)
    compiled = torch.compile(model, **options)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(steps):
        loss = compiled(torch.randn(*shape, device=device)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("loss", float(loss))


if __name__ == "__main__":
    main()
