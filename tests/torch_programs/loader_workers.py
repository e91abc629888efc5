"""A training loop fed by a DataLoader with two worker processes (fork, the Linux default)."""

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Squares(Dataset):  # the workers compute each item: their time is the loader's time
    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int):
        x = torch.linspace(-1, 1, 16) * (i % 7)
        return x, (x ** 2).sum(0, keepdim=True)


def main() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    for x, y in DataLoader(Squares(), batch_size=16, num_workers=2):
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("loss", float(loss))


if __name__ == "__main__":
    main()
