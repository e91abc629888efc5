"""Three eager training programs, recorded on the CPU and on a GPU, to check GPU predictions.

    python tests/gpu_programs/eager_programs.py NAME DEVICE OUT     (NAME: convnet|encoder|recommender)

Writes, for one run on DEVICE (cpu or cuda):

* ``OUT/trace``: the TorchRecorder trace of RECORDED steps (after WARMUP steps that are not recorded).
* ``OUT/timing.json``: the same program's steps timed untraced after the recorded ones (TIMED
  steps, each ended by a device synchronisation), with CUDA events on a GPU; the thread settings,
  the machine's load and the device's name. The recorder never reads this file: it is the
  measurement a prediction made from the CPU trace is checked against (bench/gpu_prediction.py).

Each step makes its batch on the host (as a data loader does) and copies it to DEVICE, then runs
forward, loss, backward and the optimiser. None of these programs is used by a test as a program:
tests read the traces they wrote.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn
from torch.nn import functional as F

WARMUP, RECORDED, TIMED = 2, 3, 20


def convnet(device: str) -> Callable[[], Any]:
    model = nn.Sequential(nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
                          nn.Conv2d(32, 64, 3, stride=2, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
                          nn.Conv2d(64, 128, 3, stride=2, padding=1), nn.ReLU(),
                          nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(128, 10)).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step() -> Any:
        x = torch.randn(64, 3, 32, 32).to(device)
        y = torch.randint(0, 10, (64,)).to(device)
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return step


def encoder(device: str) -> Callable[[], Any]:
    layer = nn.TransformerEncoderLayer(d_model=256, nhead=4, dim_feedforward=1024, dropout=0.1, batch_first=True)
    body = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False).to(device)
    head = nn.Linear(256, 8).to(device)
    params = [*body.parameters(), *head.parameters()]
    optimizer = torch.optim.AdamW(params, lr=1e-4)

    def step() -> Any:
        x = torch.randn(16, 128, 256).to(device)
        y = torch.randint(0, 8, (16,)).to(device)
        loss = F.cross_entropy(head(body(x).mean(dim=1)), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return step


def recommender(device: str) -> Callable[[], Any]:
    users, items = nn.Embedding(20000, 64).to(device), nn.Embedding(50000, 64).to(device)
    mlp = nn.Sequential(nn.Linear(128, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(), nn.Linear(256, 1)).to(device)
    optimizer = torch.optim.Adam([*users.parameters(), *items.parameters(), *mlp.parameters()], lr=1e-3)

    def step() -> Any:
        u = torch.randint(0, 20000, (1024,)).to(device)
        i = torch.randint(0, 50000, (1024,)).to(device)
        clicked = torch.rand(1024).round().to(device)
        logits = mlp(torch.cat([users(u), items(i)], dim=1)).squeeze(1)
        loss = F.binary_cross_entropy_with_logits(logits, clicked)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    return step


PROGRAMS = {"convnet": convnet, "encoder": encoder, "recommender": recommender}


def main(name: str, device: str, out: Path) -> None:
    from tracer.torch_source import TorchRecorder

    torch.manual_seed(0)
    step = PROGRAMS[name](device)
    on_gpu = device.startswith("cuda")
    sync = torch.cuda.synchronize if on_gpu else (lambda: None)
    for _ in range(WARMUP):
        step()
    sync()
    with TorchRecorder(str(out / "trace"), active=RECORDED, repeat=1) as recorder:
        for _ in range(RECORDED):
            step()
            recorder.step()
        sync()
    load_before = os.getloadavg()
    steps = []
    for number in range(TIMED):
        start_event = end_event = None
        if on_gpu:
            start_event, end_event = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start_event.record()
        began = time.perf_counter()
        step()
        if end_event is not None:
            end_event.record()
        sync()
        row = {"step": number, "wall_ms": (time.perf_counter() - began) * 1e3}
        if start_event is not None and end_event is not None:
            row["gpu_ms"] = start_event.elapsed_time(end_event)
        steps.append(row)
    meta = {"program": name, "device": device,
            "device_name": torch.cuda.get_device_name(0) if on_gpu else "cpu",
            "torch": torch.__version__, "cuda": torch.version.cuda, "cpu_count": os.cpu_count(),
            "torch_num_threads": torch.get_num_threads(), "torch_interop_threads": torch.get_num_interop_threads(),
            "omp_num_threads": os.environ.get("OMP_NUM_THREADS"), "loadavg": [load_before, os.getloadavg()],
            "warmup": WARMUP, "recorded": RECORDED, "nodes_recorded": recorder.nodes_recorded, "steps": steps}
    (out / "timing.json").write_text(json.dumps(meta, indent=1))
    walls = sorted(s["wall_ms"] for s in steps)
    print(f"{name} on {device}: {recorder.nodes_recorded} ops recorded; untraced step median {walls[len(walls) // 2]:.2f} ms")


if __name__ == "__main__":
    target = Path(sys.argv[3])
    target.mkdir(parents=True, exist_ok=True)
    main(sys.argv[1], sys.argv[2], target)
