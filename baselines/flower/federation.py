"""What the parties of a deployed federation know of each other, and how each builds its view.

The server holds no client data: before round 1 it asks every node for a
:class:`ClientSummary` of each client it runs (rows and number of distinct providers, never the
providers themselves), which is all the engine and a DP method's calibration read
(:func:`baselines.privacy.plan.min_providers` counts the distinct values of each client's
``provider`` column). A node builds the same task with its own clients' datasets and the others'
summaries, so its method binds (and a DP method calibrates its noise) exactly as the server's.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from baselines.core.task import FederatedTask


@dataclass(frozen=True)
class ClientSummary:
    """What the server learns of a remote client's data.

    It answers the ``provider`` column with anonymous labels, one per distinct provider (and
    ``""`` when some rows have none, which a DP method refuses as for the real column).

    Attributes:
        client: the client id.
        rows: training questions.
        providers: distinct providers among them.
        unlabelled: rows without a provider.
    """

    client: int
    rows: int
    providers: int
    unlabelled: int = 0

    def __len__(self) -> int:
        return self.rows

    def __getitem__(self, column: str) -> list[str]:
        if column != "provider":
            raise KeyError(f"a remote client's summary has no column {column!r}")
        return [f"provider-{i}" for i in range(self.providers)] + [""] * min(self.unlabelled, 1)

    @classmethod
    def of(cls, client: int, dataset: Any) -> ClientSummary:
        """The summary of a client's tokenised dataset."""
        column = list(dataset["provider"]) if "provider" in dataset.column_names else []
        labelled = [p for p in column if p]
        return cls(
            client=client,
            rows=len(dataset),
            providers=len(set(labelled)),
            unlabelled=len(dataset) - len(labelled),
        )

    def to_json(self) -> str:
        """One JSON object."""
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ClientSummary:
        """Parse :meth:`to_json`'s output."""
        return cls(**json.loads(text))


def parse_clients(text: str) -> list[int]:
    """Client ids of a node: ``"3"``, ``"0,1,2"`` or ``"4-6"`` (sorted, without repeats).

    Raises:
        ValueError: for anything else.
    """
    clients: set[int] = set()
    for part in str(text).split(","):
        part = part.strip()
        low, dash, high = part.partition("-")
        if not low.isdigit() or (dash and not high.isdigit()):
            raise ValueError(f"--client takes ids such as 3, 0,1,2 or 4-6; got {text!r}")
        clients.update(range(int(low), int(high if dash else low) + 1))
    return sorted(clients)


def with_summaries(task: FederatedTask, summaries: Sequence[ClientSummary]) -> FederatedTask:
    """``task`` with every client it does not hold replaced by its summary.

    Raises:
        ValueError: when the summaries do not cover clients 0..K-1 of ``task``.
    """
    by_client = {summary.client: summary for summary in summaries}
    missing = [k for k, data in enumerate(task.client_data) if data is None and k not in by_client]
    if missing:
        raise ValueError(f"no node reported clients {missing}")
    client_data = [
        by_client[k] if data is None else data for k, data in enumerate(task.client_data)
    ]
    info = {**task.info, "train_questions": [len(data) for data in client_data]}
    return dataclasses.replace(task, client_data=client_data, info=info)


def party_task(
    data_dir: str | Path, base: str, *, clients: Sequence[int], summaries: Sequence[ClientSummary]
) -> FederatedTask:
    """A node's task: its clients' datasets (read from its own files only), the others' summaries.

    Args:
        data_dir: the node's data directory (it may hold only its own clients' files).
        base: the pre-trained checkpoint.
        clients: the node's clients.
        summaries: every client's summary, as the server collected them.
    """
    from baselines.engine.document_task import build_task

    task = build_task(
        data_dir, base, val_limit=0, progress=False, clients=clients, num_clients=len(summaries)
    )
    return with_summaries(task, summaries)
