"""The reader: PFL-DocVQA splits (real release or generated) as Hugging Face datasets.

A *data directory* is either the flat real release (imdb files + data_points.json, images in
`images/` or anywhere else) or a directory written by `pflkit data generate`; a split is looked
up in `DIR`, `DIR/participant`, `DIR/evaluator`, `DIR/public`, first match wins.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmark.data.errors import DataError, DataFileNotFoundError
from benchmark.data.imdb import read_data_points, read_imdb, validate_record

if TYPE_CHECKING:
    import datasets

SPLITS = ("train", "val", "test")
SUBDIRECTORIES = ("", "participant", "evaluator", "public")
DATA_POINTS = "data_points.json"
_CLIENT_FILE = re.compile(r"^imdb_train_client_(\d+)\.npy$")


def split_filename(split: str, client: int | None = None) -> str:
    """File name of a split: `imdb_train_client_{k}.npy`, `imdb_train.npy`, `imdb_val.npy`, `imdb_test.npy`."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, not {split!r}.")
    if client is not None and split != "train":
        raise ValueError(
            f"client selects a training file; split {split!r} has no clients (pass client=None)."
        )
    return f"imdb_train_client_{client}.npy" if client is not None else f"imdb_{split}.npy"


def find_split(data_dir: str | Path, split: str, client: int | None = None) -> Path:
    """Path of a split's imdb file inside a data directory (first match of DIR, DIR/participant, ...).

    Raises:
        DataFileNotFoundError: when no candidate directory holds the file.
        DataError: for `train` without a client in a directory whose training data is split by client.
    """
    data_dir = Path(data_dir)
    name = split_filename(split, client)
    for sub in SUBDIRECTORIES:
        directory = data_dir / sub
        if (directory / name).is_file():
            return directory / name
        if (
            split == "train"
            and client is None
            and (directory / "imdb_train_client_0.npy").is_file()
        ):
            raise DataError(
                f"{directory} splits the training data over clients: pass client=k to read "
                f"imdb_train_client_k.npy, or pass {data_dir / 'public'} to read the public training corpus."
            )
    searched = ", ".join(str(data_dir / sub) for sub in SUBDIRECTORIES)
    hint = (
        " (the test split only exists under evaluator/: organisers only)" if split == "test" else ""
    )
    raise DataFileNotFoundError(
        f"no {name} in {searched}{hint}: point the kit at the PFL-DocVQA data directory or generate one "
        "with `pflkit data generate --out DIR`."
    )


def count_clients(data_dir: str | Path) -> int:
    """Number of federated clients K in a data directory (files imdb_train_client_0..K-1).

    Raises:
        DataFileNotFoundError: when there is no client training file.
        DataError: when the client numbers are not 0..K-1.
    """
    for sub in SUBDIRECTORIES:
        directory = Path(data_dir) / sub
        if not directory.is_dir():
            continue
        clients = sorted(
            int(m.group(1)) for p in directory.iterdir() if (m := _CLIENT_FILE.match(p.name))
        )
        if clients:
            if clients != list(range(len(clients))):
                raise DataError(
                    f"{directory}: client files {clients} are not numbered 0..K-1 without gaps."
                )
            return len(clients)
    raise DataFileNotFoundError(
        f"no imdb_train_client_*.npy under {data_dir}: not a PFL-DocVQA data directory."
    )


def provider_rows(data_dir: str | Path, client: int) -> dict[str, list[int]]:
    """Rows of `load_split(data_dir, "train", client)` that belong to each provider of that client.

    Taken from `data_points.json` (record indexes minus one for the header) when it exists next
    to the client file, otherwise from the records' `provider` field. The DP baseline samples
    providers and trains on their rows.

    Returns:
        {provider: sorted dataset row indexes}, providers in sorted order.

    Raises:
        DataError: when data_points.json lacks the client or points outside its file.
    """
    path = find_split(data_dir, "train", client)
    header, records = read_imdb(path)
    by_points = _providers_from_data_points(path, client, len(records))
    if by_points is not None:
        return {
            provider: sorted(i - 1 for i in indexes)
            for provider, indexes in sorted(by_points.items())
        }
    rows: dict[str, list[int]] = {}
    for row, record in enumerate(records):
        provider = record.get("provider")
        if not provider:
            raise DataError(
                f"{path}, record {row + 1}: no provider; put data_points.json next to {path.name} "
                "(the real release ships it)."
            )
        rows.setdefault(str(provider), []).append(row)
    return dict(sorted(rows.items()))


