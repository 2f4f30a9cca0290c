"""Statistics of a data directory: providers, documents, pages and QA per client and split."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmark.data.errors import DataFileNotFoundError
from benchmark.data.imdb import read_imdb
from benchmark.data.personal import client_of_provider
from benchmark.data.reader import count_clients, find_split, provider_rows


def _count(records: list[dict[str, Any]], providers: set[str] | None = None) -> dict[str, int]:
    """Providers, documents, pages and QA of a list of records."""
    if providers is None:
        providers = {str(r["provider"]) for r in records if r.get("provider")}
    pages = {str(r["image_name"]) for r in records}
    documents = {str(r["document_id"]) for r in records if r.get("document_id")} or pages
    return {
        "providers": len(providers),
        "documents": len(documents),
        "pages": len(pages),
        "qa": len(records),
    }


def dataset_stats(data_dir: str | Path) -> dict[str, dict[str, int]]:
    """Per-row statistics: `client_k` for each client, `val`/`val_in`/`val_out`, `test...`, `public_...`.

    `val_in_client_k` and `test_in_client_k` are client k's personal splits (track 3, see
    `benchmark.data.personal`). Rows whose file is absent (e.g. test for participants) are left
    out. Documents fall back to pages when records have no `document_id` (the real release).
    """
    rows: dict[str, dict[str, int]] = {}
    data_dir = Path(data_dir)
    for client in range(count_clients(data_dir)):
        _, records = read_imdb(find_split(data_dir, "train", client))
        rows[f"client_{client}"] = _count(records, set(provider_rows(data_dir, client)))
    clients = [row for name, row in rows.items() if name.startswith("client_")]
    rows["train_total"] = {
        key: sum(row[key] for row in clients) for key in ("providers", "documents", "pages", "qa")
    }
    owner = client_of_provider(data_dir)
    for split in ("val", "test"):
        try:
            _, records = read_imdb(find_split(data_dir, split))
        except DataFileNotFoundError:
            continue
        rows[split] = _count(records)
        for distribution in ("in", "out"):
            part = [r for r in records if r.get("distribution") == distribution]
            if part:
                rows[f"{split}_{distribution}"] = _count(part)
            if distribution == "in":
                rows.update(_personal_rows(split, records, owner, len(clients)))
    for split in ("train", "val"):
        path = data_dir / "public" / f"imdb_{split}.npy"
        if path.is_file():
            rows[f"public_{split}"] = _count(read_imdb(path)[1])
    return rows


def _personal_rows(
    split: str, records: list[dict[str, Any]], owner: dict[str, int], clients: int
) -> dict[str, dict[str, int]]:
    """`{split}_in_client_k`: the records of client k's providers (its personal split)."""
    by_client: dict[int, list[dict[str, Any]]] = {client: [] for client in range(clients)}
    for record in records:
        client = owner.get(str(record.get("provider") or ""))
        if client is not None:
            by_client[client].append(record)
    if not any(by_client.values()):
        return {}
    return {f"{split}_in_client_{client}": _count(part) for client, part in by_client.items()}


def _label(name: str) -> str:
    """Row label: `train client 3`, `test in client 3`, `val out`, ..."""
    if name.startswith("client_"):
        return name.replace("client_", "train client ")
    return name.replace("_client_", " client ").replace("_", " ")


def stats_table(rows: dict[str, dict[str, int]]):
    """A rich table of `dataset_stats` rows."""
    from rich.table import Table

    table = Table(title="PFL-DocVQA data")
    for column in ("split", "providers", "documents", "pages", "QA"):
        table.add_column(column, justify="left" if column == "split" else "right")
    for name, row in rows.items():
        table.add_row(
            _label(name),
            *(f"{row[k]:,}" for k in ("providers", "documents", "pages", "qa")),
            end_section=name in ("train_total",) or name.endswith("_out"),
        )
    return table
