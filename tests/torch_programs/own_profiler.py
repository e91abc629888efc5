"""A program that opens its own profiler block mid-run (as pytorch/examples' fx profiling tracer,
HF Trainer and Lightning do when profiling is on), with a record_function inside, then exports it.

Usage: own_profiler.py OUT_JSON [--schedule]
"""

import sys

import torch
from torch import nn


def step(model: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor) -> None:
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()


def main() -> None:
    out, scheduled = sys.argv[1], "--schedule" in sys.argv
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.Tanh(), nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(8, 16)
    step(model, opt, x)  # before the block
    if scheduled:  # Lightning/HF style: a schedule stepped by the training loop
        schedule = torch.profiler.schedule(wait=1, warmup=0, active=1, repeat=1)
        with torch.profiler.profile(schedule=schedule, on_trace_ready=lambda p: p.export_chrome_trace(out)) as prof:
            for _ in range(3):
                with torch.profiler.record_function("user_step"):
                    step(model, opt, x)
                prof.step()
    else:
        with torch.profiler.profile(record_shapes=True) as prof:
            with torch.profiler.record_function("user_block"):
                step(model, opt, x)
        prof.export_chrome_trace(out)
    print("user profile events", len(prof.events()))
    with torch.autograd.profiler.profile() as legacy:  # the older API, as older programs use it
        model(x).sum()
    print("legacy profile events", len(legacy.function_events))
    step(model, opt, x)  # after the block
    print("done")


if __name__ == "__main__":
    main()
