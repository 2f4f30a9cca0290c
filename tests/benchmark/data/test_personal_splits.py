"""Track-3 personal splits: each val/test question of a provider goes to the client holding it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from benchmark.data import DataError, personal_splits
from benchmark.data.cli import data


def _records(path: Path) -> list[dict]:
    return list(np.load(path, allow_pickle=True)[1:])


def _expected(tiny_dir: Path, split: str) -> tuple[dict[int, list[int]], list[int]]:
    """Computed here from data_points.json and the records, independently of the module."""
    points = json.loads((tiny_dir / "participant" / "data_points.json").read_text())
    owner = {provider: int(key.split("_")[1]) for key, providers in points.items()
             for provider in providers}
    directory = "evaluator" if split == "test" else "participant"
    clients: dict[int, list[int]] = {k: [] for k in range(len(points))}
    unseen = []
    for record in _records(tiny_dir / directory / f"imdb_{split}.npy"):
        if record["distribution"] == "in":
            clients[owner[record["provider"]]].append(int(record["question_id"]))
        else:
            assert record["provider"] not in owner
            unseen.append(int(record["question_id"]))
    return clients, unseen


@pytest.mark.parametrize("split", ["val", "test"])
def test_each_question_goes_to_the_client_of_its_provider(tiny_dir: Path, split: str) -> None:
    splits = personal_splits(tiny_dir, split)
    clients, unseen = _expected(tiny_dir, split)
    assert splits.clients == clients and splits.unseen == unseen
    assert splits.num_clients == 10 and sum(splits.sizes().values()) > 0 and unseen
    client_of = splits.client_of()
    for client, qids in clients.items():
        assert all(client_of[qid] == client for qid in qids)
    train_ids = {int(r["question_id"]) for k in range(10)
                 for r in _records(tiny_dir / "participant" / f"imdb_train_client_{k}.npy")}
    assert not train_ids & set(client_of)


def test_a_split_and_clients_of_different_releases_are_refused(tiny_dir: Path,
                                                               tmp_path: Path) -> None:
    copy = tmp_path / "bench"
    shutil.copytree(tiny_dir / "participant", copy / "participant", ignore=_no_images)
    path = copy / "participant" / "imdb_val.npy"
    array = np.load(path, allow_pickle=True)
    row = next(i for i in range(1, len(array)) if array[i]["distribution"] == "in")
    array[row] = {**array[row], "provider": "a provider nobody holds"}
    np.save(path, array, allow_pickle=True)
    with pytest.raises(DataError, match=f"record {row}: an 'in' question of provider"):
        personal_splits(copy, "val")
    array[row] = {key: value for key, value in array[row].items() if key != "provider"}
    np.save(path, array, allow_pickle=True)
    with pytest.raises(DataError, match="no provider"):
        personal_splits(copy, "val")
    with pytest.raises(ValueError, match="val and test"):
        personal_splits(copy, "train")


def test_stats_show_the_personal_split_sizes(tiny_dir: Path) -> None:
    rows = json.loads(CliRunner().invoke(data, ["stats", str(tiny_dir), "--json"]).output)
    splits = personal_splits(tiny_dir, "test")
    assert [rows[f"test_in_client_{k}"]["qa"] for k in range(10)] == [
        len(splits.clients[k]) for k in range(10)]
    assert sum(rows[f"val_in_client_{k}"]["qa"] for k in range(10)) == rows["val_in"]["qa"]
    table = CliRunner().invoke(data, ["stats", str(tiny_dir)], terminal_width=120).output
    assert "test in client 3" in table and "val in client 9" in table


def _no_images(directory: str, names: list[str]) -> list[str]:
    return [name for name in names if name == "images"]
