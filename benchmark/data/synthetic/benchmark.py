"""Generate a synthetic mini-PFL-DocVQA benchmark directory (see docs/design.md for the layout).

Plan (in the main process, from the seed): provider identities and layout templates, the clients
they belong to, and one job per document. Jobs are rendered in worker processes; every random
choice of a document comes from a generator seeded by (seed, document id), so the output does not
depend on the number of workers. Everything is written into a staging directory next to the target
and moved into place at the end, so an interrupted run leaves nothing half-written behind.
"""

from __future__ import annotations

import functools
import json
import os
import pickle
import random
import shutil
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmark.data.errors import DataError
from benchmark.data.imdb import write_bytes, write_data_points, write_imdb
from benchmark.data.synthetic.canaries import (
    COINS_FILE,
    DEFAULT_CANDIDATES,
    PROBES_FILE,
    CanaryPlan,
    CanarySpec,
    canary_document_counts,
    canary_probes,
    coins_document,
    plan_canaries,
)
from benchmark.data.synthetic.identities import PFL_TRADES, Company, make_company, unique_names
from benchmark.data.synthetic.invoice import (
    INVOICE_QUESTION_WEIGHTS,
    InvoiceTemplate,
    draw_template,
    render_invoice,
)
from benchmark.data.synthetic.locales import CLIENT_LOCALES
from benchmark.data.synthetic.page import encode_jpeg
from benchmark.data.synthetic.public import document_records, public_document
from benchmark.data.synthetic.scales import SCALES, Scale, draw_document_count
from benchmark.provenance import kit_version
from benchmark.shipped import BASE_MODEL_DIR
from benchmark.threshold import measured_threshold

SAME_LOCALE_PROBABILITY = 0.85


@dataclass(frozen=True)
class Provider:
    """A PFL provider: identity, layout template and where its documents go."""

    company: Company
    template: InvoiceTemplate
    client: int  # -1 for providers unseen in training
    out_split: str  # "" for training providers, "val" or "test" for unseen ones, "canary"


@dataclass(frozen=True)
class InvoiceJob:
    """One invoice to render."""

    seed: int
    provider: Provider
    document_id: str
    split: str  # "train", "val", "test" or "canary" (a held-out canary's, organisers only)
    distribution: str  # "in", "out" or "" (train)
    images_dir: str
    scale: Scale


@dataclass(frozen=True)
class PublicJob:
    """One public-corpus document to render."""

    seed: int
    index: int
    split: str
    images_dir: str
    questions_per_page: tuple[int, int]


def plan_providers(scale: Scale, seed: int) -> list[Provider]:
    """All PFL providers: clients' providers in client order, then unseen val and test providers."""
    rng = random.Random(f"{seed}:plan-providers")
    taken: set[str] = set()
    slots: list[tuple[int, str, str]] = []
    for client, count in enumerate(scale.providers_per_client):
        home = CLIENT_LOCALES[client % len(CLIENT_LOCALES)]
        for _ in range(count):
            locale = home if rng.random() < SAME_LOCALE_PROBABILITY else rng.choice(CLIENT_LOCALES)
            slots.append((client, "", locale))
    for split, count in (("val", scale.val_out_providers), ("test", scale.test_out_providers)):
        slots += [(-1, split, rng.choice(CLIENT_LOCALES)) for _ in range(count)]
    names = unique_names(len(slots), PFL_TRADES, rng, taken)
    providers = []
    for index, ((client, out_split, locale), parts) in enumerate(zip(slots, names, strict=True)):
        company = make_company(
            f"p{index:05d}", parts, locale, random.Random(f"{seed}:provider:{index}")
        )
        template = draw_template(company, random.Random(f"{seed}:template:{index}"))
        providers.append(Provider(company, template, client, out_split))
    return providers


