"""Canary providers added to any benchmark in the PFL-DocVQA layout, the real one included
(``pflkit data add-canaries SRC --out DST --canaries M``).

The copy holds everything of SRC (images hard-linked where the file system allows) plus M
synthetic canary providers, drawn and audited as :mod:`benchmark.data.synthetic.canaries`
describes: an included canary's invoices join its client's ``imdb_train_client_{k}.npy`` as one
block at a random place among the records, with a new provider id in ``data_points.json``;
the coins (or secrets and candidates) and the audit's probes go to ``DST/evaluator/`` only.

Nothing a participant reads tells a canary from a host provider, as far as the host's own files
show it: a canary's invoice count is drawn from its client's providers' counts, its page
images take the pixel size of a random host page, its records carry exactly the host's fields
(a field the generator does not make is copied only when it is constant in the host, such as
``set_name``), its provider and document ids follow the host's pattern at random unused places
(numbered ids within the host's range, hexadecimal ids of the host's length), its page names
the host's page suffix, and when the host numbers questions densely in file order (the kit's
generator does) the copy's training questions are numbered again in file order, every later
question id moved up by the number added. What the canaries' invoices look like is the
generator's, not the host's: on the real data the audit's canaries are synthetic invoices
among real ones, which a participant could learn to tell apart; the audit's guarantee does not
need them hidden (the coins are secret either way), only its power would drop if a participant
excluded them.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmark.data.errors import DataError
from benchmark.data.imdb import (
    read_data_points,
    read_imdb,
    write_bytes,
    write_data_points,
    write_imdb,
)
from benchmark.data.reader import DATA_POINTS
from benchmark.data.synthetic.canaries import (
    COINS_FILE,
    PROBES_FILE,
    CanarySpec,
    canary_probes,
    coins_document,
    draw_canary,
)

#: the invoices' shape (items, pages, questions per page) is the ``mini`` scale's
INVOICE_SCALE = "mini"
#: host pages whose size is sampled for the canaries' pages
SIZE_SAMPLE = 64
_NUMBERED = re.compile(r"^(\D*)(\d+)$")
_HEX = re.compile(r"^[0-9a-f]+$")
_PAGE_SUFFIX = re.compile(r"^(?P<document>.+?)(?P<suffix>_p?)(?P<page>\d+)$")


@dataclass
class HostClient:
    """One client's training file of the host benchmark."""

    path: Path
    header: dict[str, Any]
    records: list[dict[str, Any]]
    providers: dict[str, list[int]]


def add_canaries(
    src: str | Path, dst: str | Path, spec: CanarySpec, *, seed: int = 0, progress: bool = True
) -> dict[str, Any]:
    """Copy SRC to DST with ``spec.count`` canary providers added (see the module docstring).

    Args:
        src: a data directory in the PFL-DocVQA layout (the real release, flat, or a directory
            written by ``pflkit data generate``).
        dst: the directory to write (must not exist or be empty); written atomically.
        spec: how many canaries, which kind, and their invoice count (None: drawn).
        seed: seeds every draw (the same SRC and seed give the same DST).
        progress: show a progress bar.

    Returns:
        A summary: canaries, included, records added, probes.

    Raises:
        DataError: SRC is not such a directory, already has canaries, or names its providers,
            documents or pages in a way the copy cannot follow; DST is not empty.
    """
    src, dst = Path(src).resolve(), Path(dst).resolve()
    if spec.count < 1:
        raise DataError("add-canaries needs --canaries M with M >= 1.")
    if (src / "evaluator" / COINS_FILE).exists():
        raise DataError(f"{src} already has canaries ({src / 'evaluator' / COINS_FILE}).")
    if dst.exists() and any(dst.iterdir()):
        raise DataError(f"{dst} exists and is not empty; choose another --out.")
    train_dir = _training_directory(src)
    staging = dst.parent / f".{dst.name}.partial-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        shutil.copytree(src, staging, copy_function=_link_or_copy)
        summary = _add_into(staging, staging / train_dir.relative_to(src), spec, seed, progress)
        if dst.exists():
            dst.rmdir()
        os.replace(staging, dst)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return summary


