"""Reader and writer of the real PFL-DocVQA layout, on hand-made files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from benchmark.data import (
    DataError,
    DataFileNotFoundError,
    count_clients,
    load_split,
    provider_rows,
    read_data_points,
    read_imdb,
    write_data_points,
    write_imdb,
)


def _record(i: int, provider: str, answers) -> dict:
    return {
        "question_id": 100 + i,
        "question": f"What is value {i}?",
        "answers": answers,
        "ocr_tokens": ["Total", f"{i}.00"],
        "ocr_normalized_boxes": np.array(
            [[0.1, 0.1, 0.2, 0.12], [0.3, 0.1, 0.4, 0.12]], dtype=np.float32
        ),
        "image_name": f"page_{i}",
        "provider": provider,
    }


def _layout(root: Path, answers_as_list: bool = False) -> Path:
    """A flat directory like the real release: two clients, val, data_points.json, images/."""
    (root / "images").mkdir(parents=True)
    points = {}
    for client in range(2):
        records = [
            _record(
                10 * client + i,
                f"prov{client}{i % 2}",
                [f"{i}.00"] if answers_as_list else f"{i}.00",
            )
            for i in range(4)
        ]
        write_imdb(root / f"imdb_train_client_{client}.npy", {"dataset_type": "train"}, records)
        points[f"client_{client}"] = {}
        for index, record in enumerate(records, start=1):
            points[f"client_{client}"].setdefault(record["provider"], []).append(index)
    val = [_record(50 + i, "", ["a", "b"]) | {"distribution": "out"} for i in range(3)]
    for record in val:
        del record["provider"]
        del record["question_id"]
    write_imdb(root / "imdb_val.npy", {"dataset_type": "val"}, val)
    write_data_points(root / "data_points.json", points)
    for client in range(2):
        for i in range(4):
            Image.new("RGB", (20, 20), "white").save(
                root / "images" / f"page_{10 * client + i}.jpg"
            )
    for i in range(3):
        Image.new("RGB", (20, 20), "white").save(root / "images" / f"page_{50 + i}.jpg")
    return root


@pytest.mark.parametrize("as_list", [False, True])
def test_round_trip_with_both_answer_forms(tmp_path: Path, as_list: bool) -> None:
    root = _layout(tmp_path, answers_as_list=as_list)
    header, records = read_imdb(root / "imdb_train_client_1.npy")
    assert header == {"dataset_type": "train"}
    assert records[2]["question"] == "What is value 12?"
    dataset = load_split(root, "train", client=1)
    assert dataset.column_names == [
        "question_id",
        "question",
        "answers",
        "ocr_tokens",
        "ocr_boxes",
        "image_path",
        "provider",
        "client",
        "distribution",
        "question_type",
        "document_id",
    ]
    assert dataset["answers"] == [["0.00"], ["1.00"], ["2.00"], ["3.00"]]
    assert dataset["client"] == [1, 1, 1, 1]
    assert dataset["provider"] == ["prov10", "prov11", "prov10", "prov11"]
    np.testing.assert_allclose(
        dataset[0]["ocr_boxes"], [[0.1, 0.1, 0.2, 0.12], [0.3, 0.1, 0.4, 0.12]], rtol=1e-6
    )
    assert Path(dataset[0]["image_path"]) == root / "images" / "page_10.jpg"
    val = load_split(root, "val")
    assert val["answers"][0] == ["a", "b"]
    assert val["question_id"] == [1, 2, 3]  # filled with the record position when missing
    assert (
        val["distribution"] == ["out"] * 3
        and val["client"] == [-1] * 3
        and val["provider"] == [""] * 3
    )


def test_provider_rows_and_clients(tmp_path: Path) -> None:
    root = _layout(tmp_path)
    assert count_clients(root) == 2
    assert provider_rows(root, 0) == {"prov00": [0, 2], "prov01": [1, 3]}
    assert read_data_points(root / "data_points.json")["client_1"] == {
        "prov10": [1, 3],
        "prov11": [2, 4],
    }


def test_images_dir_elsewhere(tmp_path: Path) -> None:
    root = _layout(tmp_path / "data")
    (root / "images").rename(tmp_path / "pictures")
    with pytest.raises(DataFileNotFoundError, match="page_0.jpg"):
        load_split(root, "train", client=0)
    dataset = load_split(root, "train", client=0, images_dir=tmp_path / "pictures")
    assert dataset["image_path"][0] == str(tmp_path / "pictures" / "page_0.jpg")


def test_missing_file(tmp_path: Path) -> None:
    _layout(tmp_path)
    with pytest.raises(DataFileNotFoundError, match="imdb_test.npy"):
        load_split(tmp_path, "test")
    with pytest.raises(FileNotFoundError, match="imdb_train_client_7.npy"):
        load_split(tmp_path, "train", client=7)
    with pytest.raises(DataError, match="pass client=k"):
        load_split(tmp_path, "train")


@pytest.mark.parametrize(
    "field", ["question", "answers", "ocr_tokens", "ocr_normalized_boxes", "image_name"]
)
def test_record_without_required_field(tmp_path: Path, field: str) -> None:
    record = _record(1, "p", "1.00")
    del record[field]
    with pytest.raises(DataError, match=f"record 1 has no field '{field}'"):
        write_imdb(tmp_path / "imdb_val.npy", {}, [record])
    assert list(tmp_path.iterdir()) == []  # nothing half-written
    array = np.empty(2, dtype=object)
    array[0], array[1] = {}, record
    np.save(tmp_path / "imdb_val.npy", array, allow_pickle=True)
    with pytest.raises(DataError, match=rf"imdb_val.npy, record 1 has no field '{field}'"):
        load_split(tmp_path, "val", check_images=False)


@pytest.mark.parametrize(
    ("boxes", "message"),
    [
        ([[0.1, 0.1, 1.3, 0.2], [0.1, 0.1, 0.2, 0.2]], "outside"),
        ([[-0.1, 0.1, 0.3, 0.2], [0.1, 0.1, 0.2, 0.2]], "outside"),
        ([[0.1, 0.1, 0.3], [0.1, 0.1, 0.2]], "shape"),
        ([[0.1, 0.1, 0.3, 0.2]], "2 OCR tokens but 1 boxes"),
        ([[10, 20, 30, 40], [1, 2, 3, 4]], "normalised"),
    ],
)
def test_bad_boxes(tmp_path: Path, boxes, message: str) -> None:
    record = _record(1, "p", "1.00") | {"ocr_normalized_boxes": np.array(boxes)}
    with pytest.raises(DataError, match=message):
        write_imdb(tmp_path / "imdb_val.npy", {}, [record])
    array = np.empty(2, dtype=object)
    array[0], array[1] = {}, record
    np.save(tmp_path / "imdb_val.npy", array, allow_pickle=True)
    with pytest.raises(DataError, match=message):
        load_split(tmp_path, "val", check_images=False)


def test_missing_image(tmp_path: Path) -> None:
    root = _layout(tmp_path)
    (root / "images" / "page_2.jpg").unlink()
    with pytest.raises(
        DataFileNotFoundError, match=r"record 3: page image .*page_2.jpg does not exist"
    ):
        load_split(root, "train", client=0)


def test_not_an_imdb_file(tmp_path: Path) -> None:
    np.save(tmp_path / "imdb_val.npy", np.zeros(3))
    with pytest.raises(DataError, match="header dict"):
        read_imdb(tmp_path / "imdb_val.npy")


def test_data_points_outside_the_file(tmp_path: Path) -> None:
    root = _layout(tmp_path)
    points = json.loads((root / "data_points.json").read_text())
    points["client_0"]["prov00"].append(9)
    (root / "data_points.json").write_text(json.dumps(points))
    with pytest.raises(DataError, match="points at record 9"):
        provider_rows(root, 0)


def test_data_points_disagree_with_records(tmp_path: Path) -> None:
    root = _layout(tmp_path)
    points = json.loads((root / "data_points.json").read_text())
    points["client_0"] = {"prov01": [1, 2, 3, 4]}
    (root / "data_points.json").write_text(json.dumps(points))
    with pytest.raises(DataError, match="different releases"):
        load_split(root, "train", client=0)
