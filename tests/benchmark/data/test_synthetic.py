"""The synthetic generator, checked on a real generated `tiny` benchmark."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from benchmark.data import count_clients, load_split, read_data_points, read_imdb
from benchmark.data.synthetic import SCALES, public_records
from benchmark.data.synthetic.benchmark import plan_providers
from benchmark.data.synthetic.locales import CLIENT_LOCALES
from benchmark.data.synthetic.page import Page, encode_jpeg


def _all_records(root: Path) -> dict[str, list[dict]]:
    files = {f"client_{k}": root / "participant" / f"imdb_train_client_{k}.npy" for k in range(10)}
    files |= {
        "val": root / "participant" / "imdb_val.npy",
        "test": root / "evaluator" / "imdb_test.npy",
        "public_train": root / "public" / "imdb_train.npy",
        "public_val": root / "public" / "imdb_val.npy",
    }
    return {name: read_imdb(path)[1] for name, path in files.items()}


def _spans(tokens: list[str], answer: str) -> int:
    words = answer.split()
    return sum(tokens[i : i + len(words)] == words for i in range(len(tokens) - len(words) + 1))


def test_layout_and_benchmark_json(tiny_dir: Path) -> None:
    info = json.loads((tiny_dir / "benchmark.json").read_text())
    assert info["scale"] == "tiny" and info["seed"] == 0 and info["clients"] == 10
    assert count_clients(tiny_dir) == 10
    assert sorted(p.name for p in (tiny_dir / "evaluator").iterdir()) == ["images", "imdb_test.npy"]
    assert sorted(p.name for p in (tiny_dir / "public").iterdir()) == [
        "images",
        "imdb_train.npy",
        "imdb_val.npy",
    ]
    assert not list(tiny_dir.parent.glob(".*partial*"))  # staging directory moved into place


def test_test_split_only_under_evaluator(tiny_dir: Path) -> None:
    assert not list((tiny_dir / "participant").glob("*test*"))
    _, test = read_imdb(tiny_dir / "evaluator" / "imdb_test.npy")
    participant_images = {p.stem for p in (tiny_dir / "participant" / "images").iterdir()}
    test_images = {r["image_name"] for r in test}
    assert test_images and not test_images & participant_images
    assert test_images == {p.stem for p in (tiny_dir / "evaluator" / "images").iterdir()}
    with pytest.raises(FileNotFoundError, match="evaluator"):
        load_split(tiny_dir / "participant", "test")


def test_providers_disjoint_and_in_out(tiny_dir: Path) -> None:
    records = _all_records(tiny_dir)
    clients = [{r["provider"] for r in records[f"client_{k}"]} for k in range(10)]
    assert all(clients) and sum(map(len, clients)) == len(set().union(*clients)) == sum(
        SCALES["tiny"].providers_per_client
    )
    train = set().union(*clients)
    for split in ("val", "test"):
        by_distribution = {
            d: {r["provider"] for r in records[split] if r["distribution"] == d}
            for d in ("in", "out")
        }
        assert by_distribution["in"] and by_distribution["in"] <= train
        assert by_distribution["out"] and not by_distribution["out"] & train
    assert not {r["provider"] for r in records["val"] if r["distribution"] == "out"} & {
        r["provider"] for r in records["test"] if r["distribution"] == "out"
    }
    public = {r["provider"] for name in ("public_train", "public_val") for r in records[name]}
    pfl = {
        r["provider"] for name, rs in records.items() if not name.startswith("public") for r in rs
    }
    assert public and not public & pfl
    pfl_names = {
        r["answers"]
        for name, rs in records.items()
        if not name.startswith("public")
        for r in rs
        if r["question_type"] == "provider_name"
    }
    public_names = {
        r["answers"]
        for name in ("public_train", "public_val")
        for r in records[name]
        if r["question_type"] == "company_name"
    }
    assert pfl_names and public_names and not pfl_names & public_names
    # disjointness holds for the whole plan of the largest scale too (names of every provider)
    full = plan_providers(SCALES["full"], 0)
    assert len({p.company.name for p in full}) == len(full)


def test_answers_are_spans_and_questions_typed(tiny_dir: Path) -> None:
    for name, records in _all_records(tiny_dir).items():
        assert records, name
        for record in records:
            assert isinstance(record["answers"], str)
            assert _spans(record["ocr_tokens"], record["answers"]) >= 1, (
                name,
                record["question"],
                record["answers"],
            )
            assert record["question_type"] and record["document_id"] and record["provider"]
            assert len(record["ocr_tokens"]) == len(record["ocr_normalized_boxes"])
    types = Counter(r["question_type"] for rs in _all_records(tiny_dir).values() for r in rs)
    assert {
        "provider_name",
        "provider_iban",
        "provider_vat_id",
        "invoice_number",
        "total_amount",
    } <= set(types)


def test_data_points_point_at_their_provider(tiny_dir: Path) -> None:
    points = read_data_points(tiny_dir / "participant" / "data_points.json")
    assert sorted(points) == [f"client_{k}" for k in range(10)]
    for client in range(10):
        _, records = read_imdb(tiny_dir / "participant" / f"imdb_train_client_{client}.npy")
        indexes = sorted(i for ix in points[f"client_{client}"].values() for i in ix)
        assert indexes == list(range(1, len(records) + 1))
        for provider, ix in points[f"client_{client}"].items():
            assert {records[i - 1]["provider"] for i in ix} == {provider}


def test_boxes_agree_with_the_rendered_image(tiny_dir: Path) -> None:
    _, records = read_imdb(tiny_dir / "participant" / "imdb_train_client_4.npy")
    checked = 0
    for record in records[::3]:
        image = np.asarray(
            Image.open(tiny_dir / "participant" / "images" / f"{record['image_name']}.jpg").convert(
                "L"
            )
        )
        height, width = image.shape
        assert (width, height) == (600, 848)
        for token, box in zip(record["ocr_tokens"], record["ocr_normalized_boxes"], strict=True):
            x0, y0, x1, y1 = np.round(box * [width, height, width, height]).astype(int)
            assert x1 > x0 and y1 > y0
            assert image[y0 : y1 + 1, x0 : x1 + 1].min() < 170, f"no ink in the box of {token!r}"
            checked += 1
    assert checked > 100


def test_no_ink_outside_the_boxes() -> None:
    page = Page()
    page.text(40, 40, "Invoice No. INV-2023-00042", 12, bold=True)
    page.text(560, 100, "Total 1.234,56 EUR", 11, align="right")
    page.text(300, 300, "jumpy quiz 0123456789 #@%&", 10, align="center")
    image = np.asarray(
        Image.open(__import__("io").BytesIO(encode_jpeg(page.render()))).convert("L")
    )
    inside = np.zeros_like(image, dtype=bool)
    for word in page.words:
        assert (
            image[round(word.y0) : round(word.y1) + 1, round(word.x0) : round(word.x1) + 1].min()
            < 110
        ), word.text
        inside[
            max(0, round(word.y0) - 2) : round(word.y1) + 3,
            max(0, round(word.x0) - 2) : round(word.x1) + 3,
        ] = True
    assert (image[~inside] > 150).all()
    assert page.tokens() == [
        "Invoice",
        "No.",
        "INV-2023-00042",
        "Total",
        "1.234,56",
        "EUR",
        "jumpy",
        "quiz",
        "0123456789",
        "#@%&",
    ]


def test_clients_are_skewed(tiny_dir: Path) -> None:
    mini = plan_providers(SCALES["mini"], 0)
    for client, home in enumerate(CLIENT_LOCALES):
        locales = Counter(p.company.locale for p in mini if p.client == client)
        assert locales.most_common(1)[0][0] == home and locales[home] >= 0.7 * sum(locales.values())
    # the skew shows in the rendered text: client 1's (German) pages carry German labels, client 0's do not
    german = {"Rechnungsnummer", "Rechnung", "Rechnungsdatum", "Datum", "MwSt.", "USt.", "Seite"}
    share = []
    for client in (0, 1):
        _, records = read_imdb(tiny_dir / "participant" / f"imdb_train_client_{client}.npy")
        pages = {r["image_name"]: set(r["ocr_tokens"]) for r in records}
        share.append(sum(bool(tokens & german) for tokens in pages.values()) / len(pages))
    assert share[1] > 0.5 > share[0]


def test_generated_data_loads_through_the_reader(tiny_dir: Path) -> None:
    train = load_split(tiny_dir, "train", client=3)
    assert set(train["client"]) == {3} and all(train["provider"]) and all(train["question_type"])
    assert all(Path(p).is_file() for p in train["image_path"])
    val = load_split(tiny_dir, "val")
    assert set(val["distribution"]) == {"in", "out"} and set(val["client"]) == {-1}
    assert Path(val["image_path"][0]).parent == tiny_dir / "participant" / "images"
    test = load_split(tiny_dir, "test")
    assert Path(test["image_path"][0]).parent == tiny_dir / "evaluator" / "images"
    public = load_split(tiny_dir / "public", "train")
    assert len(public) > 50 and all(public["question_type"])


def test_public_api_streams_the_written_documents(tiny_dir: Path) -> None:
    _, written = read_imdb(tiny_dir / "public" / "imdb_train.npy")
    streamed = list(public_records(0, 3, images=True))
    first = [r for r in written if r["document_id"] in {s["document_id"] for s in streamed}]
    assert [(r["question"], r["answers"], r["question_type"]) for r in first] == [
        (s["question"], s["answers"][0], s["question_type"]) for s in streamed
    ]
    assert streamed[0]["ocr_tokens"] == first[0]["ocr_tokens"]
    assert streamed[0]["image"].size == (600, 848)
    fresh = list(public_records(0, 2, start=10_000))
    assert fresh and fresh[0]["document_id"] == "pubdoc0010000" and "image" not in fresh[0]


def test_public_invoices_are_english_and_ask_the_invoice_questions() -> None:
    from benchmark.data.synthetic.locales import LABELS
    from benchmark.data.synthetic.public import public_document

    english_titles = set(LABELS["en"]["title"])
    other_titles = {title for language, words in LABELS.items() if language != "en"
                    for title in words["title"]} - english_titles
    only_on_invoices = {"invoice_number", "invoice_date", "due_date", "subtotal", "tax_rate",
                        "customer_number", "customer_name", "currency"}
    invoices = [doc for doc in (public_document(0, i) for i in range(600))
                if any(qa.question_type in only_on_invoices
                       or qa.question_type.startswith(("provider_", "line_item_"))
                       for qa in doc.qa)]
    assert 60 <= len(invoices) <= 140  # about one document in six
    for doc in invoices:
        assert doc.provider_id.startswith("pub") and len(doc.pages) == 1
        text = " ".join(doc.pages[0].tokens())
        assert any(title in text for title in english_titles)
        assert not any(f" {title} " in f" {text} " for title in other_titles)


def test_every_record_loads_the_way_the_official_dataset_class_reads_it(tiny_dir: Path) -> None:
    """The starter kit's `PFL_DocVQA.__getitem__` reads these fields, `set_name` eagerly."""
    files = sorted(tiny_dir.glob("*/imdb_*.npy"))
    assert len(files) >= 13
    for path in files:
        data = np.load(path, allow_pickle=True)
        split = path.stem.removeprefix("imdb_").split("_client_")[0]
        for idx, record in enumerate(data[1:]):
            sample = {
                "question_id": record.get("question_id", "{:s}-{:d}".format(record["set_name"], idx)),
                "questions": record["question"],
                "answers": [record["answers"].lower()],
                "words": [word.lower() for word in record["ocr_tokens"]],
                "boxes": np.array([bbox for bbox in record["ocr_normalized_boxes"]]),
                "image": (path.parent / "images" / "{:s}.jpg".format(record["image_name"])),
            }
            assert record["set_name"] == split
            assert sample["image"].is_file() and sample["boxes"].shape == (len(sample["words"]), 4)