def _link_or_copy(source: str, target: str) -> None:
    """Hard-link a file into the copy (images are never written again), else copy it."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def _training_directory(root: Path) -> Path:
    """The directory of ``imdb_train_client_0.npy``: ROOT (the real release) or
    ROOT/participant (the generator's)."""
    for directory in (root, root / "participant"):
        if (directory / "imdb_train_client_0.npy").is_file():
            return directory
    raise DataError(
        f"{root} holds no imdb_train_client_0.npy (nor its participant/ directory): point "
        "add-canaries at a PFL-DocVQA data directory."
    )


def _read_clients(train_dir: Path, files: dict[Path, tuple[dict, list[dict]]]) -> list[HostClient]:
    """Every client's training file (from ``files``, the copy's imdb files as read) and its
    data points."""
    points = read_data_points(train_dir / DATA_POINTS)
    clients = []
    while (path := train_dir / f"imdb_train_client_{len(clients)}.npy") in files:
        header, records = files[path]
        providers = points.get(f"client_{len(clients)}", {})
        clients.append(HostClient(path, header, records, providers))
    return clients


def document_of(record: dict[str, Any]) -> str:
    """A record's document: its ``document_id``, else its page name without the page number."""
    if record.get("document_id"):
        return str(record["document_id"])
    match = _PAGE_SUFFIX.match(str(record["image_name"]))
    return match["document"] if match else str(record["image_name"])


def fresh_ids(
    existing: list[str], count: int, rng: random.Random, taken: set[str] | None = None
) -> list[str]:
    """``count`` ids like ``existing`` and unlike any of them or of ``taken``: numbered ids
    (one prefix, one width) at random unused numbers in the existing range (beyond everything
    taken when the range is full), or random hexadecimal ids of the existing length.

    Raises:
        DataError: the ids follow neither pattern.
    """
    used = set(existing) | (taken or set())
    numbered = [_NUMBERED.match(i) for i in existing]
    if existing and all(numbered) and len({(m[1], len(m[2])) for m in numbered}) == 1:
        prefix, width = numbered[0][1], len(numbered[0][2])
        numbers = [int(m[2]) for m in numbered]
        low, high = min(numbers), max(numbers)
        free = [n for n in range(low, high + 1) if f"{prefix}{n:0{width}d}" not in used]
        chosen = rng.sample(free, min(count, len(free)))
        beyond = high + 1
        while len(chosen) < count:
            if f"{prefix}{beyond:0{width}d}" not in used:
                chosen.append(beyond)
            beyond += 1
        return [f"{prefix}{n:0{width}d}" for n in chosen]
    if existing and all(_HEX.match(i) for i in existing) and len(set(map(len, existing))) == 1:
        length, taken, result = len(existing[0]), used, []
        while len(result) < count:
            drawn = "".join(rng.choice("0123456789abcdef") for _ in range(length))
            if drawn not in taken:
                taken.add(drawn)
                result.append(drawn)
        return result
    raise DataError(
        f"cannot make ids like {existing[:3]}: add-canaries follows numbered ids (one prefix "
        "and width) or hexadecimal ids of one length."
    )


def _page_namer(records: list[dict[str, Any]]) -> Callable[[str, int], str]:
    """The host's page names: ``{document}{suffix}{page}`` with its suffix (``_p`` or ``_``)
    and page numbering (from 0 or 1)."""
    suffixes, first_pages = set(), set()
    for record in records[:2000]:
        match = _PAGE_SUFFIX.match(str(record["image_name"]))
        if not match or match["document"] != document_of(record):
            raise DataError(
                f"page name {record['image_name']!r} is not '<document>_p<page>' or "
                "'<document>_<page>': add-canaries cannot name the canaries' pages like it."
            )
        suffixes.add(match["suffix"])
        first_pages.add(int(match["page"]))
    suffix, start = sorted(suffixes)[0], min(first_pages)
    return lambda document, index: f"{document}{suffix}{index + start}"


def _filled_fields(records: list[dict[str, Any]], generated: set[str]) -> dict[str, Any]:
    """Host fields the generator does not make, with the value every host record has.

    Raises:
        DataError: a field whose value differs between host records.
    """
    fields: dict[str, Any] = {}
    for key in set().union(*(r.keys() for r in records)) - generated:
        values = {json.dumps(r.get(key), default=str, sort_keys=True) for r in records}
        if len(values) != 1:
            raise DataError(
                f"the host's records have a field {key!r} whose values vary: add-canaries "
                "cannot fill it for the canaries' records."
            )
        fields[key] = records[0].get(key)
    return fields


def _host_sizes(records: list[dict[str, Any]], images: Path, rng: random.Random) -> list[tuple]:
    """Pixel sizes of up to :data:`SIZE_SAMPLE` random host pages."""
    from PIL import Image

    names = sorted({r["image_name"] for r in records})
    sizes = []
    for name in rng.sample(names, min(SIZE_SAMPLE, len(names))):
        path = images / f"{name}.jpg"
        if path.is_file():
            with Image.open(path) as image:
                sizes.append(image.size)
    if not sizes:
        raise DataError(f"no page image of the host's training records is in {images}.")
    return sizes


def _add_into(
    root: Path, train_dir: Path, spec: CanarySpec, seed: int, progress: bool
) -> dict[str, Any]:
    """Add the canaries inside the staging copy."""
    from tqdm import tqdm

    from benchmark.data.synthetic.identities import PFL_TRADES, unique_names

    rng = random.Random(f"{seed}:add-canaries")
    files = {path: read_imdb(path) for path in sorted(root.rglob("imdb_*.npy"))}
    clients = _read_clients(train_dir, files)
    host = [r for client in clients for r in client.records]
    images = train_dir / "images" if (train_dir / "images").is_dir() else root / "images"
    context = _HostContext(
        sizes=_host_sizes(host, images, rng),
        name_page=_page_namer(host),
        training_documents=sorted({document_of(r) for r in host}),
        documents={document_of(r) for _, records in files.values() for r in records},
        counts=[_documents_per_provider(client) for client in clients],
        images=images,
        organisers=root / "evaluator",
    )
    (context.organisers / "images").mkdir(parents=True, exist_ok=True)
    training_providers = sorted({p for c in clients for p in c.providers})
    every_provider = set(training_providers) | {
        str(r["provider"]) for _, records in files.values() for r in records if "provider" in r
    }
    provider_ids = fresh_ids(training_providers, spec.count, rng, every_provider)
    names = unique_names(spec.count, PFL_TRADES, rng, set())
    entries, blocks, probes = [], {k: [] for k in range(len(clients))}, []
    for index in tqdm(range(spec.count), desc="canaries", disable=not progress):
        entry, block, canary_probes_ = _make_canary(
            index, provider_ids[index], names[index], len(clients), spec, seed, rng, context
        )
        entries.append(entry)
        probes += canary_probes_
        if entry["included"]:
            blocks[entry["client"]].append((entry["provider"], block))
    rows = _merged_rows(clients, blocks, host, rng)
    mapping = _dense_renumbering(training_providers, rows, every_provider | set(provider_ids))
    added = sum(len(block) for client in blocks.values() for _, block in client)
    _number_questions(clients, rows, added, files, rng)
    _write(clients, rows, files, mapping, train_dir)
    for number, probe in enumerate(probes):
        probe["question_id"] = number
        probe["provider"] = mapping.get(probe["provider"], probe["provider"])
    for entry in entries:
        entry["provider"] = mapping.get(entry["provider"], entry["provider"])
    write_imdb(context.organisers / PROBES_FILE, {"dataset_name": "canaries",
               "dataset_type": "canary", "has_answer": True}, probes)  # fmt: skip
    coins = coins_document(spec.kind, entries, len(probes))
    (context.organisers / COINS_FILE).write_text(json.dumps(coins, indent=1) + "\n")
    return {"canaries": spec.count, "included": sum(e["included"] for e in entries),
            "records_added": added, "probes": len(probes), "kind": spec.kind}  # fmt: skip


@dataclass
class _HostContext:
    """What a canary copies from the host: page sizes and names, document ids, invoice counts,
    and where pages go."""

    sizes: list[tuple]
    name_page: Callable[[str, int], str]
    training_documents: list[str]
    documents: set[str]
    counts: list[list[int]]
    images: Path
    organisers: Path


def _make_canary(
    index: int,
    provider_id: str,
    name_parts: tuple[str, str],
    clients: int,
    spec: CanarySpec,
    seed: int,
    rng: random.Random,
    context: _HostContext,
) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """Draw one canary, render its invoices (training pages when included, the organisers'
    probes always) and return its coins entry, training records and probes."""
    from benchmark.data.synthetic.benchmark import InvoiceJob, Provider
    from benchmark.data.synthetic.locales import CLIENT_LOCALES
    from benchmark.data.synthetic.scales import SCALES

    client = rng.randrange(clients)
    locale = rng.choice(CLIENT_LOCALES)
    canary = draw_canary(provider_id, name_parts, locale, spec, f"{seed}:add-canary:{index}", rng)
    entry: dict[str, Any] = {"provider": provider_id}
    if canary.secret is not None:
        entry.update(secret=canary.secret, candidates=canary.candidates)
    count = spec.documents or rng.choice(context.counts[client])
    ids = fresh_ids(context.training_documents, count, rng, context.documents)
    context.documents.update(ids)
    provider = Provider(canary.company, canary.template, client if canary.included else -1,
                        "" if canary.included else "canary")  # fmt: skip
    block, probes = [], []
    for document in ids:
        job = InvoiceJob(seed, provider, document, "train" if canary.included else "canary", "",
                         str(context.images), SCALES[INVOICE_SCALE])  # fmt: skip
        size = rng.choice(context.sizes)
        if canary.included:
            block += _training_records(job, size, context.name_page)
        probes += canary_probes(job, str(context.organisers / "images"), f"{seed}:canary-probes")
        _resize_pages(context.organisers / "images", document, size)
    entry.update(included=canary.included, client=client if canary.included else None,
                 documents=ids)  # fmt: skip
    return entry, block, probes


def _documents_per_provider(client: HostClient) -> list[int]:
    """Each of the client's providers' document count (what a canary's count is drawn from)."""
    counts = [len({document_of(client.records[i - 1]) for i in indexes})
              for indexes in client.providers.values()]  # fmt: skip
    if not counts:
        raise DataError(f"{client.path}: its client has no provider in {DATA_POINTS}.")
    return counts


def _training_records(job: Any, size: tuple, name_page: Callable[[str, int], str]) -> list[dict]:
    """Render a canary invoice as the generator renders training invoices, its pages at the
    host page's ``size`` and named like the host's; its records (no question id yet)."""
    from benchmark.data.synthetic.benchmark import render_invoice_job

    records = render_invoice_job(job)
    images = Path(job.images_dir)
    renamed = {}
    for record in records:
        kit_name = record["image_name"]
        if kit_name not in renamed:
            renamed[kit_name] = name_page(job.document_id, int(kit_name.rsplit("_p", 1)[1]) - 1)
            _resize(images / f"{kit_name}.jpg", size, images / f"{renamed[kit_name]}.jpg")
        record["image_name"] = renamed[kit_name]
    return records


def _resize(source: Path, size: tuple, target: Path) -> None:
    """Write ``source`` at ``size`` as ``target`` (removing ``source`` when they differ)."""
    from PIL import Image

    from benchmark.data.synthetic.page import encode_jpeg

    with Image.open(source) as image:
        resized = image.convert("RGB").resize(size)
    write_bytes(target, encode_jpeg(resized))
    if source != target:
        source.unlink()


def _resize_pages(images: Path, document: str, size: tuple) -> None:
    """The organisers' copies of a canary invoice's pages, at the size its training pages have."""
    for path in images.glob(f"{document}_p*.jpg"):
        _resize(path, size, path)


def _merged_rows(
    clients: list[HostClient],
    blocks: dict[int, list[tuple[str, list[dict]]]],
    host: list[dict[str, Any]],
    rng: random.Random,
) -> list[list[tuple[str | None, dict]]]:
    """Per client, (provider, record) in the copy's order: each canary's block at a random
    place among the host's records, its records shaped like the host's (the host's fields
    only, constant host fields filled)."""
    generated = {key for client in blocks.values() for _, block in client for r in block
                 for key in r}  # fmt: skip
    fill = _filled_fields(host, generated | {"question_id"}) if generated else {}
    fields = set().union(*(r.keys() for r in host))
    merged = []
    for k, client in enumerate(clients):
        owner = {i - 1: p for p, indexes in client.providers.items() for i in indexes}
        rows: list[tuple[str | None, dict]] = [(owner.get(i), r)
                                               for i, r in enumerate(client.records)]  # fmt: skip
        for provider, block in blocks[k]:
            place = rng.randint(0, len(rows))
            shaped = [{key: value for key, value in {**fill, **r}.items() if key in fields}
                      for r in block]  # fmt: skip
            rows[place:place] = [(provider, r) for r in shaped]
        merged.append(rows)
    return merged


def _dense_renumbering(
    training: list[str], rows: list[list[tuple[str | None, dict]]], every: set[str]
) -> dict[str, str]:
    """When the host numbers its providers densely in file order (``p00000``, ``p00001``, ...:
    the kit's generator), the copy's providers numbered again in file order (the canaries among
    them), the others after them in their own order; otherwise no renumbering."""
    matches = [_NUMBERED.match(p) for p in training]
    if not training or not all(matches) or len({(m[1], len(m[2])) for m in matches}) != 1:
        return {}
    prefix, width = matches[0][1], len(matches[0][2])
    order = list(dict.fromkeys(p for client in rows for p, _ in client if p is not None))
    host_order = [p for p in order if p in set(training)]
    if host_order != [f"{prefix}{n:0{width}d}" for n in range(len(host_order))]:
        return {}
    rest = sorted(every - set(order))
    return {old: f"{prefix}{n:0{width}d}" for n, old in enumerate(order + rest)}


def _number_questions(
    clients: list[HostClient],
    rows: list[list[tuple[str | None, dict]]],
    added: int,
    files: dict[Path, tuple[dict, list[dict]]],
    rng: random.Random,
) -> None:
    """Give the canaries' records question ids: when the host numbers its training questions
    densely in file order, number the copy's training questions again in file order and move
    every later id of the other files up by ``added``; otherwise unused ids in the host's
    range."""
    host_ids = [r.get("question_id") for c in clients for r in c.records]
    if not host_ids or not all(isinstance(i, int) for i in host_ids):
        return
    records = [r for client in rows for _, r in client]
    if host_ids == list(range(host_ids[0], host_ids[0] + len(host_ids))):
        for number, record in enumerate(records, start=host_ids[0]):
            record["question_id"] = number
        training = {c.path for c in clients}
        for path, (_, others) in files.items():
            if path not in training:
                for record in others:
                    if (
                        isinstance(record.get("question_id"), int)
                        and record["question_id"] > host_ids[-1]
                    ):
                        record["question_id"] += added
        return
    new = [r for r in records if "question_id" not in r]
    width = len(str(max(host_ids)))
    chosen = fresh_ids([f"q{i:0{width}d}" for i in host_ids], len(new), rng)
    for record, value in zip(new, chosen, strict=True):
        record["question_id"] = int(value[1:])


def _write(
    clients: list[HostClient],
    rows: list[list[tuple[str | None, dict]]],
    files: dict[Path, tuple[dict, list[dict]]],
    mapping: dict[str, str],
    train_dir: Path,
) -> None:
    """Write every imdb file of the copy (training files merged, providers renamed by
    ``mapping``) and ``data_points.json``."""
    points: dict[str, dict[str, list[int]]] = {}
    for k, (client, client_rows) in enumerate(zip(clients, rows, strict=True)):
        points[f"client_{k}"] = {}
        for position, (provider, _) in enumerate(client_rows, start=1):
            if provider is not None:
                points[f"client_{k}"].setdefault(mapping.get(provider, provider), []).append(
                    position
                )
        files[client.path] = (client.header, [r for _, r in client_rows])
    for path, (header, records) in files.items():
        for record in records:
            if "provider" in record:
                record["provider"] = mapping.get(record["provider"], record["provider"])
        write_imdb(path, header, records)
    write_data_points(train_dir / DATA_POINTS, points)
