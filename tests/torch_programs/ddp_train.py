"""Data-parallel training on two gloo ranks, as torchrun starts it: torchrun --nproc_per_node=2 ddp_train.py"""

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel


def main() -> None:
    dist.init_process_group("gloo")
    torch.manual_seed(dist.get_rank())
    model = DistributedDataParallel(nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(3):
        x = torch.randn(8, 16)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()  # DDP all-reduces the gradients here
        opt.step()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
