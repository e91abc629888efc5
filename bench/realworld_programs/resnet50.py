"""torchvision's ResNet-50, two SGD training steps on random images (no download).

    python bench/realworld_programs/resnet50.py [--steps 2] [--batch 4] [--size 112]
"""

from __future__ import annotations

import argparse

import torch
import torchvision


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--size", type=int, default=112)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = torchvision.models.resnet50()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    images = torch.randn(args.batch, 3, args.size, args.size)
    labels = torch.randint(0, 1000, (args.batch,))
    for step in range(args.steps):
        loss = torch.nn.functional.cross_entropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"resnet50: step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    main()
