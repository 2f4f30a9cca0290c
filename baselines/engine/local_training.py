"""The local optimisation loop a client runs each round.

Three hooks make it extensible without editing it: an optimiser factory (AdamW by default, any
:class:`~baselines.optimizers.base.Optimizer` or callable from parameters to a
``torch.optim.Optimizer``), a loss hook per call (a method adds a proximal or distillation term,
:meth:`baselines.methods.base.Method.local_loss`) and a step hook run between ``backward`` and
the optimiser step (gradient clipping of any kind: :func:`clip_grad_norm`, the element-wise
:func:`clip_grad_value`, or both with :func:`chain_step_hooks`). A caller that keeps a client's
optimiser state across rounds passes it to :meth:`LocalTrainer.train` (``optimizer_state``).
:class:`LocalTrainer` is the :class:`~baselines.core.training.Trainer` a client's job calls.

The loop runs on the device the model's parameters are on (:mod:`baselines.engine.placement` puts them
there): each batch is moved to it, and the forward pass and loss run under autocast at the
trainer's precision (fp32: no autocast). With ``prefetch``, the next batch is collated (page
images decoded and resized) in a background thread while the model trains on the current one;
the batches and their order are the same, so a run's result is too.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from baselines.core.training import Collate, LossHook, TrainStats
from baselines.optimizers.adamw import AdamW, AdamWOptions
from baselines.optimizers.state import import_state, save_into
from benchmark.model.device import autocast, check_precision

if TYPE_CHECKING:
    from datasets import Dataset

#: parameters -> a fresh optimiser.
OptimizerFactory = Callable[[Sequence[nn.Parameter]], torch.optim.Optimizer]
#: called with the trainable parameters after ``backward``, before the optimiser step.
StepHook = Callable[[Sequence[nn.Parameter]], None]


def clip_grad_norm(max_norm: float) -> StepHook:
    """A step hook that clips the gradients' global L2 norm to ``max_norm``.

    Args:
        max_norm: the bound (> 0).

    Returns:
        The hook.

    Raises:
        ValueError: for a bound <= 0.
    """
    return _clipping_hook("max_grad_norm", max_norm, torch.nn.utils.clip_grad_norm_)


def clip_grad_value(max_value: float) -> StepHook:
    """A step hook that clips every gradient entry to ``[-max_value, max_value]``.

    Element-wise clipping, as FedShampoo applies it (Zhang et al. 2020, "Why are Adaptive Methods
    Good for Attention Models?", https://arxiv.org/abs/1912.03194, on heavy-tailed gradient
    noise); unlike :func:`clip_grad_norm` it changes the gradient's direction.

    Args:
        max_value: the bound c (> 0).

    Returns:
        The hook.

    Raises:
        ValueError: for a bound <= 0.
    """
    return _clipping_hook("max_grad_value", max_value, torch.nn.utils.clip_grad_value_)


def _clipping_hook(
    name: str, bound: float, clip: Callable[[Sequence[nn.Parameter], float], Any]
) -> StepHook:
    """A step hook that applies ``clip(parameters, bound)``, the bound checked first."""
    if not bound > 0:
        raise ValueError(f"{name} must be > 0, got {bound}")

    def hook(parameters: Sequence[nn.Parameter]) -> None:
        clip(parameters, bound)

    return hook


def chain_step_hooks(*hooks: StepHook | None) -> StepHook | None:
    """One step hook that runs the given ones in order (``None`` entries skipped).

    Args:
        *hooks: step hooks or ``None``.

    Returns:
        The chained hook, the only one, or ``None`` when none is given.
    """
    present = [hook for hook in hooks if hook is not None]
    if len(present) <= 1:
        return present[0] if present else None

    def chained(parameters: Sequence[nn.Parameter]) -> None:
        for hook in present:
            hook(parameters)

    return chained


class LocalTrainer:
    """An optimiser over the trainable parameters for a number of local epochs.

    The optimiser is built anew at every call, as in the competition's reference code, so no
    optimiser state survives between rounds or leaks between clients (a method that wants it
    to keeps it in its per-client state).

    Args:
        collate: turns a list of dataset rows into model inputs with ``labels``.
        epochs: local epochs per round.
        batch_size: examples per step.
        optimizer: builds the optimiser from the trainable parameters (``None``: AdamW with
            ``lr`` and ``weight_decay``).
        lr: the default AdamW's learning rate (only without ``optimizer``).
        weight_decay: the default AdamW's weight decay (only without ``optimizer``).
        step_hook: run after ``backward`` and before each optimiser step (``None``: nothing).
        progress: show a progress bar per client.
        length_column: a dataset column with each row's input length; when given, every shuffled
            chunk of 32 batches is sorted by length before it is cut into batches, so batches
            hold rows of similar length and little padding is computed.
        precision: ``fp32``, or ``bf16`` autocast around the forward pass and loss.
        prefetch: collate the next batch in a background thread during the current step (the
            collate must draw no torch random numbers: ``FederatedTask.prefetch``).

    Raises:
        ValueError: for epochs or batch size < 1, a learning rate <= 0, both an optimiser and a
            learning rate, or an unknown precision.
    """

    def __init__(
        self,
        collate: Collate,
        *,
        epochs: int,
        batch_size: int,
        optimizer: OptimizerFactory | None = None,
        lr: float | None = None,
        weight_decay: float = 0.0,
        step_hook: StepHook | None = None,
        progress: bool = False,
        length_column: str | None = None,
        precision: str = "fp32",
        prefetch: bool = False,
    ) -> None:
        if epochs < 1 or batch_size < 1 or (lr is not None and not lr > 0):
            raise ValueError(
                f"local epochs ({epochs}) and batch size ({batch_size}) must be >= 1 and lr ({lr}) > 0"
            )
        if (optimizer is None) == (lr is None):
            raise ValueError(
                "give LocalTrainer either an optimizer factory or the default AdamW's lr, not both"
            )
        self.collate = collate
        self.epochs = epochs
        self.batch_size = batch_size
        self.optimizer = optimizer or AdamW(AdamWOptions(lr=lr, weight_decay=weight_decay))
        self.step_hook = step_hook
        self.progress = progress
        self.length_column = length_column
        check_precision(precision)
        self.precision = precision
        self.prefetch = prefetch
        self.description = ""

    def train(
        self,
        model: nn.Module,
        dataset: Dataset,
        *,
        seed: int,
        loss: LossHook | None = None,
        epochs: int | None = None,
        optimizer_state: dict[str, torch.Tensor] | None = None,
    ) -> TrainStats:
        """Train ``model`` in place on ``dataset``.

        Args:
            model: the model; only parameters with ``requires_grad`` are optimised.
            dataset: rows to train on.
            seed: seeds the shuffling and dropout, so a run is reproducible.
            loss: the loss of a batch from the model's outputs (``None``: ``outputs.loss``).
            epochs: epochs of this call (``None``: the trainer's local epochs).
            optimizer_state: a client's saved optimiser state (its ``optimizer/`` entries are
                loaded into the fresh optimiser and replaced by its state after training);
                ``None``: the optimiser starts fresh and its state is dropped.

        Returns:
            Statistics of the call.
        """
        from tqdm.auto import tqdm

        epochs = self.epochs if epochs is None else epochs
        start = time.perf_counter()
        params = [p for p in model.parameters() if p.requires_grad]
        optimizer = self.optimizer(params)
        if optimizer_state is not None:
            import_state(optimizer, optimizer_state)
        generator = torch.Generator().manual_seed(seed)
        torch.manual_seed(seed)
        n = len(dataset)
        steps_per_epoch = math.ceil(n / self.batch_size)
        model.train()
        total_loss = 0.0
        steps = 0
        bar = tqdm(
            total=steps_per_epoch * epochs,
            desc=self.description or "local training",
            leave=False,
            disable=not self.progress,
            unit="step",
        )
        lengths = dataset[self.length_column] if self.length_column else None
        device = next(model.parameters()).device
        for _ in range(epochs):
            batches = self._batches(n, lengths, generator)
            for batch in self._collated(dataset, batches):
                batch = {
                    key: value.to(device) if isinstance(value, torch.Tensor) else value
                    for key, value in batch.items()
                }
                with autocast(device, self.precision):
                    outputs = model(**batch)
                    value = outputs.loss if loss is None else loss(batch, outputs)
                optimizer.zero_grad(set_to_none=True)
                value.backward()
                if self.step_hook is not None:
                    self.step_hook(params)
                optimizer.step()
                total_loss += float(value.detach())
                steps += 1
                bar.update(1)
                bar.set_postfix(loss=f"{float(value.detach()):.3f}")
        bar.close()
        model.eval()
        if optimizer_state is not None:
            save_into(optimizer_state, optimizer)
        return TrainStats(
            steps=steps,
            examples=n * epochs,
            loss=total_loss / max(steps, 1),
            seconds=time.perf_counter() - start,
        )

    def _collated(
        self, dataset: Dataset, batches: list[list[int]]
    ) -> Iterator[dict[str, torch.Tensor]]:
        """The collated batches in order; with ``prefetch`` the next one is collated in a
        background thread while the caller trains on the current one."""
        if not self.prefetch or len(batches) < 2:
            for indices in batches:
                yield self._collate_rows(dataset, indices)
            return
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="collate") as pool:
            pending = pool.submit(self._collate_rows, dataset, batches[0])
            for following in [*batches[1:], None]:
                batch = pending.result()
                if following is not None:
                    pending = pool.submit(self._collate_rows, dataset, following)
                yield batch

    def _collate_rows(self, dataset: Dataset, indices: list[int]) -> dict[str, torch.Tensor]:
        """One batch of rows, collated."""
        return self.collate(list(dataset.select(indices)))

    def _batches(
        self, n: int, lengths: Sequence[int] | None, generator: torch.Generator
    ) -> list[list[int]]:
        """One epoch of shuffled batches (length-grouped within chunks when lengths are known)."""
        order = torch.randperm(n, generator=generator).tolist()
        size = self.batch_size
        if lengths is None:
            return [order[begin : begin + size] for begin in range(0, n, size)]
        chunk = size * 32
        batches: list[list[int]] = []
        for begin in range(0, n, chunk):
            part = sorted(order[begin : begin + chunk], key=lambda i: -lengths[i])
            batches.extend(part[b : b + size] for b in range(0, len(part), size))
        permutation = torch.randperm(len(batches), generator=generator).tolist()
        return [batches[i] for i in permutation]
