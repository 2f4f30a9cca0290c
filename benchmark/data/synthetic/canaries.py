"""Canary providers for the one-run privacy audit (Steinke, Nasr and Jagielski 2023).

``pflkit data generate --canaries M`` adds M providers drawn exactly like the others (same
identity generator, layout templates, locales and question kinds, and invoice counts drawn
from the same distribution as their client's providers, unless ``--canary-documents D`` fixes
them for a power study). Two kinds of canary (``--canary-kind``):

- ``membership``: a secret fair coin per canary decides whether its invoices join a client's
  training data, among that client's ordinary providers and numbered like them, or are held
  out. The audit guesses the coins.
- ``reconstruction``: every canary joins a client's training data, and its VAT id and IBAN are
  one of ``k`` candidate pairs drawn alike (the secret, uniform over the k). The audit guesses
  which candidate the model learned; a guess is right with chance 1/k when nothing was
  learned, so each right guess weighs more than a membership one (k = 10, 100 canaries: a
  perfect attack bounds epsilon near 9 against 5.7).

The coins (or secrets and candidates) and the probes that the audit asks (identity questions on
every canary's invoices, with the identity removed from the OCR) are written under
``evaluator/`` only: the participant directory holds the included canaries' invoices and
nothing else that tells them apart.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from benchmark.data.imdb import write_bytes
from benchmark.data.synthetic.identities import PFL_TRADES, make_company, unique_names
from benchmark.data.synthetic.invoice import (
    INVOICE_QUESTION_WEIGHTS,
    draw_template,
    render_invoice,
)
from benchmark.data.synthetic.locales import CLIENT_LOCALES, LOCALES, fill_digits
from benchmark.data.synthetic.page import encode_jpeg
from benchmark.data.synthetic.public import document_records
from benchmark.data.synthetic.questions import ask
from benchmark.data.synthetic.scales import draw_document_count

#: the identity fields whose values are the canary's secret (asked by the audit's probes)
SECRET_FIELDS = ("provider_name", "provider_vat_id", "provider_iban")
#: the organisers' file of coins and probe index, and the probes themselves, under evaluator/
COINS_FILE = "canaries.json"
PROBES_FILE = "imdb_canaries.npy"
#: the two audits a canary serves (see the module docstring)
CANARY_KINDS = ("membership", "reconstruction")
#: k, the candidate secrets of a reconstruction canary
DEFAULT_CANDIDATES = 10
#: the identity fields a reconstruction canary's secret sets (question type -> Company field)
RECONSTRUCTION_FIELDS = {"provider_vat_id": "vat_id", "provider_iban": "iban"}


@dataclass(frozen=True)
class CanarySpec:
    """What canaries to add.

    Attributes:
        count: M, the canary providers (0: none).
        kind: one of :data:`CANARY_KINDS`.
        candidates: k, the candidate secrets of a reconstruction canary.
        documents: training invoices of every canary, or None to draw each canary's count like
            its client's ordinary providers' (no tell).
    """

    count: int = 0
    kind: str = "membership"
    candidates: int = DEFAULT_CANDIDATES
    documents: int | None = None

    def __post_init__(self) -> None:
        if self.count < 0:
            raise ValueError(f"the number of canaries must be >= 0, not {self.count}")
        if self.kind not in CANARY_KINDS:
            raise ValueError(f"canary kind must be one of {', '.join(CANARY_KINDS)}, "
                             f"not {self.kind!r}")  # fmt: skip
        if self.kind == "reconstruction" and self.candidates < 2:
            raise ValueError("a reconstruction canary needs at least 2 candidates, "
                             f"not {self.candidates}")  # fmt: skip
        if self.documents is not None and self.documents < 1:
            raise ValueError(f"canary documents must be >= 1, not {self.documents}")

    def summary(self) -> dict[str, Any]:
        """The benchmark.json entry."""
        entry: dict[str, Any] = {"count": self.count}
        entry["documents_each"] = self.documents if self.documents is not None else "drawn"
        if self.kind == "reconstruction":
            entry.update(kind=self.kind, candidates=self.candidates)
        return entry


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
        kind: ``membership`` or ``reconstruction``.
        secrets: per canary, the index of its candidate in ``candidates`` (reconstruction
            only; empty for membership).
        candidates: per canary, the k candidate secrets, each a mapping of question type
            (:data:`RECONSTRUCTION_FIELDS`) to value (reconstruction only).
    """

    providers: list[Any]
    canary_ids: list[int]
    included: list[bool]
    clients: list[int]
    kind: str = "membership"
    secrets: list[int] = field(default_factory=list)
    candidates: list[list[dict[str, str]]] = field(default_factory=list)


def draw_candidates(locale_code: str, count: int, rng: random.Random) -> list[dict[str, str]]:
    """``count`` distinct candidate secrets for a reconstruction canary of that locale: VAT id
    and IBAN drawn by the same patterns as every provider's."""
    locale = LOCALES[locale_code]
    candidates: list[dict[str, str]] = []
    while len(candidates) < count:
        drawn = {"provider_vat_id": fill_digits(locale.vat_pattern, rng),
                 "provider_iban": fill_digits(locale.iban_pattern, rng)}  # fmt: skip
        if all(drawn[key] != c[key] for c in candidates for key in drawn):
            candidates.append(drawn)
    return candidates


