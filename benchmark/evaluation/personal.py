"""Track-3 scoring: each client's personalised model on its personal questions, and the global model.

For a split's :class:`~benchmark.data.personal.PersonalSplits`, the global model answers every
question once (personal splits and unseen providers); then each client's personalisation is
applied in place (:func:`benchmark.model.personalisation.personalised`), the client's personal
questions are answered, and the global weights are restored. A client with an empty
personalisation reuses the global answers. The cost is one pass over the split plus one over
the personal questions of the personalised clients, with one model in memory.

Figures (:class:`PersonalisedResult`): per-client personalised and global ANLS, the mean
personalised ANLS weighted by questions (track 3's ranking figure), its standard deviation across
clients and the worst client, the global model's ANLS on all personal questions and on the
unseen providers.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from benchmark.data.personal import PersonalSplits
from benchmark.evaluation.loop import DEFAULT_BATCH_SIZE, predict
from benchmark.metrics import corpus_scores
from benchmark.model.personalisation import personalised

#: client -> its replacement tensors (``Personalisations.load``, or a dict's ``__getitem__``).
LoadPersonalisation = Callable[[int], Mapping[str, torch.Tensor]]


@dataclass(frozen=True)
class ClientScore:
    """One client's figures.

    Attributes:
        client: the client id.
        n: personal questions.
        personal_anls: its personalised model's mean ANLS on them (``None`` when n is 0).
        global_anls: the global model's mean ANLS on them (``None`` when n is 0).
        personalised: whether the client's personalisation changed any tensor.
    """

    client: int
    n: int
    personal_anls: float | None
    global_anls: float | None
    personalised: bool


@dataclass(frozen=True)
class PersonalisedResult:
    """Track-3 scores of a global model and its personalisations on one split.

    Attributes:
        clients: one score per client, by client id.
        personal_anls: mean personalised ANLS over all personal questions (weighted by
            questions): the track-3 ranking figure.
        personal_anls_std: standard deviation across clients of the per-client personalised
            ANLS (population; clients without personal questions are left out, here and in the
            worst client).
        worst_client: the client with the lowest personalised ANLS.
        worst_anls: its personalised ANLS.
        global_personal_anls: the global model's mean ANLS over all personal questions.
        unseen_anls: the global model's mean ANLS on the unseen providers' questions
            (``None`` without any).
        n: personal questions.
        unseen_n: unseen-provider questions.
        seconds: wall time of prediction.
    """

    clients: tuple[ClientScore, ...]
    personal_anls: float
    personal_anls_std: float
    worst_client: int
    worst_anls: float
    global_personal_anls: float
    unseen_anls: float | None
    n: int
    unseen_n: int
    seconds: float = 0.0

    def summary(self) -> dict[str, Any]:
        """JSON-ready figures, per-client scores included."""
        data = asdict(self)
        data["clients"] = [asdict(score) for score in self.clients]
        data["seconds"] = round(self.seconds, 3)
        return data


def evaluate_personalised(
    model: Any,
    processor: Any,
    dataset: Any,
    splits: PersonalSplits,
    load_personalisation: LoadPersonalisation,
    *,
    batch_size: int = DEFAULT_BATCH_SIZE,
    cache_dir: str | Path | None = None,
    progress: bool = True,
    precision: str = "fp32",
    max_new_tokens: int | None = None,
    global_scores: Mapping[int, float] | None = None,
) -> PersonalisedResult:
    """Score a global model and its per-client personalisations on a split.

    Args:
        model: the global `VT5ForConditionalGeneration` (left bit-identical afterwards).
        processor: its `VT5Processor`.
        dataset: the split (`load_split` columns); every question id of `splits` must be in it.
        splits: the split's personal splits (`benchmark.data.personal_splits`).
        load_personalisation: client -> replacement tensors by checkpoint name (empty: the
            global model); called once per client.
        batch_size: most questions per batch.
        cache_dir: where the tokenised split is cached.
        progress: show progress bars.
        precision: "fp32", or "bf16" for autocast.
        max_new_tokens: bound on answer tokens (default: the model's).
        global_scores: question id -> the global model's ANLS, when a pass over the split was
            already made (the scoring service's `evaluate`); the global pass is then skipped.

    Returns:
        The figures.

    Raises:
        ValueError: when a question id of `splits` is not in the dataset, or appears twice.
        benchmark.model.personalisation.PersonalisationError: for a tensor the model lacks.
    """
    start = time.perf_counter()
    encoded = processor.encode_dataset(dataset, cache_dir=cache_dir, progress=progress)
    index = question_rows(encoded)
    rows = {client: _rows(index, qids) for client, qids in splits.clients.items()}
    personal_rows = [row for client_rows in rows.values() for row in client_rows]
    unseen_rows = _rows(index, splits.unseen)
    answers = [list(a) for a in encoded["answers"]]

    def scores(indices: list[int]) -> np.ndarray:
        if not indices:
            return np.zeros(0)
        predictions = predict(model, processor, encoded.select(indices), batch_size=batch_size,
                              max_new_tokens=max_new_tokens, progress=progress,
                              precision=precision)
        return corpus_scores(predictions, [answers[i] for i in indices])[0]

    every = personal_rows + unseen_rows
    if global_scores is None:
        global_anls = dict(zip(every, scores(every), strict=True))
    else:
        row_of = {row: qid for qid, row in index.items()}
        global_anls = {row: float(global_scores[row_of[row]]) for row in every}
    clients = []
    personal_sum = 0.0
    for client, client_rows in rows.items():
        tensors = load_personalisation(client)
        if tensors:
            with personalised(model, tensors):
                personal = scores(client_rows)
        else:
            personal = np.array([global_anls[row] for row in client_rows])
        personal_sum += float(personal.sum())
        clients.append(ClientScore(client, len(client_rows), _mean(personal),
                                   _mean([global_anls[row] for row in client_rows]),
                                   bool(tensors)))
    scored = [c for c in clients if c.n > 0]
    if not scored:
        raise ValueError(f"no personal question in the {splits.split} split")
    worst = min(scored, key=lambda c: (c.personal_anls, c.client))
    return PersonalisedResult(
        clients=tuple(clients),
        personal_anls=personal_sum / len(personal_rows),
        personal_anls_std=float(np.std([c.personal_anls for c in scored])),
        worst_client=worst.client,
        worst_anls=worst.personal_anls,
        global_personal_anls=_mean([global_anls[row] for row in personal_rows]),
        unseen_anls=_mean([global_anls[row] for row in unseen_rows]),
        n=len(personal_rows),
        unseen_n=len(unseen_rows),
        seconds=time.perf_counter() - start,
    )


def question_rows(dataset: Any) -> dict[int, int]:
    """Question id -> dataset row.

    Raises:
        ValueError: for a question id that appears twice.
    """
    index: dict[int, int] = {}
    for row, qid in enumerate(dataset["question_id"]):
        if qid in index:
            raise ValueError(f"question id {qid} appears twice in the split")
        index[qid] = row
    return index


def _rows(index: dict[int, int], question_ids: list[int]) -> list[int]:
    """Dataset rows of some question ids, in the given order."""
    missing = [qid for qid in question_ids if qid not in index]
    if missing:
        raise ValueError(
            f"{len(missing)} question id(s) of the personal splits are not in the dataset "
            f"(first: {missing[:5]}); score the split the personal splits were made from"
        )
    return [index[qid] for qid in question_ids]


def _mean(values) -> float | None:
    """Mean of a sequence (``None`` when empty)."""
    values = np.asarray(values, dtype=np.float64)
    return float(values.mean()) if len(values) else None
