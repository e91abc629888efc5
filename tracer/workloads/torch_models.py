"""The embedded PyTorch workload: a small ResNet and a small transformer, inference and training.

Hand-written models (no torchvision), deterministic under ``torch.manual_seed``:

* :class:`SmallResNet`: stem conv-bn-relu, two stages of BasicBlocks with residual adds (the
  second stage opens with a strided downsample block), global average pool, linear head;
  3x32x32 images, 10 classes.
* :class:`TransformerClassifier`: a pre-norm :class:`TransformerBlock` (LayerNorm, multi-head
  self-attention from ``nn.Linear`` q/k/v/out projections, softmax and matmuls, an MLP with
  GELU) on (batch, seq, dim) inputs, with a tiny classifier head.
* :func:`resnet18_like` and :func:`tiny_mlp`: the benchmark's models (bench/torch_overhead.py).

:func:`run` runs both models in inference (eval, no_grad) and a few training steps (forward,
loss, backward, SGD step). Recorded, one step per model step:

    python -m tracer.workloads.torch_models --out DIR

This is a program, not part of the recorder: it imports torch at module level.
"""

from __future__ import annotations

import argparse
import time
from typing import Callable, Sequence

import torch
from torch import nn
from torch.nn import functional as F

from tracer.ctf import TraceExistsError

CLASSES = 10
IMAGE = (3, 32, 32)
SEQ, DIM, HEADS = 16, 32, 4


