"""A CPU run of every preset is what it was when the pins were taken: same log, same checkpoint.

Pinned after the training-fidelity change (untied `lm_head`, untruncated labels, weight decay)
and before the device work (`pflkit train --device/--precision`), so that moving models,
batches, method state and DP noise onto a device cannot change a CPU run by a single bit. Each
preset trains one short round on the generated `tiny` benchmark from a seeded small reference
model, one thread; the pins are the sha256 of `communication_log.csv`, of the checkpoint's
`model.safetensors` and of every personal model (track 3).

The digests are a machine's (torch 2.13 CPU, one thread): a CPU with other vector units rounds
differently (an AMD EPYC with AVX-512 gives other checkpoints than the machine the first pins
were taken on, for 14 of the 19 presets, with the same communication logs). ``cpu_pins.json``
holds one set of pins per machine, under a label naming its CPU; a run passes when it equals
the pins of one recorded machine, exactly. On a machine of a new kind the test fails until its
pins are taken: ``HF_HUB_OFFLINE=1 python -m tests.baselines.test_cpu_pins`` adds (or, after a
deliberate change of training, replaces) this machine's set; after such a change, take every
recorded machine's set anew.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from baselines.presets import all_presets
from benchmark.provenance import machine_label

PINS = Path(__file__).with_name("cpu_pins.json")
COMMON = (
    "--rounds",
    "1",
    "--local-epochs",
    "1",
    "--clients-per-round",
    "1",
    "--val-limit",
    "0",
    "--threads",
    "1",
    "--no-progress",
    "--batch-size",
    "4",
)
#: what each preset needs beyond the common options to run one short round on `tiny`.
EXTRA: dict[str, tuple[str, ...]] = {
    "fsp-fedavg": ("--fsp-rounds", "1"),
    "fsp-fedadam": ("--fsp-rounds", "1"),
    "dp-fedavg": ("--noise-multiplier", "1.0"),
    "dp-lora": ("--noise-multiplier", "1.0"),
    "dp-clgecl": ("--noise-multiplier", "1.0"),
    "dp-clgecl-lora": ("--noise-multiplier", "1.0"),
    "dp-fedavg-competition": ("--noise-multiplier", "1.0", "--providers-per-round", "2"),
    "dp-lora-competition": ("--noise-multiplier", "1.0", "--providers-per-round", "2"),
}


def preset_options(preset: str) -> list[str]:
    """What ``preset`` needs beyond the common options for one short round on `tiny`
    (:data:`EXTRA`; ``local-only`` trains no federated round). Given after them, they win."""
    rounds = ["--rounds", "0"] if preset == "local-only" else []
    return [*EXTRA.get(preset, ()), *rounds]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def run_digest(run: Path) -> dict[str, str]:
    """The pinned files of a run directory, by path relative to it."""
    files = [run / "communication_log.csv", run / "checkpoint" / "model.safetensors"]
    files += sorted((run / "personal").glob("*.safetensors")) if (run / "personal").is_dir() else []
    return {str(path.relative_to(run)): _sha256(path) for path in files}


def train_preset(preset: str, data: Path, base: Path, out: Path) -> dict[str, str]:
    """One short CPU run of ``preset``; its digest."""
    from baselines.cli import train

    args = [
        "--preset",
        preset,
        "--data",
        str(data),
        "--out",
        str(out),
        "--base",
        str(base),
        *COMMON,
        *preset_options(preset),
    ]
    result = CliRunner().invoke(train, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return run_digest(out)


def small_base(data: Path, root: Path) -> Path:
    """The seeded small reference model the pins start from."""
    from benchmark.data import load_split
    from tests.small_model import save_small_reference

    return save_small_reference(
        load_split(data, "train", client=0), root, vocab_size=200, max_answer_tokens=4
    )


@pytest.fixture(scope="module")
def pinned_base(tmp_path_factory, tiny_data: Path) -> Path:
    return small_base(tiny_data, tmp_path_factory.mktemp("pinned-base"))


def _machines() -> dict[str, dict[str, dict[str, str]]]:
    """Every recorded machine's pins: label -> preset -> digest."""
    return json.loads(PINS.read_text())["machines"]


#: pinned in ``make test``: full fine-tuning, LoRA with NF4 on the wire, the DP per-provider
#: path at mini's and at the competition's size, a personal method and federated
#: self-pretraining; the other presets are checked in ``make test-slow``.
DEFAULT_RUN = ("fedavg", "lora-nf4", "dp-lora", "dp-fedavg-competition", "feddat", "fsp-fedavg")


@pytest.mark.parametrize(
    "preset",
    [
        preset if preset in DEFAULT_RUN else pytest.param(preset, marks=pytest.mark.slow)
        for preset in sorted(all_presets())
    ],
)
def test_a_cpu_run_of_every_preset_is_unchanged(
    preset, tiny_data: Path, pinned_base: Path, tmp_path: Path
) -> None:
    machines = _machines()
    assert all(preset in pins for pins in machines.values()), (
        f"{preset} lacks a pin on some machine: take the pins anew (module docstring)"
    )
    digest = train_preset(preset, tiny_data, pinned_base, tmp_path / preset)
    matching = [label for label, pins in machines.items() if pins[preset] == digest]
    assert matching, (
        f"{preset} on {machine_label()!r} equals no recorded machine's pins "
        f"({', '.join(machines)}): {digest}"
    )


def main() -> None:
    """Take this machine's pins: every preset once on a fresh `tiny` benchmark (about two
    minutes); the other machines' sets are kept."""
    import tempfile

    from benchmark.data.synthetic.benchmark import generate_benchmark

    root = Path(tempfile.mkdtemp(prefix="cpu-pins-"))
    data = root / "tiny"
    generate_benchmark(data, "tiny", public_documents=0, workers=1, progress=False)
    base = small_base(data, root / "base")
    pins = {}
    for preset in all_presets():
        pins[preset] = train_preset(preset, data, base, root / "runs" / preset)
        print(preset, pins[preset], file=sys.stderr)
    machines = _machines() if PINS.is_file() else {}
    machines[machine_label()] = pins
    PINS.write_text(json.dumps({"machines": machines}, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
