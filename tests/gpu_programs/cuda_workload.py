"""A small CUDA training program, recorded on a GPU machine to make tests/data/traces/cuda/.

    python tests/gpu_programs/cuda_workload.py OUT

Writes, for one run of 4 recorded steps (after one warm-up step that is not recorded):

* ``OUT/trace``: the TorchRecorder trace (CPU ops, runtime API calls, kernels, copies, memory).
* ``OUT/timing.json``: times taken with CUDA events in the same run, which the recorder never
  reads: each step's GPU time, and the side stream's matrix product alone.
* ``OUT/kineto.json``: the same steps re-run under plain ``torch.profiler`` and exported by torch
  (``export_chrome_trace``), to compare the kernels the recorder wrote with torch's own export.

Each step copies a pinned batch to the GPU, runs a 4096x4096 matrix product on a side stream
while an MLP trains on the default stream (forward, loss, backward, SGD with momentum), joins the
streams and reads the loss back (a device-to-host copy that synchronises).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn
from torch.nn import functional as F

STEPS = 4
SIDE = 4096  # the side product: 2 * 4096^3 FLOP, a few ms in fp32


def build(seed: int = 0) -> tuple[Any, ...]:
    torch.manual_seed(seed)
    torch.backends.cuda.matmul.allow_tf32 = False
    model = nn.Sequential(nn.Linear(1024, 2048), nn.ReLU(), nn.Linear(2048, 1024), nn.ReLU(),
                          nn.Linear(1024, 10)).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    batch = torch.randn(256, 1024).pin_memory()
    labels = torch.randint(0, 10, (256,)).cuda()
    a = torch.randn(SIDE, SIDE, device="cuda")
    b = torch.randn(SIDE, SIDE, device="cuda")
    return model, optimizer, batch, labels, a, b


def step(parts: tuple[Any, ...], side: Any) -> dict[str, float]:
    model, optimizer, batch, labels, a, b = parts
    main = torch.cuda.current_stream()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    side_start, side_end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record(main)
    x = batch.to("cuda", non_blocking=True)
    side.wait_stream(main)
    with torch.cuda.stream(side):
        side_start.record(side)
        product = a @ b
        side_end.record(side)
    loss = F.cross_entropy(model(x), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    main.wait_stream(side)
    product.record_stream(main)
    end.record(main)
    value = loss.item()
    torch.cuda.synchronize()
    return {"gpu_ms": start.elapsed_time(end), "side_mm_ms": side_start.elapsed_time(side_end), "loss": value}


def run(parts: tuple[Any, ...], on_step: Callable[[], None]) -> list[dict[str, float]]:
    side = torch.cuda.Stream()
    timing = []
    for number in range(STEPS):
        timing.append({"step": number, **step(parts, side)})
        on_step()
    return timing


def main(out: Path) -> None:
    from tracer.torch_source import TorchRecorder

    parts = build()
    step(parts, torch.cuda.Stream())  # warm-up: cuBLAS handles, allocator, lazy module init
    torch.cuda.synchronize()
    with TorchRecorder(str(out / "trace"), active=STEPS, repeat=1) as recorder:
        timing = run(parts, recorder.step)
    print(f"cuda_workload: {recorder.nodes_recorded} ops, {recorder.edges_recorded} edges recorded")
    meta = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
            "cuda": torch.version.cuda, "steps": timing}
    (out / "timing.json").write_text(json.dumps(meta, indent=1))
    try:
        config = torch._C._profiler._ExperimentalConfig(enable_cuda_sync_events=True)
    except TypeError:
        config = None
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA],
                                experimental_config=config) as prof:
        run(parts, lambda: None)
    prof.export_chrome_trace(str(out / "kineto.json"))
    (out / "kineto_events.json").write_text(json.dumps(event_samples(prof), indent=1))


def event_samples(prof: Any, per_kind: int = 4) -> list[dict[str, Any]]:
    """A few of torch's raw Kineto events per (activity type, device type): what the recorder reads."""
    seen: dict[tuple[str, str], int] = {}
    samples = []
    for event in prof.profiler.kineto_results.events():
        kind = (str(getattr(event, "activity_type", lambda: "?")()), str(event.device_type()))
        if seen.setdefault(kind, 0) >= per_kind:
            continue
        seen[kind] += 1
        samples.append({"activity": kind[0], "device_type": kind[1], "name": event.name()[:100],
                        "correlation": event.correlation_id(), "resource": event.device_resource_id(),
                        "nbytes": event.nbytes() if hasattr(event, "nbytes") else None,
                        "metadata": event.metadata_json()[:400] if hasattr(event, "metadata_json") else None})
    return samples


if __name__ == "__main__":
    main(Path(sys.argv[1]))
