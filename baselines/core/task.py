"""What the engine needs to know about a model and its data, independent of VT5."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from torch import nn

from baselines.core.training import Collate

if TYPE_CHECKING:
    from datasets import Dataset


@dataclass
class FederatedTask:
    """A model family plus the federation's data.

    Attributes:
        build_model: returns a fresh copy of the pre-trained base model (what every party holds
            before round 1; its download is not counted).
        collate: list of dataset rows -> model inputs with ``labels``.
        client_data: one dataset per client, index = client id.
        evaluate: model -> metrics (``anls`` at least) on the validation questions, or ``None``.
        save_model: writes a base-architecture model to a directory (the submission checkpoint).
        info: free description for ``submission.json`` (data dir, base checkpoint, ...).
        length_column: a column of the client datasets with each row's input length (batches are
            grouped by it to save padding), or ``None``.
        prefetch: ``collate`` may run in a background thread, ahead of the model (it draws no
            torch random numbers, so running it beside the forward passes changes nothing).
    """

    build_model: Callable[[], nn.Module]
    collate: Collate
    client_data: Sequence[Dataset]
    evaluate: Callable[[nn.Module], dict[str, float]] | None
    save_model: Callable[[nn.Module, Path], None]
    info: dict[str, Any] = field(default_factory=dict)
    length_column: str | None = None
    prefetch: bool = True

    @property
    def num_clients(self) -> int:
        """K."""
        return len(self.client_data)