def plan_invoices(
    scale: Scale,
    seed: int,
    providers: list[Provider],
    root: Path,
    fixed_counts: dict[str, int] | None = None,
) -> list[InvoiceJob]:
    """One job per invoice, in the order records are written (clients, val, test), then the
    held-out canaries' invoices.

    Args:
        fixed_counts: invoices per provider id for the canaries (drawn without the plan's
            random generator, so an ordinary provider's count depends only on its place).
    """
    fixed_counts = fixed_counts or {}
    rng = random.Random(f"{seed}:plan-documents")
    participant_images = str(root / "participant" / "images")
    evaluator_images = str(root / "evaluator" / "images")
    counter = 0

    def job(provider: Provider, split: str, distribution: str) -> InvoiceJob:
        nonlocal counter
        counter += 1
        images = evaluator_images if split in ("test", "canary") else participant_images
        return InvoiceJob(seed, provider, f"doc{counter:06d}", split, distribution, images, scale)

    jobs: list[InvoiceJob] = []
    training = [p for p in providers if p.client >= 0]
    for provider in training:
        count = fixed_counts.get(provider.company.provider_id)
        if count is None:
            count = draw_document_count(scale.documents_per_provider[provider.client], rng)
        jobs += [job(provider, "train", "") for _ in range(count)]
    for split, in_count in (("val", scale.val_in_documents), ("test", scale.test_in_documents)):
        jobs += [job(rng.choice(training), split, "in") for _ in range(in_count)]
        for provider in (p for p in providers if p.out_split == split):
            jobs += [job(provider, split, "out") for _ in range(scale.out_documents_per_provider)]
    for provider in (p for p in providers if p.out_split == "canary"):
        count = fixed_counts[provider.company.provider_id]
        jobs += [job(provider, "canary", "") for _ in range(count)]
    return jobs


def render_invoice_job(job: InvoiceJob) -> list[dict[str, Any]]:
    """Render one invoice, write its page images and return its records (no question ids yet)."""
    provider = job.provider
    rng = random.Random(f"{job.seed}:document:{job.document_id}")
    scale = job.scale
    doc = render_invoice(
        provider.company,
        provider.template,
        job.document_id,
        rng,
        scale.items,
        scale.long_probability,
        scale.long_items,
    )
    doc.draw_questions(rng, scale.questions_per_page, INVOICE_QUESTION_WEIGHTS)
    records = _write_pages(doc, job.images_dir)
    for record in records:
        if job.split != "train":
            record["distribution"] = job.distribution
    return records


def render_public_job(job: PublicJob) -> list[dict[str, Any]]:
    """Render one public document, write its page image and return its records."""
    return _write_pages(
        public_document(job.seed, job.index, job.questions_per_page), job.images_dir
    )


def _write_pages(doc, images_dir: str) -> list[dict[str, Any]]:
    """Write the images of the pages that have questions; records with `answers` as one string."""
    records = list(document_records(doc))
    for page_index in sorted({qa.page for qa in doc.qa}):
        name = f"{doc.document_id}_p{page_index + 1}"
        write_bytes(Path(images_dir) / f"{name}.jpg", encode_jpeg(doc.pages[page_index].render()))
    for record in records:
        record["answers"] = record["answers"][0]  # the competition release stores one string
    return records


