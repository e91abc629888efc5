"""Hogwild-style training: the main process spawns two children that train a shared model."""

import torch
import torch.multiprocessing as mp
from torch import nn


def train(rank: int, model: nn.Module) -> None:
    torch.manual_seed(rank)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(3):
        x = torch.randn(8, 16)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


def main() -> None:
    model = nn.Linear(16, 4)
    model.share_memory()
    ctx = mp.get_context("spawn")
    children = [ctx.Process(target=train, args=(rank, model)) for rank in range(2)]
    for child in children:
        child.start()
    for child in children:
        child.join()
    with torch.no_grad():  # the main process evaluates what the children trained
        print("eval", float(model(torch.ones(2, 16)).sum()))


if __name__ == "__main__":
    main()