@dataclass(frozen=True)
class DrawnCanary:
    """One canary provider as drawn, before it is placed.

    Attributes:
        company: its identity (with the secret's VAT id and IBAN for a reconstruction canary).
        template: its invoice layout.
        included: its coin (always True for a reconstruction canary).
        secret: the index of its candidate (reconstruction), else None.
        candidates: its k candidate secrets (reconstruction), else empty.
    """

    company: Any
    template: Any
    included: bool
    secret: int | None = None
    candidates: list[dict[str, str]] = field(default_factory=list)


def with_secret(company: Any, secret: dict[str, str]) -> Any:
    """The company with its VAT id and IBAN set to a candidate's."""
    return replace(company, **{RECONSTRUCTION_FIELDS[key]: value for key, value in secret.items()})


def draw_canary(
    provider_id: str,
    name_parts: tuple[str, str],
    locale: str,
    spec: CanarySpec,
    stream: str,
    rng: random.Random,
) -> DrawnCanary:
    """Draw one canary of ``spec.kind``: its identity, candidates and template each from a
    generator of its own (``{stream}``, ``{stream}-candidates``, ``{stream}-template`` with the
    canary's index in ``stream``'s last field), then its secret and its coin from ``rng``."""
    head, index = stream.rsplit(":", 1)
    company = make_company(provider_id, name_parts, locale, random.Random(stream))
    secret, options = None, []
    if spec.kind == "reconstruction":
        options = draw_candidates(locale, spec.candidates,
                                  random.Random(f"{head}-candidates:{index}"))  # fmt: skip
        secret = rng.randrange(spec.candidates)
        company = with_secret(company, options[secret])
    template = draw_template(company, random.Random(f"{head}-template:{index}"))
    included = spec.kind == "reconstruction" or rng.random() < 0.5
    return DrawnCanary(company, template, included, secret, options)


def coins_document(kind: str, entries: list[dict[str, Any]], probe_records: int) -> dict[str, Any]:
    """The content of the organisers' coins file: the kind, the probes' file and count, and one
    entry per canary (provider, coin, client, invoices; secret and candidates when
    reconstruction)."""
    return {"note": "organisers only: the coins of the one-run privacy audit", "kind": kind,
            "probes": PROBES_FILE, "probe_records": probe_records, "canaries": entries}  # fmt: skip


def plan_canaries(
    providers: list[Any], spec: CanarySpec, clients: int, seed: int, same_locale: float
) -> CanaryPlan:
    """Draw ``spec.count`` canary providers, flip their coins (or draw their secrets) and place
    them.

    Ordinary providers keep their identities and templates; only their ids are renumbered, in
    the final order, so that the included canaries' ids sit among their client's.

    Args:
        providers: the generator's providers (clients' first, then unseen val and test).
        spec: how many canaries, and which kind.
        clients: K.
        seed: the benchmark seed.
        same_locale: chance that a provider follows its client's home locale.

    Returns:
        The plan.
    """
    provider_type = type(providers[0])
    rng = random.Random(f"{seed}:canaries")
    taken = {" ".join(p.company.name.split()[:2]) for p in providers}
    names = unique_names(spec.count, PFL_TRADES, rng, taken)
    canaries, drawn, homes = [], [], []
    for index, parts in enumerate(names):
        client = rng.randrange(clients)
        home = CLIENT_LOCALES[client % len(CLIENT_LOCALES)]
        locale = home if rng.random() < same_locale else rng.choice(CLIENT_LOCALES)
        canary = draw_canary("", parts, locale, spec, f"{seed}:canary:{index}", rng)
        canaries.append(provider_type(canary.company, canary.template,
                                      client if canary.included else -1,
                                      "" if canary.included else "canary"))  # fmt: skip
        drawn.append(canary)
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
        included=[canary.included for canary in drawn],
        clients=homes,
        kind=spec.kind,
        secrets=[canary.secret for canary in drawn if canary.secret is not None],
        candidates=[canary.candidates for canary in drawn if canary.candidates],
    )


def canary_document_counts(
    plan: CanaryPlan, means: tuple[float, ...], seed: int, fixed: int | None
) -> dict[str, int]:
    """Invoices per canary provider id: ``fixed`` for every canary when given (a power study's
    knob, and a tell: no ordinary provider count is fixed), else drawn from the distribution
    of the canary's home client's ordinary providers
    (:func:`~benchmark.data.synthetic.scales.draw_document_count`), with a generator of its own
    so the ordinary providers' counts do not move."""
    rng = random.Random(f"{seed}:canary-documents")
    counts = {}
    for index, client in zip(plan.canary_ids, plan.clients, strict=True):
        provider_id = plan.providers[index].company.provider_id
        if fixed is not None:
            counts[provider_id] = fixed
            continue
        counts[provider_id] = draw_document_count(means[client], rng)
    return counts


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
