"""Track-3 personalisations: per-client replacement tensors for the global checkpoint.

A track-3 submission is the global checkpoint plus a directory ``personal/`` with one file per
client, ``client_{k}.safetensors`` for k = 0..K-1. Each file holds replacement values for any
subset of the global checkpoint's tensors, under the names, shapes and dtypes of its
``model.safetensors``; a file without tensors (or of zero bytes) means that client uses the
global model. Files are checked like checkpoints
(:mod:`benchmark.model.checkpoint_validation`: header bounds, offsets, never unpickled, NaN and
infinity refused), plus a per-file and a total size limit, and the directory must hold exactly
the K files.

Scoring applies one client's personalisation to the one global model in place and restores it
afterwards (:func:`personalised`), so memory holds one model and one personalisation at a time.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from benchmark.data.imdb import write_bytes
from benchmark.model.checkpoint import disk_state_dict
from benchmark.model.checkpoint_validation import validate_safetensors_file
from benchmark.model.safetensors_header import (
    MAX_HEADER_BYTES,
    CheckpointError,
    TensorSpec,
    spec_data_bytes,
)
from benchmark.submission_contract import PERSONAL_DIR, PERSONAL_FILE, personal_file_name

if TYPE_CHECKING:  # torch is imported on use: the scoring service's upload route checks
    import torch  # personalisations without loading it


class PersonalisationError(CheckpointError):
    """A personalisation file or directory that cannot be used, with what is wrong and where."""


def max_personal_file_bytes(spec: TensorSpec) -> int:
    """The default per-file limit: a personalisation replacing every tensor, with its header."""
    return 8 + MAX_HEADER_BYTES + spec_data_bytes(spec)


@dataclass(frozen=True)
class Personalisations:
    """A checked ``personal/`` directory; tensors are read one client at a time.

    Attributes:
        directory: the directory.
        names: client k -> the checkpoint tensors its file replaces (empty: the global model).
        sizes: client k -> file size in bytes.
    """

    directory: Path
    names: dict[int, tuple[str, ...]]
    sizes: dict[int, int]

    @property
    def clients(self) -> int:
        """K."""
        return len(self.names)

    @property
    def total_bytes(self) -> int:
        """Bytes of all files."""
        return sum(self.sizes.values())

    def is_empty(self, client: int) -> bool:
        """Whether client k uses the global model unchanged."""
        return not self.names[client]

    def load(self, client: int) -> dict[str, torch.Tensor]:
        """Client k's replacement tensors (``{}`` for an empty personalisation).

        Raises:
            KeyError: for a client outside 0..K-1.
        """
        if client not in self.names:
            raise KeyError(f"client {client} is not in 0..{self.clients - 1}")
        if self.is_empty(client):
            return {}
        from safetensors.torch import load_file

        return load_file(self.directory / personal_file_name(client))


def read_personalisations(
    directory: str | Path,
    spec: TensorSpec,
    clients: int,
    *,
    max_file_bytes: int | None = None,
    max_total_bytes: int | None = None,
    check_values: bool = True,
) -> Personalisations:
    """Check a ``personal/`` directory against the global checkpoint's tensors and K.

    Args:
        directory: holds ``client_{k}.safetensors`` for k = 0..K-1 and nothing else.
        spec: the global checkpoint's ``{name: (shape, dtype)}`` (``expected_tensor_spec``).
        clients: K, the benchmark's number of clients.
        max_file_bytes: largest accepted file (default: :func:`max_personal_file_bytes`).
        max_total_bytes: largest accepted sum of the files (default: K times the file limit).
        check_values: also read every tensor and refuse NaN or infinite values.

    Returns:
        The checked personalisations (tensors are loaded later, one client at a time).

    Raises:
        PersonalisationError: naming the file and what is wrong: a missing, extra or
            out-of-range client file, anything else in the directory, an oversized file or
            directory, an unknown tensor name, a wrong shape or dtype, NaN or infinity, or a file
            that is not safetensors.
    """
    directory = Path(directory)
    if directory.is_symlink() or not directory.is_dir():
        raise PersonalisationError(
            f"{directory}: not a directory; a track-3 submission has {PERSONAL_DIR}/ with "
            f"client_0.safetensors .. client_{clients - 1}.safetensors"
        )
    per_file = max_personal_file_bytes(spec) if max_file_bytes is None else max_file_bytes
    total_limit = clients * per_file if max_total_bytes is None else max_total_bytes
    files = _client_files(directory, clients)
    sizes = {client: path.stat().st_size for client, path in files.items()}
    for client, size in sizes.items():
        if size > per_file:
            raise PersonalisationError(
                f"{files[client]}: {size} bytes exceed the limit of {per_file} bytes per file"
            )
    if sum(sizes.values()) > total_limit:
        raise PersonalisationError(
            f"{directory}: {sum(sizes.values())} bytes in all exceed the limit of {total_limit}"
        )
    names: dict[int, tuple[str, ...]] = {}
    for client in range(clients):
        path = files[client]
        if sizes[client] == 0:
            names[client] = ()
            continue
        try:
            header = validate_safetensors_file(path, spec, check_values=check_values, subset=True)
            names[client] = tuple(sorted(header.tensors))
        except PersonalisationError:
            raise
        except CheckpointError as error:
            raise PersonalisationError(str(error)) from None
    return Personalisations(directory=directory, names=names, sizes=sizes)


def _client_files(directory: Path, clients: int) -> dict[int, Path]:
    """client -> its file; anything else in the directory, or a missing client, is an error."""
    files: dict[int, Path] = {}
    for path in sorted(directory.iterdir()):
        match = PERSONAL_FILE.match(path.name)
        if match is None:
            raise PersonalisationError(
                f"{path}: unexpected entry; {PERSONAL_DIR}/ holds only client_{{k}}.safetensors "
                f"files for k = 0..{clients - 1}"
            )
        client = int(match.group(1))
        if client >= clients:
            raise PersonalisationError(
                f"{path}: client {client} is out of range; the benchmark has clients "
                f"0..{clients - 1}"
            )
        if path.is_symlink() or not path.is_file():
            raise PersonalisationError(f"{path}: not a regular file")
        files[client] = path
    missing = [client for client in range(clients) if client not in files]
    if missing:
        raise PersonalisationError(
            f"{directory}: no file for client(s) {missing}; write one per client (an empty "
            "personalisation, a file without tensors, means the global model)"
        )
    return files


@contextmanager
def personalised(
    model: torch.nn.Module, tensors: Mapping[str, torch.Tensor]
) -> Iterator[torch.nn.Module]:
    """The model with a personalisation applied in place; restored exactly on exit.

    Args:
        model: the global VT5 model (names as in its checkpoint file, ``disk_state_dict``).
        tensors: replacement values by checkpoint tensor name.

    Yields:
        The same model object, personalised.

    Raises:
        PersonalisationError: for an unknown name or a wrong shape (before anything changes).
    """
    import torch

    live = disk_state_dict(model)
    for name, value in tensors.items():
        if name not in live:
            raise PersonalisationError(f"tensor {name!r} is not a tensor of the global model")
        if tuple(value.shape) != tuple(live[name].shape):
            raise PersonalisationError(
                f"tensor {name!r} has shape {list(value.shape)}, the global model's has "
                f"{list(live[name].shape)}"
            )
    saved = {name: live[name].detach().clone() for name in tensors}
    try:
        with torch.no_grad():
            for name, value in tensors.items():
                live[name].copy_(value)
        yield model
    finally:
        with torch.no_grad():
            for name, value in saved.items():
                live[name].copy_(value)


def personalisation_delta(
    global_tensors: Mapping[str, torch.Tensor], personal_tensors: Mapping[str, torch.Tensor]
) -> dict[str, torch.Tensor]:
    """The tensors of a personal model that differ from the global model's (bit for bit).

    Args:
        global_tensors: the global model's ``disk_state_dict``.
        personal_tensors: the personal model's ``disk_state_dict`` (same names).

    Returns:
        Name -> the personal value, for the differing tensors only (contiguous CPU copies).

    Raises:
        PersonalisationError: when the two do not have the same tensors and shapes.
    """
    import torch

    if global_tensors.keys() != personal_tensors.keys():
        odd = sorted(set(global_tensors) ^ set(personal_tensors))
        raise PersonalisationError(f"the personal model's tensors differ in names: {odd[:5]}")
    delta = {}
    for name, personal in personal_tensors.items():
        reference = global_tensors[name]
        if personal.shape != reference.shape or personal.dtype != reference.dtype:
            raise PersonalisationError(
                f"tensor {name!r}: shape or dtype differs from the global one"
            )
        if not torch.equal(personal.cpu(), reference.cpu()):
            delta[name] = personal.detach().cpu().contiguous().clone()
    return delta


def write_personalisations(
    directory: str | Path,
    personal: Mapping[int, Mapping[str, torch.Tensor]]
    | Callable[[int], Mapping[str, torch.Tensor]],
    clients: int,
) -> Path:
    """Write ``client_{k}.safetensors`` for k = 0..K-1 into a directory, atomically.

    The files go to a staging directory next to the target, which then replaces it: the
    directory is complete or absent. A client missing from a mapping gets an empty file (the
    global model); a function is called once per client, in order, so one client's tensors are
    in memory at a time.

    Args:
        directory: the target (``RUN_DIR/personal``).
        personal: client -> replacement tensors by checkpoint name (a mapping or a function).
        clients: K.

    Returns:
        The directory.

    Raises:
        ValueError: for a client outside 0..K-1.
    """
    from safetensors.torch import save

    tensors_of = _tensors_of(personal, clients)
    directory = Path(directory)
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", dir=directory.parent))
    try:
        for client in range(clients):
            tensors = {n: t.contiguous() for n, t in tensors_of(client).items()}
            write_bytes(staging / personal_file_name(client), save(tensors))
        old = directory.with_name(f".{directory.name}.old-{os.getpid()}")
        if directory.exists():
            os.replace(directory, old)
        os.replace(staging, directory)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return directory


def _tensors_of(
    personal: Mapping[int, Mapping[str, torch.Tensor]]
    | Callable[[int], Mapping[str, torch.Tensor]],
    clients: int,
) -> Callable[[int], Mapping[str, torch.Tensor]]:
    """client -> tensors, from a mapping (checked against 0..K-1) or a function."""
    if not isinstance(personal, Mapping):
        return personal
    outside = sorted(set(personal) - set(range(clients)))
    if outside:
        raise ValueError(f"client(s) {outside} are not in 0..{clients - 1}")
    return lambda client: personal.get(client, {})
