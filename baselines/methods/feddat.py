"""FedDAT: a shared adapter trained against a dual-adapter teacher, and a local adapter kept on
the client.

Chen et al. 2023, "FedDAT: An Approach for Foundation Model Finetuning in Multi-Modal
Heterogeneous Federated Learning" (https://arxiv.org/abs/2308.12305; notes in
``shared/seeds/feddat-notes-zh.txt``; code ``HaokunChen245/FedDAT``, read for its defaults, none
of it copied). Every client holds three adapters on the same layers: a local adapter that never
leaves it, the shared adapter (the only adapter sent and aggregated, by FedAvg), and a frozen
copy of the global shared adapter it received this round. The dual-adapter teacher (DAT) is the
model with the local and frozen-global adapters mixed with equal weights (the public code's
``weight_up = 0.5``; its gating network is commented out). Each local step:

1. the shared adapter is trained on ``(1 - w) * CE + w * KL(teacher || shared)`` (mutual
   knowledge distillation from the DAT),
2. the local adapter, through the DAT, on ``(1 - w) * CE + w * KL(shared || DAT)``,

with ``w = 0.5`` (the code's ``(loss + loss_kl) / 2``) and the KL at temperature 3, scaled by
``T^2`` (the code's ``kl_loss``); ``--feddat-kl-mix`` and ``--feddat-temperature``.

Adaptations to a generative VT5 (the paper used ViLT/ALBEF with bottleneck adapters):

- The adapters are peft LoRA modules: the shared one is exactly the ``lora`` method's adapter
  (same targets, rank, seed and fully trained modules, so the same bytes per message as a LoRA
  FedAvg run of that budget), the local and frozen-global ones are two more peft adapters on
  the same layers at half the scaling (``alpha / 2``), so that running both is the DAT mix. LoRA
  rather than bottleneck adapters because a LoRA update is linear in the layer's input: the
  shared adapter, and the DAT's equal-weight mix of two adapters, merge exactly into the
  layer's weight (``W + 0.5 * (alpha / r) * (B_l A_l + B_g A_g)``), so the global model and
  every personal model are plain VT5 checkpoints, as the submission requires.
- The fully trained modules of the ``lora`` recipe (spatial embedding, visual projection)
  belong to the shared side: trained in step 1, sent, and frozen in the DAT's step 2.
- Both steps' losses are summed into one backward pass and one optimiser step: step 2's loss
  does not depend on the shared adapter (its KL target is detached), step 1's not on the local
  adapter, and AdamW updates each tensor from its own gradient, so this equals the code's two
  consecutive steps. The teacher's logits in step 1 are the DAT forward's logits detached (the
  code runs that forward twice, once without gradient before the shared step; the local
  adapter has not moved in between, so only dropout noise differs).
- Logits are distributions over the vocabulary at each answer position: KL and CE are means
  over the answer tokens (labels not -100); the code's ``batchmean`` over examples.
- A client's local adapter starts, at its first round, as a copy of the global shared adapter
  it receives (the DAT then equals the global model), and is kept in ``ClientJob.state``.
- Personalisation: with 2 of 10 clients a round, a client may never be sampled, so after the
  last round every client receives the final global model (round R + 1 of the log) and runs
  ``--finetune-epochs`` (1) epochs of the same local step; its personal model is the DAT (the
  code evaluates clients with the gating on): the local adapter and the final global adapter
  merged with equal weights into their layers.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

from baselines.core.client_job import ClientJob
from baselines.core.client_update import ClientUpdate
from baselines.methods.base import RunShape
from baselines.methods.finetune import FineTuneOptions
from baselines.methods.lora import LoRA, LoRAOptions
from baselines.options import build_options, option

SHARED, LOCAL, GLOBAL = "default", "local", "global"
#: the DAT's weight on each of its two adapters (the public code's fixed gate).
DAT_WEIGHT = 0.5


@dataclass(frozen=True)
class FedDATOptions:
    """Options of FedDAT's mutual distillation.

    Raises:
        ValueError: for a temperature <= 0 or a weight outside [0, 1].
    """

    key_prefix: ClassVar[str] = "feddat_"
    temperature: float = option(
        3.0, help="FedDAT: softmax temperature of the distillation KL (scaled by T^2)."
    )
    kl_mix: float = option(
        0.5, help="FedDAT: weight w of the KL term in each adapter's loss (1 - w) CE + w KL."
    )

    def __post_init__(self) -> None:
        if not self.temperature > 0:
            raise ValueError(f"--feddat-temperature must be > 0, got {self.temperature}")
        if not 0.0 <= self.kl_mix <= 1.0:
            raise ValueError(f"--feddat-kl-mix must be in [0, 1], got {self.kl_mix}")


def distillation_kl(
    student_logits: torch.Tensor,
    teacher_logits: torch.Tensor,
    mask: torch.Tensor,
    *,
    temperature: float,
) -> torch.Tensor:
    """``T^2 KL(softmax(t / T) || softmax(s / T))`` averaged over the masked positions.

    Args:
        student_logits: (..., classes), gradients flow.
        teacher_logits: (..., classes), the target (detach it first).
        mask: (...) positions that count.
        temperature: T.

    Returns:
        A scalar (0 when no position counts).
    """
    student = student_logits[mask].float() / temperature
    teacher = teacher_logits[mask].float() / temperature
    if student.shape[0] == 0:
        return student.sum() * 0.0
    kl = F.kl_div(F.log_softmax(student, dim=-1), F.softmax(teacher, dim=-1), reduction="batchmean")
    return kl * temperature**2


def dual_adapter_delta(
    local: tuple[torch.Tensor, torch.Tensor],
    global_: tuple[torch.Tensor, torch.Tensor],
    *,
    scaling: float,
) -> torch.Tensor:
    """The DAT's change to a layer's weight: ``0.5 * scaling * (B_l A_l + B_g A_g)``.

    Args:
        local: the local adapter's (A, B).
        global_: the frozen global adapter's (A, B).
        scaling: LoRA's alpha / r.

    Returns:
        The (out, in) matrix added to the weight.
    """
    (a_local, b_local), (a_global, b_global) = local, global_
    return DAT_WEIGHT * scaling * (b_local @ a_local + b_global @ a_global)


def _adapter_names(model: nn.Module, adapter: str, prefix: str) -> dict[str, nn.Parameter]:
    """Stripped name -> parameter of one adapter's LoRA matrices."""
    marks = (f".lora_A.{adapter}.", f".lora_B.{adapter}.")
    return {
        name.removeprefix(prefix): parameter
        for name, parameter in model.named_parameters()
        if any(mark in name for mark in marks)
    }


