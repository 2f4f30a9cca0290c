"""The clients' unlabeled documents: the pages of their own training questions.

A client's training file (``imdb_train_client_{k}.npy``) holds one record per question, each with
its page's OCR tokens, boxes and image; a page with several questions recurs. Federated
self-pretraining reads only the page, never the question or answer, once per page: a client's
unlabeled data is its distinct pages (by image), in the order they first occur.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from datasets import Dataset

#: columns of a page row.
PAGE_COLUMNS = ("ocr_tokens", "ocr_boxes", "image_path")


def distinct_pages(questions: Dataset) -> Dataset:
    """One row per page of a client's questions, without questions and answers.

    Args:
        questions: the client's training split (``benchmark.data.load_split`` columns).

    Returns:
        Columns ``ocr_tokens``, ``ocr_boxes``, ``image_path`` and ``n_words`` (for batching by
        length), one row per distinct ``image_path``.
    """
    first: dict[str, int] = {}
    for index, image in enumerate(questions["image_path"]):
        first.setdefault(image, index)
    pages = questions.select(sorted(first.values())).select_columns(list(PAGE_COLUMNS))
    return pages.add_column("n_words", [len(words) for words in pages["ocr_tokens"]])
