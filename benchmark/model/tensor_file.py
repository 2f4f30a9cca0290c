"""The tensors of a safetensors file, read one at a time with plain file reads.

``safetensors.safe_open`` maps the whole file into memory: every page a tensor read touches stays
resident, and counts in the process's memory, until the file is closed. Reading a real-size
checkpoint through (the finite-values check, the evaluator's comparison of a submission with the
reference) then holds the whole file, and comparing two files holds both: the worker's binding
and noise-floor checks peaked at 2.4-2.5 times a VT5-base checkpoint's 1,282 MiB
(``docs/results/memory.md``). :class:`TensorFile` reads each tensor's bytes into memory of its
own, freed with the tensor, so a pass over a file holds one tensor at a time (the same checks:
0.6 and 1.2 times). The bytes are the file's: a tensor equals ``safe_open``'s bit for bit.

The header is parsed and checked by :func:`benchmark.model.safetensors_header.read_safetensors_header`
(offsets within the file, no overlap), so no tensor is read from outside its range. The model
itself is still loaded by ``from_pretrained``, which maps the file and hands the mapped tensors
to the model without a copy (``benchmark.model.loading``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, BinaryIO

from benchmark.model.safetensors_header import (
    SafetensorsError,
    SafetensorsHeader,
    read_safetensors_header,
)

if TYPE_CHECKING:
    import torch

#: safetensors dtype name -> the name of the torch dtype.
TORCH_DTYPE_NAMES = {
    "BOOL": "bool", "U8": "uint8", "I8": "int8", "I16": "int16", "U16": "uint16",
    "I32": "int32", "U32": "uint32", "I64": "int64", "U64": "uint64", "F16": "float16",
    "BF16": "bfloat16", "F32": "float32", "F64": "float64", "F8_E4M3": "float8_e4m3fn",
    "F8_E5M2": "float8_e5m2",
}  # fmt: skip


class TensorFile:
    """A safetensors file whose tensors are read on demand, each into memory of its own.

    Used as a context manager, like ``safe_open(path, framework="pt")``::

        with TensorFile(path) as weights:
            for name in weights.keys():
                tensor = weights.get_tensor(name)

    Args:
        path: the ``.safetensors`` file.
        header: its parsed header, when the caller has it (read and checked here otherwise).

    Raises:
        SafetensorsError: the header is missing, malformed or inconsistent with the file.
    """

    def __init__(self, path: str | Path, header: SafetensorsHeader | None = None) -> None:
        if sys.byteorder != "little":  # safetensors stores little-endian values
            raise SafetensorsError(path, "reading safetensors needs a little-endian machine")
        self.path = Path(path)
        self.header = header if header is not None else read_safetensors_header(self.path)
        self._handle: BinaryIO | None = None

    def __enter__(self) -> TensorFile:
        self._handle = self.path.open("rb", buffering=0)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    def keys(self) -> list[str]:
        """The tensor names, in the header's order."""
        return list(self.header.tensors)

    def get_tensor(self, name: str) -> torch.Tensor:
        """One tensor, read from the file into a new CPU tensor.

        Args:
            name: a name of :meth:`keys`.

        Returns:
            The tensor, with the file's shape, dtype and bytes.

        Raises:
            KeyError: the file holds no tensor of that name.
            SafetensorsError: the file ends before the tensor does (it changed since its header
                was read).
            RuntimeError: called outside the ``with`` block.
        """
        import torch

        if self._handle is None:
            raise RuntimeError("TensorFile.get_tensor is called inside `with TensorFile(path)`")
        shape, dtype = self.header.tensors[name]
        begin, end = self.header.offsets[name]
        data = torch.empty(end - begin, dtype=torch.uint8)
        buffer = memoryview(data.numpy())
        self._handle.seek(self.header.data_start + begin)
        done = 0
        while done < len(buffer):  # one read() returns at most about 2 GiB on Linux
            count = self._handle.readinto(buffer[done:])
            if not count:
                raise SafetensorsError(self.path, f"tensor {name!r}: the file ends in its data")
            done += count
        return data.view(getattr(torch, TORCH_DTYPE_NAMES[dtype])).reshape(shape)