# ---------------------------------------------------------------------------- ResNet
class BasicBlock(nn.Module):
    """Two 3x3 conv-bn layers and a residual add; a strided block downsamples its shortcut."""

    def __init__(self, in_channels: int, out_channels: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.downsample: nn.Module | None = None
        if stride != 1 or in_channels != out_channels:
            self.downsample = nn.Sequential(nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False),
                                            nn.BatchNorm2d(out_channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        shortcut = x if self.downsample is None else self.downsample(x)
        return F.relu(out + shortcut)


class ResNet(nn.Module):
    """A CIFAR-style ResNet: stages of BasicBlocks; every stage after the first halves the size."""

    def __init__(self, widths: Sequence[int], blocks: Sequence[int], classes: int = CLASSES) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(IMAGE[0], widths[0], 3, padding=1, bias=False),
                                  nn.BatchNorm2d(widths[0]), nn.ReLU())
        stages: list[nn.Module] = []
        channels = widths[0]
        for index, (width, count) in enumerate(zip(widths, blocks)):
            stride = 1 if index == 0 else 2
            layers = [BasicBlock(channels, width, stride)] + [BasicBlock(width, width) for _ in range(count - 1)]
            stages.append(nn.Sequential(*layers))
            channels = width
        self.stages = nn.Sequential(*stages)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.head = nn.Linear(channels, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stages(self.stem(x))
        return self.head(torch.flatten(self.pool(x), 1))


class SmallResNet(ResNet):
    """Two stages (16 and 32 channels) of two BasicBlocks; the second stage's first one downsamples."""

    def __init__(self, classes: int = CLASSES) -> None:
        super().__init__(widths=(16, 32), blocks=(2, 2), classes=classes)


def resnet18_like(classes: int = CLASSES) -> ResNet:
    """ResNet-18's shape (BasicBlock layers [2, 2, 2, 2], widths 64..512) for 32x32 inputs."""
    return ResNet(widths=(64, 128, 256, 512), blocks=(2, 2, 2, 2), classes=classes)


# ---------------------------------------------------------------------------- transformer
class SelfAttention(nn.Module):
    """Multi-head self-attention written out: q/k/v projections, scaled scores, softmax, matmuls."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        if dim % heads:
            raise ValueError(f"dim {dim} is not a multiple of heads {heads}")
        self.heads = heads
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.out = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, dim = x.shape
        head_dim = dim // self.heads

        def split(t: torch.Tensor) -> torch.Tensor:  # (b, s, d) -> (b, h, s, d/h)
            return t.reshape(batch, seq, self.heads, head_dim).transpose(1, 2)

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        scores = torch.matmul(q, k.transpose(-2, -1)) / head_dim ** 0.5
        attended = torch.matmul(torch.softmax(scores, dim=-1), v)
        return self.out(attended.transpose(1, 2).reshape(batch, seq, dim))


class TransformerBlock(nn.Module):
    """Pre-norm encoder block: x + attn(ln1(x)), then x + mlp(ln2(x)) with a GELU MLP."""

    def __init__(self, dim: int = DIM, heads: int = HEADS, hidden: int = 4 * DIM) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = SelfAttention(dim, heads)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TransformerClassifier(nn.Module):
    """One :class:`TransformerBlock`, a final LayerNorm, mean over the sequence, a linear head."""

    def __init__(self, dim: int = DIM, heads: int = HEADS, classes: int = CLASSES) -> None:
        super().__init__()
        self.block = TransformerBlock(dim, heads)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.block(x)).mean(dim=1))


# ---------------------------------------------------------------------------- benchmark MLP
def tiny_mlp(layers: int = 20, width: int = 16) -> nn.Sequential:
    """Many tiny ops: `layers` Linear(width, width) + ReLU pairs (per-op overhead dominates)."""
    modules: list[nn.Module] = []
    for _ in range(layers):
        modules += [nn.Linear(width, width), nn.ReLU()]
    return nn.Sequential(*modules)


# ---------------------------------------------------------------------------- the workload
class LstmSequence(nn.Module):
    """Two LSTM cells and a linear read-out unrolled over time, as pytorch/examples'
    time_sequence_prediction (hidden 51, one value per time step): many small ops per step."""

    def __init__(self, hidden: int = 51) -> None:
        super().__init__()
        self.hidden = hidden
        self.cell1 = nn.LSTMCell(1, hidden)
        self.cell2 = nn.LSTMCell(hidden, hidden)
        self.linear = nn.Linear(hidden, 1)

    def forward(self, series: torch.Tensor) -> torch.Tensor:
        batch = series.size(0)
        h1 = c1 = h2 = c2 = torch.zeros(batch, self.hidden)
        outputs = []
        for value in series.split(1, dim=1):
            h1, c1 = self.cell1(value, (h1, c1))
            h2, c2 = self.cell2(h1, (h2, c2))
            outputs.append(self.linear(h2))
        return torch.cat(outputs, dim=1)


class Workload:
    """Both models with their inputs and labels, built from `seed` (the setup, before any step)."""

    def __init__(self, batch: int = 8, seed: int = 0) -> None:
        torch.manual_seed(seed)
        generator = torch.Generator().manual_seed(seed + 1)
        self.models: dict[str, nn.Module] = {"resnet": SmallResNet(), "transformer": TransformerClassifier()}
        self.inputs = {"resnet": torch.randn(batch, *IMAGE, generator=generator),
                       "transformer": torch.randn(batch, SEQ, DIM, generator=generator)}
        self.labels = torch.randint(0, CLASSES, (batch,), generator=generator)

    def steps(self, steps_infer: int = 2, steps_train: int = 3,
              on_step: Callable[[], None] | None = None) -> dict[str, list[float]]:
        """Inference then training of both models; `on_step` is called after each step.

        Steps, in order: `steps_infer` inference steps of the ResNet, then of the transformer
        (eval, no_grad), then `steps_train` training steps (forward, cross-entropy, backward,
        SGD step) of the ResNet, then of the transformer. Returns, per phase, one number per
        step: the logits' sum for inference, the loss for training.
        """
        results: dict[str, list[float]] = {}
        for name, model in self.models.items():
            model.eval()
            out = results[f"{name}/infer"] = []
            with torch.no_grad():
                for _ in range(steps_infer):
                    out.append(float(model(self.inputs[name]).sum()))
                    if on_step is not None:
                        on_step()
        for name, model in self.models.items():
            model.train()
            optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
            out = results[f"{name}/train"] = []
            for _ in range(steps_train):
                optimizer.zero_grad()
                loss = F.cross_entropy(model(self.inputs[name]), self.labels)
                loss.backward()
                optimizer.step()
                out.append(float(loss.detach()))
                if on_step is not None:
                    on_step()
        return results


def run(steps_infer: int = 2, steps_train: int = 3, batch: int = 8, threads: int = 1, seed: int = 0,
        on_step: Callable[[], None] | None = None) -> dict[str, list[float]]:
    """Build the models and run their steps (:meth:`Workload.steps`) with `threads` torch threads.

    Deterministic: equal arguments give equal results.
    """
    torch.set_num_threads(threads)
    return Workload(batch, seed).steps(steps_infer, steps_train, on_step)


def record(out: str, steps_infer: int = 2, steps_train: int = 3, batch: int = 8, threads: int = 1,
           seed: int = 0, overwrite: bool = False) -> dict[str, list[float]]:
    """:func:`run` under :class:`tracer.torch_source.TorchRecorder`, one recorded step per model step.

    The models are built before recording starts, so the trace holds the steps only.
    """
    from tracer.torch_source import TorchRecorder

    torch.set_num_threads(threads)
    workload = Workload(batch, seed)
    steps = 2 * steps_infer + 2 * steps_train
    # One window over all steps, converted when the last one ends: every step is recorded and
    # carries its number.
    with TorchRecorder(out, wait=0, warmup=0, active=steps or None, repeat=1, overwrite=overwrite) as recorder:
        results = workload.steps(steps_infer, steps_train, on_step=recorder.step)
    print(f"torch_models: {recorder.nodes_recorded} ops and {recorder.edges_recorded} tensor edges "
          f"recorded into {out}")
    return results


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="record into this trace directory (default: run untraced)")
    parser.add_argument("--steps-infer", type=int, default=2, help="inference steps per model")
    parser.add_argument("--steps-train", type=int, default=3, help="training steps per model")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--overwrite", action="store_true", help="replace a trace already in --out")
    args = parser.parse_args(argv)
    options = {"steps_infer": args.steps_infer, "steps_train": args.steps_train, "batch": args.batch,
               "threads": args.threads, "seed": args.seed}
    t0 = time.perf_counter()
    if min(args.steps_infer, args.steps_train) < 0 or args.batch < 1 or args.threads < 1:
        parser.error("steps must be >= 0, batch and threads >= 1")
    try:
        results = record(args.out, overwrite=args.overwrite, **options) if args.out else run(**options)
    except TraceExistsError as exc:
        parser.exit(2, f"torch_models: error: {exc} (use --overwrite to replace it)\n")
    losses = ", ".join(f"{name} {values[-1]:.4f}" for name, values in results.items()
                       if name.endswith("/train") and values) or "none"
    print(f"torch_models: {time.perf_counter() - t0:.1f} s; final losses: {losses}")


if __name__ == "__main__":
    main()