def _rename(name: str, source: str, target: str) -> str:
    return name.replace(f".{source}.", f".{target}.")


class FedDAT(LoRA):
    """Shared LoRA adapter (sent) + local adapter (kept) + frozen global copy (the teacher's).

    Args:
        lora: the shared adapter's options (as the ``lora`` method's).
        epochs: local epochs of the personalisation after the last round.
        temperature, kl_mix: as in :class:`FedDATOptions`.
    """

    name = "feddat"
    personal = True
    option_classes = (*LoRA.option_classes, FineTuneOptions, FedDATOptions)
    #: the ``lora`` recipe (rank 2 on q, k, v, o, wi, wo, lr 3e-3) over FedAvg's 10 rounds.
    presets: ClassVar[dict[str, dict[str, Any]]] = {
        "feddat": {
            "extends": "lora",
            "method": "feddat",
            "rounds": 10,
            "finetune_epochs": 1,
            "feddat_temperature": 3.0,
            "feddat_kl_mix": 0.5,
        },
    }

    def __init__(
        self,
        lora: LoRAOptions | None = None,
        *,
        epochs: int = 1,
        temperature: float = 3.0,
        kl_mix: float = 0.5,
    ) -> None:
        super().__init__(**dataclasses.asdict(lora or LoRAOptions()))
        self.epochs = FineTuneOptions(epochs=epochs).epochs
        options = FedDATOptions(temperature=temperature, kl_mix=kl_mix)
        self.temperature = options.temperature
        self.kl_mix = options.kl_mix

    @classmethod
    def from_options(cls, options: Mapping[str, Any], *, run: RunShape) -> FedDAT:
        """LoRA options, personalisation epochs, temperature and KL weight from the options."""
        own = build_options(FedDATOptions, options)
        return cls(
            build_options(LoRAOptions, options),
            epochs=build_options(FineTuneOptions, options).epochs,
            temperature=own.temperature,
            kl_mix=own.kl_mix,
        )

    def prepare(self, model: nn.Module, *, seed: int) -> nn.Module:
        """The ``lora`` model plus the local and global adapters (half scaling, frozen)."""
        from peft import LoraConfig

        peft_model = super().prepare(model, seed=seed)
        trained = [p for p in peft_model.parameters() if p.requires_grad]
        config = LoraConfig(
            r=self.rank,
            lora_alpha=DAT_WEIGHT * self.alpha,
            lora_dropout=self.dropout,
            target_modules=self._pattern(self.targets),
            bias="none",
        )
        with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.manual_seed(seed + 1)
            for adapter in (LOCAL, GLOBAL):
                peft_model.add_adapter(adapter, config)
        self._activate(peft_model, [SHARED], trained)
        return peft_model

    def _activate(
        self, model: nn.Module, adapters: list[str], trainable: list[nn.Parameter]
    ) -> None:
        """Make ``adapters`` the active ones and exactly ``trainable`` require gradients."""
        model.base_model.set_adapter(adapters, inference_mode=True)
        for parameter in model.parameters():
            parameter.requires_grad_(False)
        for parameter in trainable:
            parameter.requires_grad_(True)

    def _load_adapters(self, job: ClientJob) -> None:
        """The received shared adapter into the frozen global copy; the client's local one."""
        shared = {n: v for n, v in job.start_weights.items() if f".{SHARED}." in n}
        global_ = _adapter_names(job.model, GLOBAL, self.prefix)
        local = _adapter_names(job.model, LOCAL, self.prefix)
        with torch.no_grad():
            for name, value in shared.items():
                global_[_rename(name, SHARED, GLOBAL)].copy_(value)
                local[_rename(name, SHARED, LOCAL)].copy_(
                    job.state.get(_rename(name, SHARED, LOCAL), value)
                )

    @contextmanager
    def _local_training(self, job: ClientJob) -> Iterator[None]:
        """Load the adapters, train shared and local ones, keep the local one in the state."""
        self._load_adapters(job)
        communicated = list(job.live_parameters().values())
        local = _adapter_names(job.model, LOCAL, self.prefix)
        self._activate(job.model, [SHARED], [*communicated, *local.values()])
        try:
            yield
        finally:
            self._activate(job.model, [SHARED], communicated)
        job.state.clear()
        job.state.update({name: p.detach().to("cpu", copy=True) for name, p in local.items()})

    def compute_update(self, job: ClientJob) -> ClientUpdate:
        """One round of FedDAT local training; only the shared adapter's delta is sent."""
        job.reset()
        with self._local_training(job):
            stats = job.train()
        return ClientUpdate(job.delta(), num_examples=len(job.dataset), metrics=stats.as_dict())

    def local_loss(self, job: ClientJob, batch: Mapping[str, Any], outputs: Any) -> torch.Tensor:
        """Shared adapter's loss (vs the DAT) plus the local adapter's (vs the shared one)."""
        mask = batch["labels"] != -100
        communicated = list(job.live_parameters().values())
        local = list(_adapter_names(job.model, LOCAL, self.prefix).values())
        self._activate(job.model, [LOCAL, GLOBAL], local)
        try:
            dat = job.model(**batch)
        finally:
            self._activate(job.model, [SHARED], [*communicated, *local])
        w, t = self.kl_mix, self.temperature
        shared_loss = (1 - w) * outputs.loss + w * distillation_kl(
            outputs.logits, dat.logits.detach(), mask, temperature=t
        )
        local_loss = (1 - w) * dat.loss + w * distillation_kl(
            dat.logits, outputs.logits.detach(), mask, temperature=t
        )
        return shared_loss + local_loss

    def personalises(self) -> bool:
        """Every client trains its local adapter after the last round, unless epochs are 0."""
        return self.epochs > 0

    def personalise(self, job: ClientJob) -> None:
        """FedDAT's local step from the final global model; the local adapter is kept."""
        job.reset()
        with self._local_training(job):
            job.train(epochs=self.epochs)

    def personal_model(self, model: nn.Module, state: Mapping[str, torch.Tensor]) -> nn.Module:
        """The DAT: the client's local adapter and the global one, mixed (the global model
        when the client has no local adapter)."""
        if not state:
            return model
        shared = _adapter_names(model, SHARED, self.prefix)
        global_ = _adapter_names(model, GLOBAL, self.prefix)
        local = _adapter_names(model, LOCAL, self.prefix)
        with torch.no_grad():
            for name, value in shared.items():
                global_[_rename(name, SHARED, GLOBAL)].copy_(value)
                local[_rename(name, SHARED, LOCAL)].copy_(state[_rename(name, SHARED, LOCAL)])
        self._activate(model, [LOCAL, GLOBAL], [])
        return model

    def describe(self) -> dict[str, Any]:
        """LoRA options, personalisation epochs, temperature and KL weight."""
        return {
            **super().describe(),
            "finetune_epochs": self.epochs,
            "temperature": self.temperature,
            "kl_mix": self.kl_mix,
        }
