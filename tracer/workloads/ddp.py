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
import os
import socket
import time
from typing import Sequence

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

DIM = 64


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def train(rank: int, world: int, port: int, steps: int, slow_rank: int, delay_ms: float) -> None:
    """One rank: DDP over gloo, `steps` training steps, then a final barrier."""
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ["MASTER_PORT"] = str(port)
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        torch.manual_seed(0)
        model = nn.parallel.DistributedDataParallel(
            nn.Sequential(nn.Linear(DIM, 4 * DIM), nn.ReLU(), nn.Linear(4 * DIM, DIM)))
        optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
        generator = torch.Generator().manual_seed(rank)
        for _ in range(steps):
            x = torch.randn(16, DIM, generator=generator)
            optimizer.zero_grad()
            loss = model(x).square().mean()
            if rank == slow_rank:
                time.sleep(delay_ms / 1e3)  # this rank arrives late at the gradient all-reduce
            loss.backward()
            optimizer.step()
        dist.barrier()
    finally:
        dist.destroy_process_group()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--slow-rank", type=int, default=-1, help="the rank that computes longer (-1: none)")
    parser.add_argument("--delay-ms", type=float, default=0.0)
    args = parser.parse_args(argv)
    mp.spawn(train, args=(args.ranks, _free_port(), args.steps, args.slow_rank, args.delay_ms),
             nprocs=args.ranks, join=True)


if __name__ == "__main__":
    main()
