"""Personal splits of track 3: each client's own val/test questions, and the unseen providers.

A client's personal split of `val` or `test` is the questions whose provider belongs to that
client, the providers of its training file (`data_points.json` keys in the real release and in
a generated benchmark, else the training records' `provider` field). Those are the `in` part of
the split; the `out` part (providers no client holds) is the unseen-provider split that measures
the global model's generalisation, as FedVQA (FedP3) evaluates personalised models on seen scenes
and the global model on unseen ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmark.data.errors import DataError
from benchmark.data.imdb import read_imdb
from benchmark.data.reader import count_clients, find_split, provider_rows

PERSONAL_SPLITS = ("val", "test")


@dataclass(frozen=True)
class PersonalSplits:
    """The questions of one split, by client, and the unseen-provider questions.

    Attributes:
        split: "val" or "test".
        clients: client k -> the question ids of its personal split, in file order (every
            client 0..K-1 has a key, possibly with an empty list).
        unseen: question ids whose provider belongs to no client, in file order.
    """

    split: str
    clients: dict[int, list[int]]
    unseen: list[int]

    @property
    def num_clients(self) -> int:
        """K."""
        return len(self.clients)

    def client_of(self) -> dict[int, int]:
        """Question id -> the client whose personal split holds it (unseen questions left out)."""
        return {qid: client for client, qids in self.clients.items() for qid in qids}

    def sizes(self) -> dict[int, int]:
        """Client -> number of personal questions."""
        return {client: len(qids) for client, qids in self.clients.items()}


def client_of_provider(data_dir: str | Path) -> dict[str, int]:
    """Provider -> the client that holds it in training.

    Args:
        data_dir: a data directory with `imdb_train_client_{k}.npy` (and `data_points.json`).

    Returns:
        The mapping, every training provider once.

    Raises:
        DataError: when a provider appears at two clients (the clients' providers are disjoint).
    """
    owner: dict[str, int] = {}
    for client in range(count_clients(data_dir)):
        for provider in provider_rows(data_dir, client):
            if provider in owner and owner[provider] != client:
                raise DataError(
                    f"{data_dir}: provider {provider!r} belongs to client {owner[provider]} and "
                    f"client {client}; PFL-DocVQA clients hold disjoint providers."
                )
            owner[provider] = client
    return owner


def personal_splits(data_dir: str | Path, split: str = "test") -> PersonalSplits:
    """Each client's personal questions of a split and the unseen-provider questions.

    Question ids are those `load_split` returns (`question_id`, else the record position).

    Args:
        data_dir: a data directory holding the client training files and the split (`test`
            lives under `evaluator/`: organisers only).
        split: "val" or "test".

    Returns:
        The personal splits.

    Raises:
        ValueError: for another split.
        DataFileNotFoundError: when the split or the client files are missing.
        DataError: for a record without a provider, or whose `distribution` contradicts the
            clients' providers (an `in` question of a provider no client holds, or the reverse).
    """
    if split not in PERSONAL_SPLITS:
        raise ValueError(f"personal splits exist for {' and '.join(PERSONAL_SPLITS)}, not {split!r}")
    owner = client_of_provider(data_dir)
    path = find_split(data_dir, split)
    _, records = read_imdb(path)
    clients: dict[int, list[int]] = {client: [] for client in range(count_clients(data_dir))}
    unseen: list[int] = []
    for index, record in enumerate(records, start=1):
        client = _client_of_record(record, owner, f"{path}, record {index}")
        question_id = int(record.get("question_id", index))
        (unseen if client is None else clients[client]).append(question_id)
    return PersonalSplits(split=split, clients=clients, unseen=unseen)


def _client_of_record(record: dict[str, Any], owner: dict[str, int], where: str) -> int | None:
    """The client a val/test record belongs to (None: an unseen provider)."""
    provider = str(record.get("provider") or "")
    if not provider:
        raise DataError(
            f"{where}: no provider; personal splits need each val/test record's provider "
            "(the generator writes it; add it to the real release's records)."
        )
    client = owner.get(provider)
    distribution = str(record.get("distribution") or "")
    if distribution == "in" and client is None:
        raise DataError(
            f"{where}: an 'in' question of provider {provider!r}, which no client holds in "
            "training; the split and the client files come from different releases."
        )
    if distribution == "out" and client is not None:
        raise DataError(
            f"{where}: an 'out' question of provider {provider!r}, which client {client} holds "
            "in training; the split and the client files come from different releases."
        )
    return client
