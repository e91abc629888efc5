"""Issue 34's placement row: an LSTM-cell sequence loop shaped like pytorch/examples'
time_sequence_prediction (two LSTM cells and a linear layer stepped over a sequence, one forward
and backward pass and an SGD step), about 27k recorded ops with the default 340 steps.

Run by ``bench/analysis_pace.py`` under ``dfcompass record``; ``PACE_LSTM_STEPS`` sets the length."""

import os

import torch
import torch.nn as nn

STEPS = int(os.environ.get("PACE_LSTM_STEPS", "340"))


class Sequence(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm1 = nn.LSTMCell(1, 51)
        self.lstm2 = nn.LSTMCell(51, 51)
        self.linear = nn.Linear(51, 1)

    def forward(self, series: torch.Tensor) -> torch.Tensor:
        h1 = c1 = h2 = c2 = torch.zeros(series.size(0), 51, dtype=torch.double)
        outputs = []
        for value in series.split(1, dim=1):
            h1, c1 = self.lstm1(value, (h1, c1))
            h2, c2 = self.lstm2(h1, (h2, c2))
            outputs.append(self.linear(h2))
        return torch.cat(outputs, dim=1)


def main() -> None:
    torch.manual_seed(0)
    waves = torch.sin(torch.arange(97 * (STEPS + 1), dtype=torch.double).reshape(97, STEPS + 1) / 20.0)
    model = Sequence().double()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    optimizer.zero_grad()
    loss = nn.functional.mse_loss(model(waves[:, :-1]), waves[:, 1:])
    loss.backward()
    optimizer.step()
    print(f"loss {loss.item():.6f}")


if __name__ == "__main__":
    main()
