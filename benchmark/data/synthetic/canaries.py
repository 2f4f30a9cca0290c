"""Canary providers for the one-run privacy audit (Steinke, Nasr and Jagielski 2023).

``pflkit data generate --canaries M`` adds M providers drawn exactly like the others (same
identity generator, layout templates, locales and question kinds), each with a fixed number of
invoices. A secret fair coin per canary decides whether its invoices join a client's training
data, among that client's ordinary providers and numbered like them, or are held out. The
coins and the probes that the audit asks (identity questions on every canary's invoices, with
the identity removed from the OCR) are written under ``evaluator/`` only: the participant
directory holds the included canaries' invoices and nothing else that tells them apart.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from benchmark.data.imdb import write_bytes
from benchmark.data.synthetic.identities import PFL_TRADES, make_company, unique_names
from benchmark.data.synthetic.invoice import (
    INVOICE_QUESTION_WEIGHTS,
    draw_template,
    render_invoice,
)
from benchmark.data.synthetic.locales import CLIENT_LOCALES
from benchmark.data.synthetic.page import encode_jpeg
from benchmark.data.synthetic.public import document_records
from benchmark.data.synthetic.questions import ask

#: the identity fields whose values are the canary's secret (asked by the audit's probes)
SECRET_FIELDS = ("provider_name", "provider_vat_id", "provider_iban")
#: the organisers' file of coins and probe index, and the probes themselves, under evaluator/
COINS_FILE = "canaries.json"
PROBES_FILE = "imdb_canaries.npy"
DEFAULT_CANARY_DOCUMENTS = 3


@dataclass(frozen=True)
class CanaryPlan:
    """Where every canary went.

    Attributes:
        providers: every provider (the generator's ``Provider``) in the order ids are given:
            each client's providers with its included canaries at random places, then the
            unseen val and test providers, then the held-out canaries (client -1, out_split
            ``"canary"``).
        canary_ids: the canaries' positions in ``providers``, in canary order.
        included: the coin of each canary (True: in a client's training data).
        clients: the client each canary was assigned to (before the coin).
    """

    providers: list[Any]
    canary_ids: list[int]
    included: list[bool]
    clients: list[int]


def plan_canaries(
    providers: list[Any], count: int, clients: int, seed: int, same_locale: float
) -> CanaryPlan:
    """Draw ``count`` canary providers, flip their coins and place them.

    Ordinary providers keep their identities and templates; only their ids are renumbered, in
    the final order, so that the included canaries' ids sit among their client's.

    Args:
        providers: the generator's providers (clients' first, then unseen val and test).
        count: M, the number of canaries.
        clients: K.
        seed: the benchmark seed.
        same_locale: chance that a provider follows its client's home locale.

    Returns:
        The plan.
    """
    provider_type = type(providers[0])
    rng = random.Random(f"{seed}:canaries")
    taken = {" ".join(p.company.name.split()[:2]) for p in providers}
    names = unique_names(count, PFL_TRADES, rng, taken)
    canaries, coins, homes = [], [], []
    for index, parts in enumerate(names):
        client = rng.randrange(clients)
        home = CLIENT_LOCALES[client % len(CLIENT_LOCALES)]
        locale = home if rng.random() < same_locale else rng.choice(CLIENT_LOCALES)
        company = make_company("", parts, locale, random.Random(f"{seed}:canary:{index}"))
        template = draw_template(company, random.Random(f"{seed}:canary-template:{index}"))
        included = rng.random() < 0.5
        canaries.append(provider_type(company, template, client if included else -1,
                                      "" if included else "canary"))  # fmt: skip
        coins.append(included)
        homes.append(client)
    by_client: dict[int, list[Any]] = {k: [p for p in providers if p.client == k]
                                       for k in range(clients)}  # fmt: skip
    for canary in canaries:
        if canary.client >= 0:
            members = by_client[canary.client]
            members.insert(rng.randint(0, len(members)), canary)
    ordered = [p for k in range(clients) for p in by_client[k]]
    ordered += [p for p in providers if p.client < 0]
    ordered += [c for c in canaries if c.client < 0]
    numbered = [
        replace(p, company=replace(p.company, provider_id=f"p{i:05d}"))
        for i, p in enumerate(ordered)
    ]
    position = {id(p): i for i, p in enumerate(ordered)}
    return CanaryPlan(
        providers=numbered,
        canary_ids=[position[id(c)] for c in canaries],
        included=coins,
        clients=homes,
    )


def secret_words(company: Any) -> set[str]:
    """Lower-case words of the canary's secrets; OCR tokens holding one are removed from the
    probes (the e-mail and website hold the name's stem, so they go too)."""
    words = set()
    for value in (company.name, company.vat_id, company.iban):
        words.update(w.lower() for w in value.split() if len(w) >= 2)
    return words


def _holds_secret(token: str, words: set[str], stem: str) -> bool:
    lowered = token.lower()
    bare = re.sub(r"[^\w]", "", lowered)
    return lowered in words or bare in words or stem in lowered


def canary_probes(job: Any, evaluator_images: str, probe_seed: str) -> list[dict[str, Any]]:
    """Render one canary invoice again (the same bytes as its training copy, if any), write its
    pages to the organisers' images and return the audit's probes on it.

    Two kinds (the record's ``probe`` field): ``secret``, an identity question (name, VAT id or
    IBAN) on a page that prints that value, with every OCR token holding any of the three
    secrets removed, the secret as answer; and ``question``, the invoice's own questions as
    drawn for training (for an included canary, its training records exactly).

    Args:
        job: the invoice's ``InvoiceJob``.
        evaluator_images: the organisers' images directory.
        probe_seed: seeds the choice of paraphrase.

    Returns:
        Probe records (imdb record fields, plus ``provider``, ``document_id``,
        ``question_type``), without question ids.
    """
    provider = job.provider
    company = provider.company
    scale = job.scale
    rng = random.Random(f"{job.seed}:document:{job.document_id}")
    doc = render_invoice(company, provider.template, job.document_id, rng, scale.items,
                         scale.long_probability, scale.long_items)  # fmt: skip
    words = secret_words(company)
    stem = company.name.split()[0].lower()
    ask_rng = random.Random(f"{probe_seed}:{job.document_id}")
    probes = []
    for page_index, page in enumerate(doc.pages):
        name = f"{job.document_id}_p{page_index + 1}"
        write_bytes(Path(evaluator_images) / f"{name}.jpg", encode_jpeg(page.render()))
        printed = {
            key: value for key, value, _, where in doc.values
            if where == page_index and key in SECRET_FIELDS
        }  # fmt: skip
        if not printed:
            continue
        tokens = page.tokens()
        boxes = page.boxes()
        keep = [i for i, token in enumerate(tokens) if not _holds_secret(token, words, stem)]
        for key in SECRET_FIELDS:
            if key not in printed:
                continue
            probes.append({
                "question": ask(key, ask_rng),
                "answers": printed[key],
                "ocr_tokens": [tokens[i] for i in keep],
                "ocr_normalized_boxes": boxes[keep],
                "image_name": name,
                "provider": company.provider_id,
                "document_id": job.document_id,
                "question_type": key,
                "probe": "secret",
            })  # fmt: skip
    doc.draw_questions(rng, scale.questions_per_page, INVOICE_QUESTION_WEIGHTS)
    for record in document_records(doc):
        record["answers"] = record["answers"][0]
        record["probe"] = "question"
        probes.append(record)
    return probes