def _providers_from_data_points(
    path: Path, client: int, n_records: int
) -> dict[str, list[int]] | None:
    """The client's {provider: record indexes} from data_points.json next to `path`, or None if absent."""
    points_path = path.parent / DATA_POINTS
    if not points_path.is_file():
        return None
    points = read_data_points(points_path)
    key = f"client_{client}"
    if key not in points:
        raise DataError(
            f"{points_path} has no entry {key!r}; it must list the providers of every client."
        )
    for provider, indexes in points[key].items():
        for index in indexes:
            if not 1 <= index <= n_records:
                raise DataError(
                    f"{points_path}: provider {provider!r} of {key} points at record {index}, but "
                    f"{path.name} holds records 1..{n_records} (index 0 is the header)."
                )
    return points[key]


def features() -> datasets.Features:
    """Column types of the datasets `load_split` returns."""
    import datasets

    return datasets.Features(
        {
            "question_id": datasets.Value("int64"),
            "question": datasets.Value("string"),
            "answers": datasets.Sequence(datasets.Value("string")),
            "ocr_tokens": datasets.Sequence(datasets.Value("string")),
            # float64: bucket ids are truncated from the stored coordinates, as the public code
            # does; a float32 round trip would move 0.99999999 to 1.0 (another bucket)
            "ocr_boxes": datasets.Sequence(datasets.Sequence(datasets.Value("float64"), length=4)),
            "image_path": datasets.Value("string"),
            "provider": datasets.Value("string"),
            "client": datasets.Value("int32"),
            "distribution": datasets.Value("string"),
            "question_type": datasets.Value("string"),
            "document_id": datasets.Value("string"),
        }
    )


def load_split(
    data_dir: str | Path,
    split: str,
    client: int | None = None,
    images_dir: str | Path | None = None,
    *,
    check_images: bool = True,
) -> datasets.Dataset:
    """Load one split of PFL-DocVQA (real or generated) as a `datasets.Dataset`.

    Args:
        data_dir: the data directory (flat real release or a generated benchmark directory).
        split: "train", "val" or "test".
        client: for "train", the client k whose `imdb_train_client_{k}.npy` is read; None reads
            `imdb_train.npy` (the public corpus, pass DIR/public).
        images_dir: where the page images are; default `images/` next to the imdb file.
        check_images: verify that every page image exists.

    Returns:
        Columns question_id, question, answers, ocr_tokens, ocr_boxes, image_path, provider,
        client (-1 outside training), distribution ("" when unknown), question_type ("" when
        unknown), document_id ("" when unknown).

    Raises:
        DataFileNotFoundError: for a missing imdb file or page image.
        DataError: for a record without a required field, bad boxes, or inconsistent providers.
    """
    import datasets

    path = find_split(data_dir, split, client)
    header, records = read_imdb(path)
    images = Path(images_dir) if images_dir is not None else path.parent / "images"
    require_answers = bool(header.get("has_answer", True))
    providers = (
        _providers_from_data_points(path, client, len(records)) if client is not None else None
    )
    provider_of: dict[int, str] = {}
    for provider, indexes in (providers or {}).items():
        for index in indexes:
            provider_of[index] = provider
    columns: dict[str, list[Any]] = {name: [] for name in features()}
    seen_images: set[str] = set()
    for index, record in enumerate(records, start=1):
        where = f"{path}, record {index}"
        boxes = validate_record(record, where, require_answers=require_answers)
        image_name = str(record["image_name"])
        image_path = images / f"{image_name}.jpg"
        if check_images and image_name not in seen_images:
            if not image_path.is_file():
                raise DataFileNotFoundError(
                    f"{where}: page image {image_path} does not exist; pass images_dir= (or --images-dir) "
                    "pointing at the directory that holds the <image_name>.jpg files."
                )
            seen_images.add(image_name)
        provider = str(record.get("provider") or "")
        if index in provider_of:
            if provider and provider != provider_of[index]:
                raise DataError(
                    f"{where}: provider {provider!r} but data_points.json assigns it to {provider_of[index]!r}; "
                    "the two files come from different releases."
                )
            provider = provider_of[index]
        columns["question_id"].append(int(record.get("question_id", index)))
        columns["question"].append(str(record["question"]))
        columns["answers"].append(_answers(record.get("answers"), where))
        columns["ocr_tokens"].append([str(t) for t in record["ocr_tokens"]])
        columns["ocr_boxes"].append(boxes.tolist())
        columns["image_path"].append(str(image_path))
        columns["provider"].append(provider)
        columns["client"].append(-1 if client is None else int(client))
        columns["distribution"].append(str(record.get("distribution") or ""))
        columns["question_type"].append(str(record.get("question_type") or ""))
        columns["document_id"].append(str(record.get("document_id") or ""))
    return datasets.Dataset.from_dict(columns, features=features())


def _answers(value: Any, where: str) -> list[str]:
    """Answers as a list of strings (the competition release stores one string)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    answers = [str(a) for a in value]
    if not answers:
        raise DataError(f"{where}: 'answers' is an empty list; give at least one answer.")
    return answers
