"""A data-parallel training job: N ranks of DistributedDataParallel on gloo (CPU), by ``mp.spawn``.

Each rank trains the same small MLP on its own batches; DDP all-reduces the gradients in
backward, so every step has collectives that all ranks must join. ``--slow-rank R --delay-ms D``
makes rank R compute D ms longer before each backward, so the others wait for it at the
all-reduce: a straggler whose size the test knows and the analysis does not.

Recorded as a job, one trace per rank (tracer/job.py):

    dfcompass record -o JOB -- python -m tracer.workloads.ddp --ranks 2

This is a program, not part of the recorder: it imports torch at module level.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import time
from typing import Any, Sequence

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

DIM = 64


HOST = "127.0.0.1"


def _profiled(on: bool) -> Any:
    """torch.profiler as the benchmark's baseline (record_shapes, profile_memory, nothing exported)."""
    if not on:
        return contextlib.nullcontext()
    from torch.profiler import ProfilerActivity, profile

    return profile(activities=[ProfilerActivity.CPU], record_shapes=True, profile_memory=True)


def train(rank: int, world: int, port: int, steps: int, slow_rank: int, delay_ms: float,
          profile: bool = False, timings: str = "") -> None:
    """One rank: DDP over gloo, `steps` training steps, then a final barrier. With `timings`, the
    rank appends {"rank", "loop_s"} (the training loop's wall time) as a JSON line to that file."""
    torch.set_num_threads(1)
    # The launcher hosts the rendezvous store (as torchrun's agent does): a rank that hosted it
    # could exit while the others still talk to it, and gloo then aborts them at teardown.
    store = dist.TCPStore(HOST, port, world, is_master=False)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world)
    model: Any = None
    optimizer: Any = None
    try:
        torch.manual_seed(0)
        model = nn.parallel.DistributedDataParallel(
            nn.Sequential(nn.Linear(DIM, 4 * DIM), nn.ReLU(), nn.Linear(4 * DIM, DIM)))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        generator = torch.Generator().manual_seed(rank)
        dist.barrier()  # the ranks start the loop together
        start = time.perf_counter()
        with _profiled(profile):
            for _ in range(steps):
                x = torch.randn(16, DIM, generator=generator)
                optimizer.zero_grad()
                loss = model(x).square().mean()
                if rank == slow_rank:
                    time.sleep(delay_ms / 1e3)  # this rank arrives late at the gradient all-reduce
                loss.backward()
                optimizer.step()
            dist.barrier()
        if timings:
            with open(timings, "a") as out:
                out.write(json.dumps({"rank": rank, "loop_s": time.perf_counter() - start}) + "\n")
    finally:
        # DDP's reducer before the process group it uses: freed after it (at exit), it made gloo
        # abort the process in about one run in ten.
        model = optimizer = None
        gc.collect()
        dist.destroy_process_group()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--slow-rank", type=int, default=-1, help="the rank that computes longer (-1: none)")
    parser.add_argument("--delay-ms", type=float, default=0.0)
    parser.add_argument("--profile", action="store_true", help="run the loop under torch.profiler (bench baseline)")
    parser.add_argument("--timings", default="", help="append each rank's loop time to this JSON-lines file")
    args = parser.parse_args(argv)
    store = dist.TCPStore(HOST, 0, args.ranks, is_master=True, wait_for_workers=False)  # a free port
    mp.spawn(train, args=(args.ranks, store.port, args.steps, args.slow_rank, args.delay_ms, args.profile,
                          args.timings), nprocs=args.ranks, join=True)


if __name__ == "__main__":
    main()