def generate_benchmark(
    out: str | Path,
    scale: str | Scale = "mini",
    seed: int = 0,
    *,
    public_documents: int | None = None,
    workers: int | None = None,
    overwrite: bool = False,
    progress: bool = True,
    canaries: int = 0,
    canary_documents: int | None = None,
    canary_kind: str = "membership",
    canary_candidates: int = DEFAULT_CANDIDATES,
) -> dict[str, Any]:
    """Write a synthetic benchmark directory: participant/, evaluator/, public/ and benchmark.json.

    Args:
        out: target directory (must not exist or be empty, unless `overwrite`).
        scale: "tiny", "mini", "dp", "full" or a `Scale`.
        seed: random seed; the same seed (and kit version) gives the same bytes.
        public_documents: size of the public corpus (default: the scale's).
        workers: rendering processes (default: up to 4, at most the CPU count); 1 renders inline.
        overwrite: replace an existing non-empty `out`.
        progress: show progress bars.
        canaries: M canary providers for the privacy audit (0: none, and the bytes are those
            of a benchmark generated without the option); see
            :mod:`benchmark.data.synthetic.canaries`.
        canary_documents: training invoices of each canary, or None (the default) to draw each
            canary's count like its client's ordinary providers'.
        canary_kind: ``membership`` or ``reconstruction``.
        canary_candidates: k, the candidate secrets of a reconstruction canary.

    Returns:
        The content of benchmark.json.

    Raises:
        DataError: when `out` exists and is not empty (and `overwrite` is False).
        ValueError: for an unknown scale or a negative corpus size.
    """
    if isinstance(scale, str):
        if scale not in SCALES:
            raise ValueError(f"unknown scale {scale!r}; choose one of {', '.join(SCALES)}.")
        scale = SCALES[scale]
    n_public = scale.public_documents if public_documents is None else public_documents
    if n_public < 0:
        raise ValueError("public_documents must be >= 0.")
    spec = CanarySpec(canaries, canary_kind, canary_candidates, canary_documents)
    out = Path(out).resolve()
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise DataError(f"{out} exists and is not empty; choose another --out or pass --overwrite.")
    staging = out.parent / f".{out.name}.partial-{os.getpid()}"
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir(parents=True)
    try:
        summary = _generate_into(staging, scale, seed, n_public, workers, progress, spec)
        if out.exists():
            shutil.rmtree(out)
        os.replace(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return summary


def _generate_into(
    root: Path,
    scale: Scale,
    seed: int,
    n_public: int,
    workers: int | None,
    progress: bool,
    canaries: CanarySpec | None = None,
) -> dict[str, Any]:
    """Generate everything under `root` (the staging directory)."""
    for sub in ("participant/images", "evaluator/images", "public/images"):
        (root / sub).mkdir(parents=True)
    providers = plan_providers(scale, seed)
    plan = None
    fixed_counts: dict[str, int] = {}
    if canaries is not None and canaries.count:
        plan = plan_canaries(providers, canaries, scale.clients, seed, SAME_LOCALE_PROBABILITY)
        providers = plan.providers
        fixed_counts = canary_document_counts(plan, scale.documents_per_provider, seed,
                                              canaries.documents)  # fmt: skip
    all_jobs = plan_invoices(scale, seed, providers, root, fixed_counts)
    invoice_jobs = [job for job in all_jobs if job.split != "canary"]
    n_public_val = round(n_public * scale.public_val_fraction)
    public_jobs = [
        PublicJob(
            seed,
            index,
            "val" if index >= n_public - n_public_val else "train",
            str(root / "public" / "images"),
            (3, 6),
        )
        for index in range(n_public)
    ]
    workers = workers or min(4, os.cpu_count() or 1)
    invoice_records = list(_run(render_invoice_job, invoice_jobs, workers, progress, "invoices"))
    canary_jobs = [
        job for job in all_jobs
        if job.provider.company.provider_id in fixed_counts and job.split in ("train", "canary")
    ]  # fmt: skip
    probe_records = []
    if canary_jobs:
        probe = functools.partial(canary_probes, evaluator_images=str(root / "evaluator" / "images"),
                                  probe_seed=f"{seed}:canary-probes")  # fmt: skip
        probe_records = list(_run(probe, canary_jobs, workers, progress, "canary probes"))
    public_records = list(
        _run(render_public_job, public_jobs, workers, progress, "public documents")
    )

    version = kit_version()
    question_id = 0
    counts: dict[str, Any] = {}

    def header(split: str, **extra: Any) -> dict[str, Any]:
        return {
            "dataset_name": f"synthetic-pfl-docvqa-{scale.name}",
            "dataset_type": split,
            "has_answer": True,
            "version": version,
            "seed": seed,
            **extra,
        }

    def numbered(split: str, records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        """Records with their question id and `set_name` (the official loader reads both)."""
        nonlocal question_id
        result = []
        for record in records:
            result.append({"question_id": question_id, "set_name": split, **record})
            question_id += 1
        return result

    data_points: dict[str, dict[str, list[int]]] = {}
    for client in range(scale.clients):
        records = numbered(
            "train",
            (
                r
                for job, rs in zip(invoice_jobs, invoice_records, strict=True)
                if job.split == "train" and job.provider.client == client
                for r in rs
            ),
        )
        write_imdb(
            root / "participant" / f"imdb_train_client_{client}.npy",
            header("train", client=client),
            records,
        )
        providers_of: dict[str, list[int]] = {}
        for index, record in enumerate(records, start=1):
            providers_of.setdefault(record["provider"], []).append(index)
        data_points[f"client_{client}"] = providers_of
        counts[f"train_client_{client}"] = len(records)
    write_data_points(root / "participant" / "data_points.json", data_points)
    for split, directory in (("val", "participant"), ("test", "evaluator")):
        records = numbered(
            split,
            (
                r
                for job, rs in zip(invoice_jobs, invoice_records, strict=True)
                if job.split == split
                for r in rs
            ),
        )
        write_imdb(root / directory / f"imdb_{split}.npy", header(split), records)
        counts[split] = len(records)
    for split in ("train", "val"):
        records = numbered(
            split,
            (
                r
                for job, rs in zip(public_jobs, public_records, strict=True)
                if job.split == split
                for r in rs
            ),
        )
        write_imdb(root / "public" / f"imdb_{split}.npy", header(split, corpus="public"), records)
        counts[f"public_{split}"] = len(records)
    canary_summary = {}
    if plan is not None:
        probes = numbered("canary", (r for rs in probe_records for r in rs))
        write_imdb(root / "evaluator" / PROBES_FILE, header("canary", corpus="canaries"), probes)
        _write_coins(root / "evaluator" / COINS_FILE, plan, canary_jobs, len(probes))
        counts["canary_probes"] = len(probes)
        canary_summary = {"canaries": canaries.summary()}
    summary = {
        "kit_version": version,
        "scale": scale.name,
        "seed": seed,
        "clients": scale.clients,
        "public_documents": n_public,
        "providers": {
            "train": sum(1 for p in providers if p.client >= 0),
            "val_out": scale.val_out_providers,
            "test_out": scale.test_out_providers,
        },
        "questions": counts,
        **canary_summary,
        # the embedded threshold was measured on the benchmark without canaries
        **((not canary_summary and measured_threshold(scale.name, seed, BASE_MODEL_DIR)) or {}),
    }
    (root / "benchmark.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def _write_coins(path: Path, plan: CanaryPlan, jobs: list[InvoiceJob], probes: int) -> None:
    """The organisers' record of the canaries: provider, coin, client, invoices."""
    documents: dict[str, list[str]] = {}
    for job in jobs:
        documents.setdefault(job.provider.company.provider_id, []).append(job.document_id)
    entries = []
    for number, (index, included, client) in enumerate(
        zip(plan.canary_ids, plan.included, plan.clients, strict=True)
    ):
        provider = plan.providers[index].company.provider_id
        entry = {"provider": provider, "included": included,
                 "client": client if included else None, "documents": documents[provider]}  # fmt: skip
        if plan.kind == "reconstruction":
            entry["secret"] = plan.secrets[number]
            entry["candidates"] = plan.candidates[number]
        entries.append(entry)
    path.write_text(json.dumps(coins_document(plan.kind, entries, probes), indent=1) + "\n")


def _run(
    function, jobs: list, workers: int, progress: bool, label: str
) -> Iterator[list[dict[str, Any]]]:
    """Apply `function` to every job, in order, in `workers` processes, with a progress bar."""
    from tqdm import tqdm

    bar = tqdm(total=len(jobs), desc=label, unit="doc", disable=not progress)
    if workers <= 1 or len(jobs) < 8:
        for job in jobs:
            # The same pickle round trip a worker's result makes: objects shared inside the records
            # (and so the pickled bytes written later) do not depend on the number of workers.
            yield pickle.loads(pickle.dumps(function(job)))
            bar.update()
    else:
        import multiprocessing

        with multiprocessing.get_context("fork").Pool(workers) as pool:
            for result in pool.imap(function, jobs, chunksize=1):
                yield result
                bar.update()
    bar.close()
