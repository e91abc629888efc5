"""Tensor edges of a CUDA training program against PyTorch's execution trace, recorded on a GPU.

    python tests/gpu_programs/cuda_edges.py OUT [DEVICE]   (DEVICE: cuda; cpu to try the script)

Writes ``OUT/trace`` (TorchRecorder) and ``OUT/et.json`` (ExecutionTraceObserver, started beside
the recorder in the same run) for 3 steps of a small convolutional network on the GPU: images
made by numpy and turned into tensors with ``torch.as_tensor`` (``lift_fresh``), copied to the
device; convolution, batch norm, dropout, cross entropy, backward; AdamW with foreach updates;
the loss read back. CUDA buffers come from the caching allocator, whose frees and reuses the
recorder sees through the profiler's memory events. tests/test_tracer/test_torch_cuda_trace.py
compares the two graphs with ``check_edges`` (no GPU needed there).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from tracer.torch_source import TorchRecorder

STEPS = 3


def main(out: Path, device: str = "cuda") -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.Dropout(0.1),
                          nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(16, 10)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=True)
    rng = np.random.default_rng(0)

    def step() -> float:
        images = (rng.random((8, 32, 32, 3)) * 255).astype(np.uint8)  # numpy's buffer, as a data loader makes
        x = torch.as_tensor(images).permute(0, 3, 1, 2).float().div(255).to(device)
        labels = torch.tensor(rng.integers(0, 10, 8)).to(device)
        loss = F.cross_entropy(model(x), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return float(loss)

    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    step()  # warm-up: lazy initialisation stays out of both graphs
    sync()
    from torch.profiler import ExecutionTraceObserver

    observer = ExecutionTraceObserver()
    observer.register_callback(str(out / "et.json"))
    with TorchRecorder(str(out / "trace")):
        observer.start()
        for _ in range(STEPS):
            step()
        sync()
        observer.stop()
    observer.unregister_callback()


if __name__ == "__main__":
    target = Path(sys.argv[1])
    target.mkdir(parents=True, exist_ok=True)
    main(target, sys.argv[2] if len(sys.argv) > 2 else "cuda")
