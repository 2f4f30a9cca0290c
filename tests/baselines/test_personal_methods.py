"""pFedCR, FedDAT and FedP3: their maths on hand-computed values, and one tiny round of each
preset that writes a valid track-3 submission and communication log."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from safetensors.torch import load_file
from torch import nn

from baselines.cli import train
from baselines.methods.feddat import FedDAT, distillation_kl, dual_adapter_delta
from baselines.methods.fedp3 import (
    fedp3_term,
    forgotten_knowledge_distribution,
    pairwise_preference_loss,
    preference_matrix,
)
from baselines.methods.lora import LoRAOptions
from baselines.methods.pfedcr import PFedCR, PFedCROptions, average_parameters, is_attention
from baselines.presets import PERSONAL_PRESETS
from benchmark.model import expected_tensor_spec, read_checkpoint_config, read_personalisations

K = 10
NEW_PRESETS = ("pfedcr", "feddat", "fedp3")


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x))


# --- FedP3 ---------------------------------------------------------------------------------


def test_the_matchup_is_the_sigmoid_of_twice_the_difference() -> None:
    matrix = preference_matrix(torch.tensor([0.5, 0.25, 0.25]))
    assert matrix[0, 1].item() == pytest.approx(_sigmoid(0.5))  # g(0.25) = 1 / (1 + e^-0.5)
    assert matrix[1, 0].item() == pytest.approx(_sigmoid(-0.5))
    assert torch.allclose(matrix.diagonal(), torch.full((3,), 0.5))


def test_the_pairwise_preference_loss_on_hand_values() -> None:
    # teacher prefers answer 0 (0.6 > 0.4), the student answer 1: the two off-diagonal matchups
    # (0, 1) and (1, 0) of each side differ by g(0.2) - g(-0.2) = sigma(0.4) - sigma(-0.4)
    # = 0.197375; the diagonals agree (0.5).
    loss = pairwise_preference_loss(torch.tensor([0.6, 0.4]), torch.tensor([0.4, 0.6]))
    assert loss.item() == pytest.approx(2 * (_sigmoid(0.4) - _sigmoid(-0.4)), abs=1e-6)
    assert loss.item() == pytest.approx(0.394751, abs=1e-5)
    same = pairwise_preference_loss(torch.tensor([0.7, 0.2, 0.1]), torch.tensor([0.7, 0.2, 0.1]))
    assert same.item() == 0.0


def test_the_forgotten_knowledge_filter_on_hand_logits() -> None:
    teacher = torch.tensor([0.5, 0.3, 0.2]).log()
    student = torch.tensor([0.8, 0.1, 0.1]).log()
    # H_T = -1.029653, H_S = -0.639032, log(H_T / H_S) = 0.477000, r ~ p_T * p_S^-0.477
    r = forgotten_knowledge_distribution(teacher, student)
    assert torch.allclose(r, torch.tensor([0.27054, 0.43768, 0.29178]), atol=1e-4)
    # the answer the student forgot (0.3 -> 0.1) ranks first, the teacher's own top answer last
    assert r.argsort(descending=True).tolist() == [1, 2, 0]
    # at the start of a round (student = teacher) r is the teacher's distribution (Eq. 8.12)
    assert torch.allclose(forgotten_knowledge_distribution(teacher, teacher), teacher.exp())


def test_the_fedp3_term_keeps_the_filtered_candidates_and_masks_positions() -> None:
    teacher = torch.tensor([[0.5, 0.3, 0.2], [0.2, 0.3, 0.5]]).log()
    student = torch.tensor([[0.8, 0.1, 0.1], [0.2, 0.3, 0.5]]).log()
    student.requires_grad_(True)
    mask = torch.tensor([True, False])
    term = fedp3_term(teacher, student, mask, candidates=2)
    # candidates {1, 2}: teacher (0.3, 0.2), student (0.1, 0.1): 2 x (sigma(0.2) - 0.5)
    assert term.item() == pytest.approx(2 * (_sigmoid(0.2) - 0.5), abs=1e-6)
    term.backward()
    assert student.grad[1].abs().sum() == 0 and student.grad[0].abs().sum() > 0
    nothing = fedp3_term(teacher, student, torch.tensor([False, False]), candidates=2)
    assert nothing.item() == 0.0


# --- pFedCR --------------------------------------------------------------------------------


def test_pfedcr_averages_local_and_global_parameters() -> None:
    averaged = average_parameters({"w": torch.tensor([1.0, 3.0])}, {"w": torch.tensor([3.0, -1.0])},
                                  mix=0.25)
    assert torch.equal(averaged["w"], torch.tensor([2.5, 0.0]))
    with pytest.raises(ValueError, match="differ"):
        average_parameters({"w": torch.zeros(1)}, {"v": torch.zeros(1)}, mix=0.5)
    with pytest.raises(ValueError, match="pfedcr-mix"):
        PFedCROptions(mix=1.5)
    assert is_attention("language_backbone.decoder.block.0.layer.1.EncDecAttention.q.weight")
    assert not is_attention("language_backbone.decoder.block.0.layer.2.DenseReluDense.wi.weight")
    assert PFedCR(mix=0.3).describe()["mix"] == 0.3


# --- FedDAT --------------------------------------------------------------------------------


class _Backbone(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.q = nn.Linear(2, 2, bias=False)


class _Toy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.language_backbone = _Backbone()
        with torch.no_grad():
            self.language_backbone.q.weight.copy_(torch.eye(2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.language_backbone.q(x)


def _set(model: nn.Module, adapter: str, a: list[list[float]], b: list[list[float]]) -> None:
    layer = model.base_model.model.language_backbone.q
    with torch.no_grad():
        layer.lora_A[adapter].weight.copy_(torch.tensor(a))
        layer.lora_B[adapter].weight.copy_(torch.tensor(b))


def test_feddat_mixes_the_local_and_global_adapters_into_the_weight() -> None:
    method = FedDAT(LoRAOptions(rank=1, alpha=2.0, targets=("q",), scope="", fully_trained=()))
    model = method.prepare(_Toy(), seed=0)
    # only the shared adapter is trained and sent
    assert sorted(n for n, p in model.named_parameters() if p.requires_grad) == [
        "base_model.model.language_backbone.q.lora_A.default.weight",
        "base_model.model.language_backbone.q.lora_B.default.weight",
    ]
    _set(model, "default", [[0.0, 1.0]], [[0.0], [2.0]])  # the (final) global shared adapter
    # alpha / r = 2: the global model is W + 2 B_g A_g = [[1, 0], [0, 5]]
    assert torch.equal(method.export(_copy(model)).language_backbone.q.weight,
                       torch.tensor([[1.0, 0.0], [0.0, 5.0]]))
    prefix = "language_backbone.q.lora_"
    state = {f"{prefix}A.local.weight": torch.tensor([[1.0, 0.0]]),
             f"{prefix}B.local.weight": torch.tensor([[1.0], [0.0]])}
    personal = method.personal_model(_copy(model), state)
    # the DAT: 0.5 * 2 * (B_l A_l + B_g A_g) = [[1, 0], [0, 0]] + [[0, 0], [0, 2]]
    delta = dual_adapter_delta((state[f"{prefix}A.local.weight"], state[f"{prefix}B.local.weight"]),
                               (torch.tensor([[0.0, 1.0]]), torch.tensor([[0.0], [2.0]])),
                               scaling=2.0)
    assert torch.equal(delta, torch.tensor([[1.0, 0.0], [0.0, 2.0]]))
    assert torch.allclose(personal(torch.tensor([[1.0, 1.0]])), torch.tensor([[2.0, 3.0]]))
    merged = method.export(personal).language_backbone.q.weight
    assert torch.equal(merged, torch.eye(2) + delta)
    assert method.personal_model(_copy(model), {}) is not None  # no local adapter: global


def _copy(model: nn.Module) -> nn.Module:
    import copy

    return copy.deepcopy(model)


def test_the_distillation_kl_on_hand_logits() -> None:
    student = torch.zeros(2, 2)
    teacher = torch.tensor([[0.75, 0.25], [0.5, 0.5]]).log()
    mask = torch.tensor([True, False])
    # KL(teacher || uniform) on the one counted position: 0.75 ln 1.5 + 0.25 ln 0.5
    expected = 0.75 * math.log(1.5) + 0.25 * math.log(0.5)
    assert distillation_kl(student, teacher, mask, temperature=1.0).item() == pytest.approx(
        expected, abs=1e-6)
    # at temperature T the logits are divided by T and the KL multiplied by T^2
    hot = torch.tensor([[0.75, 0.25]]).log() * 3.0
    assert distillation_kl(torch.zeros(1, 2), hot, torch.tensor([True]),
                           temperature=3.0).item() == pytest.approx(9 * expected, abs=1e-5)


# --- one tiny round of each preset ---------------------------------------------------------


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_data: Path, tiny_base: Path) -> dict[str, Path]:
    out = {}
    for preset in NEW_PRESETS:
        run = tmp_path_factory.mktemp("runs") / preset
        result = CliRunner().invoke(train, [
            "--preset", preset, "--data", str(tiny_data), "--out", str(run),
            "--base", str(tiny_base), "--rounds", "1", "--val-limit", "4", "--no-progress",
        ], catch_exceptions=False)
        assert result.exit_code == 0, result.output
        out[preset] = run
    return out


def test_the_presets_are_track_3(runs) -> None:
    assert set(NEW_PRESETS) <= set(PERSONAL_PRESETS)
    assert PERSONAL_PRESETS["feddat"]["lora_rank"] == 2  # the `lora` recipe's adapter budget


@pytest.mark.parametrize("preset", NEW_PRESETS)
def test_one_round_writes_a_valid_track_3_submission(preset: str, runs) -> None:
    run = runs[preset]
    submission = json.loads((run / "submission.json").read_text())
    assert submission["track"] == 3 and submission["method"] == preset
    config = read_checkpoint_config(run / "checkpoint")
    personal = read_personalisations(run / "personal", expected_tensor_spec(config), K)
    assert submission["personal"]["personalised_clients"] == K
    global_tensors = load_file(run / "checkpoint" / "model.safetensors")
    for client in range(K):
        tensors = personal.load(client)
        assert tensors and all(not torch.equal(v, global_tensors[n]) for n, v in tensors.items())
        assert not any(n.startswith("visual_embedding.image_model.") for n in tensors)
        if preset == "feddat":  # the DAT changes only the adapted layers
            assert all(n.rsplit(".", 2)[-2] in {"q", "k", "v", "o", "wi", "wo"} for n in tensors)
    with (run / "communication_log.csv").open() as stream:
        log = [[int(v) for v in row] for row in list(csv.reader(stream))[1:]]
    first = [row for row in log if row[0] == 1]
    final = [row for row in log if row[0] == 2]
    assert len(first) == 4 and sorted(row[2] for row in final) == list(range(K))
    assert all(row[1] == -1 for row in final)  # the final global model goes down, nothing up
    assert submission["total_bytes"] == sum(row[3] for row in log)


def test_feddat_sends_what_lora_sends(runs, tiny_data: Path, tiny_base: Path,
                                      tmp_path: Path) -> None:
    out = tmp_path / "lora"
    result = CliRunner().invoke(train, [
        "--preset", "lora", "--data", str(tiny_data), "--out", str(out), "--base",
        str(tiny_base), "--rounds", "1", "--val-limit", "4", "--no-progress"],
        catch_exceptions=False)
    assert result.exit_code == 0, result.output
    lora = json.loads((out / "submission.json").read_text())
    feddat = json.loads((runs["feddat"] / "submission.json").read_text())
    assert feddat["bytes_per_message"] == lora["bytes_per_message"]
