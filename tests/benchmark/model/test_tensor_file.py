"""Reading checkpoints in little memory: `TensorFile` reads the bytes `safe_open` maps, one tensor
at a time without mapping the file, and `load_model` hands the model the file's mapped tensors
without copying them (docs/results/memory.md)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from benchmark.model import (
    VT5ForConditionalGeneration,
    disk_state_dict,
    load_model,
    save_checkpoint,
    tiny_vt5_config,
)
from benchmark.model.safetensors_header import SafetensorsError, read_safetensors_header
from benchmark.model.tensor_file import TORCH_DTYPE_NAMES, TensorFile

linux_only = pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc/self/maps")


def _bytes(tensor: torch.Tensor) -> bytes:
    return tensor.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def _file_mappings(path: Path) -> list[tuple[int, int]]:
    """Address ranges of this process that map a file."""
    target = os.path.realpath(path)
    ranges = []
    for line in Path("/proc/self/maps").read_text().splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and fields[5] == target:
            begin, end = (int(x, 16) for x in fields[0].split("-"))
            ranges.append((begin, end))
    return ranges


@pytest.fixture(scope="module", params=[True, False], ids=["tied-head", "untied-head"])
def checkpoint(request, tmp_path_factory, processor) -> tuple[Path, VT5ForConditionalGeneration]:
    """A tiny checkpoint (tied or untied `lm_head`) and the model it was saved from."""
    torch.manual_seed(1)
    config = tiny_vt5_config(len(processor.tokenizer), tie_lm_head=request.param)
    model = VT5ForConditionalGeneration(config).eval()
    return save_checkpoint(model, processor, tmp_path_factory.mktemp("ckpt") / "tiny"), model


def test_every_dtype_and_shape_reads_the_bytes_safe_open_maps(tmp_path):
    generator = torch.Generator().manual_seed(0)
    tensors = {}
    for name, dtype_name in TORCH_DTYPE_NAMES.items():
        dtype = getattr(torch, dtype_name)
        raw = torch.randint(0, 256, (3, 5 * torch.empty((), dtype=dtype).element_size()),
                            generator=generator, dtype=torch.uint8)  # fmt: skip
        tensors[name] = raw.view(dtype) if dtype != torch.bool else raw % 2 == 1
    tensors["scalar"] = torch.tensor(2.5)
    tensors["empty"] = torch.zeros(0, 4)
    tensors["column"] = torch.arange(7, dtype=torch.int64)[:, None]
    path = tmp_path / "all.safetensors"
    save_file(tensors, path)
    with TensorFile(path) as ours, safe_open(str(path), framework="pt") as theirs:
        assert sorted(ours.keys()) == sorted(theirs.keys())
        for name in theirs.keys():
            mine, reference = ours.get_tensor(name), theirs.get_tensor(name)
            assert (mine.dtype, mine.shape) == (reference.dtype, reference.shape), name
            assert _bytes(mine) == _bytes(reference), name


def test_a_checkpoint_reads_bit_identical_to_the_model_that_wrote_it(checkpoint):
    directory, model = checkpoint
    saved = disk_state_dict(model)
    with TensorFile(directory / "model.safetensors") as weights:
        assert set(weights.keys()) == set(saved)
        for name in weights.keys():
            assert _bytes(weights.get_tensor(name)) == _bytes(saved[name]), name


@linux_only
def test_reading_never_maps_the_file(checkpoint):
    path = checkpoint[0] / "model.safetensors"
    with TensorFile(path) as weights:
        tensors = [weights.get_tensor(name) for name in weights.keys()]
        assert _file_mappings(path) == []
    assert all(t.untyped_storage().nbytes() == t.numel() * t.element_size() for t in tensors)


def test_misuse_and_a_file_cut_short_are_named(checkpoint, tmp_path):
    path = tmp_path / "model.safetensors"
    path.write_bytes((checkpoint[0] / "model.safetensors").read_bytes())
    header = read_safetensors_header(path)
    last = max(header.offsets, key=lambda name: header.offsets[name][1])
    with pytest.raises(RuntimeError, match="inside `with"):
        TensorFile(path).get_tensor(last)
    with TensorFile(path) as weights, pytest.raises(KeyError):
        weights.get_tensor("no.such.tensor")
    os.truncate(path, path.stat().st_size - 4)
    with TensorFile(path, header) as weights, pytest.raises(SafetensorsError, match="ends in"):
        weights.get_tensor(last)


@linux_only
def test_load_model_keeps_the_mapped_tensors_without_copying_them(checkpoint, processor, records):
    directory, original = checkpoint
    model = load_model(directory)
    mapped = _file_mappings(directory / "model.safetensors")
    assert mapped, "from_pretrained no longer maps model.safetensors"
    for name, tensor in disk_state_dict(model).items():
        address = tensor.data_ptr()
        assert any(begin <= address < end for begin, end in mapped), f"{name} was copied"
    backbone = model.language_backbone
    assert backbone.encoder.embed_tokens.weight is backbone.shared.weight
    assert (backbone.lm_head.weight is backbone.shared.weight) == original.config.tie_lm_head
    for name, tensor in original.state_dict().items():
        assert _bytes(model.state_dict()[name]) == _bytes(tensor), name
    batch = processor(
        [r["question"] for r in records[:3]],
        [r["ocr_tokens"] for r in records[:3]],
        [r["ocr_boxes"] for r in records[:3]],
        images=[r["image_path"] for r in records[:3]],
    )
    with torch.inference_mode():
        assert torch.equal(model(**batch).logits, original(**batch).logits)
        assert torch.equal(model.generate(**batch, max_new_tokens=5),
                           original.generate(**batch, max_new_tokens=5))  # fmt: skip
