"""Sizes of the generated benchmark: `tiny` (tests), `mini` (demo), `dp` (track 2 at the
competition's federation size, on a 2-core machine) and `full` (the real sizes)."""

from __future__ import annotations

import random
from dataclasses import dataclass


def draw_document_count(mean: float, rng: random.Random) -> int:
    """Invoices of one training provider whose client averages ``mean``: one plus an
    exponential draw of mean ``mean - 1``, capped at four times the mean."""
    draw = round(rng.expovariate(1 / (mean - 1))) if mean > 1 else 0
    return 1 + min(draw, int(4 * mean))


@dataclass(frozen=True)
class Scale:
    """How much data `generate_benchmark` writes.

    Attributes:
        name: scale name.
        providers_per_client: number of providers of each client (K = its length).
        documents_per_provider: mean number of training invoices per provider, per client.
        val_in_documents / test_in_documents: invoices of seen providers in val / test.
        val_out_providers / test_out_providers: unseen providers in val / test.
        out_documents_per_provider: invoices of each unseen provider.
        questions_per_page: inclusive range of questions drawn per invoice page.
        items: inclusive range of line items of an ordinary invoice.
        long_probability / long_items: chance and item range of a long (multi-page) invoice.
        public_documents: documents of the public corpus (train + val).
        public_val_fraction: share of them in the public validation split.
    """

    name: str
    providers_per_client: tuple[int, ...]
    documents_per_provider: tuple[float, ...]
    val_in_documents: int
    val_out_providers: int
    test_in_documents: int
    test_out_providers: int
    out_documents_per_provider: int
    questions_per_page: tuple[int, int]
    items: tuple[int, int]
    long_probability: float
    long_items: tuple[int, int]
    public_documents: int
    public_val_fraction: float = 0.1

    @property
    def clients(self) -> int:
        """Number of federated clients."""
        return len(self.providers_per_client)


SCALES: dict[str, Scale] = {
    "tiny": Scale(
        name="tiny",
        providers_per_client=(2, 3, 2, 3, 3, 2, 2, 3, 2, 2),
        documents_per_provider=(2, 2, 2, 2, 3, 2, 2, 2, 2, 2),
        val_in_documents=6,
        val_out_providers=2,
        test_in_documents=6,
        test_out_providers=3,
        out_documents_per_provider=2,
        questions_per_page=(3, 5),
        items=(1, 5),
        long_probability=0.1,
        long_items=(20, 30),
        public_documents=30,
    ),
    "mini": Scale(
        name="mini",
        providers_per_client=(14, 16, 13, 15, 18, 15, 16, 14, 12, 15),
        documents_per_provider=(3.5, 3.5, 4, 3.5, 6, 3.5, 4, 3, 3, 3.5),
        val_in_documents=50,
        val_out_providers=12,
        test_in_documents=80,
        test_out_providers=20,
        out_documents_per_provider=3,
        questions_per_page=(5, 8),
        items=(1, 9),
        long_probability=0.12,
        long_items=(16, 34),
        public_documents=3000,
    ),
    # Track 2 at the competition's federation size: the real providers per client (400-429), so
    # m = 50 sampled providers is 1/8 of a client as in the competition, but about 1.5 invoices
    # per provider (the real data: 4.7-10.6) and few long invoices: seed 0 writes 6,330
    # training invoices (33,163 questions, 8 per provider: one local step of batch 16 for 95%
    # of providers), 1,581 val and 2,355 test questions (2.5x mini's) and a public
    # corpus of 1,000 documents, in 98 s on 2 loaded cores (docs/participants/dp-scale.md).
    "dp": Scale(
        name="dp",
        providers_per_client=(400, 418, 404, 414, 429, 423, 423, 416, 401, 421),
        documents_per_provider=(1.5, 1.5, 1.5, 1.5, 2.5, 1.5, 1.6, 1.4, 1.4, 1.5),
        val_in_documents=200,
        val_out_providers=50,
        test_in_documents=300,
        test_out_providers=80,
        out_documents_per_provider=2,
        questions_per_page=(4, 6),
        items=(1, 9),
        long_probability=0.05,
        long_items=(16, 34),
        public_documents=1000,
    ),
    # Real per-client sizes (providers, documents) of PFL-DocVQA; val/test sized like the release.
    "full": Scale(
        name="full",
        providers_per_client=(400, 418, 404, 414, 429, 423, 423, 416, 401, 421),
        documents_per_provider=(5.56, 5.70, 5.68, 5.70, 10.59, 5.62, 6.38, 4.69, 4.82, 5.07),
        val_in_documents=2000,
        val_out_providers=300,
        test_in_documents=2800,
        test_out_providers=500,
        out_documents_per_provider=4,
        questions_per_page=(3, 7),
        items=(1, 14),
        long_probability=0.45,
        long_items=(16, 60),
        public_documents=50000,
    ),
}
