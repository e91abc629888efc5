"""A CUDA training loop fed by two DataLoader workers: recorded with ``dfcompass record`` on a GPU.

    dfcompass record -o JOB -- python tests/gpu_programs/cuda_job.py

The job holds the main process's trace (ops, runtime API calls, kernels, copies) and one trace per
worker process (the workers build batches on the CPU).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(512, 64), torch.randint(0, 4, (512,)))
    loader = DataLoader(data, batch_size=64, num_workers=2, pin_memory=True)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 4)).cuda()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for x, y in loader:
        x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f"cuda_job: final loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
