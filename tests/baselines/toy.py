"""A toy federation for the client-loop seams: a 2-input linear regression per client.

Small enough that a round takes milliseconds, real enough to go through the engine, the channel,
the run directory and the submission like the VT5 task.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import torch
from datasets import Dataset
from safetensors.torch import save_file
from torch import nn

from baselines.core.task import FederatedTask


class ToyRegression(nn.Module):
    """``y = w . x + b`` with a squared-error loss (the outputs carry ``.loss`` like VT5's)."""

    def __init__(self) -> None:
        super().__init__()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            self.linear = nn.Linear(2, 1)

    def forward(self, x: torch.Tensor, labels: torch.Tensor) -> SimpleNamespace:
        prediction = self.linear(x).squeeze(-1)
        return SimpleNamespace(loss=((prediction - labels) ** 2).mean(), prediction=prediction)


def toy_task(clients: int = 3, rows: int = 24) -> FederatedTask:
    """Clients whose targets follow different linear rules (heterogeneous data)."""
    generator = torch.Generator().manual_seed(1)
    data = []
    for client in range(clients):
        x = torch.randn(rows, 2, generator=generator)
        y = x @ torch.tensor([1.0 + client, -2.0 * client]) + 0.5 * client
        data.append(
            Dataset.from_dict(
                {
                    "x": x.tolist(),
                    "y": y.tolist(),
                    "provider": [f"p{client}-{i % 2}" for i in range(rows)],
                }
            )
        )

    def collate(batch):
        return {
            "x": torch.tensor([row["x"] for row in batch]),
            "labels": torch.tensor([row["y"] for row in batch]),
        }

    def save_model(model: nn.Module, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        save_file(
            {k: v.contiguous() for k, v in model.state_dict().items()},
            directory / "model.safetensors",
        )

    return FederatedTask(
        build_model=ToyRegression,
        collate=collate,
        client_data=data,
        evaluate=None,
        save_model=save_model,
    )
