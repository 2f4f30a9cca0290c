"""The method interface: what a client trains and what it sends.

A method prepares the model once (which parameters are trainable, hence communicated; adapters such
as LoRA), computes a client's update from a `ClientJob` (`baselines.core.client_job`), and turns
the trained model back into the base architecture for the submission. Methods and strategies are
separate axes: any method runs under any strategy, and wrappers (a DP update rule, for instance)
can hold an inner method and override only [Method.compute_update][].

A method owns its options (``option_classes``, see `baselines.options`) and may declare
presets (``presets``); every module of `baselines.methods` is discovered, so a new method is
one new file. Its hooks into the client loop are [Method.local_loss][] (a proximal or
distillation term), per-client state (``ClientJob.state``, saved with the run for ``--resume``),
[Method.personalise][] (local work of every client after the last round, e.g. fine-tuning)
and [Method.personal_model][] (what a client's final model is). A method with
``personal = True`` makes a track-3 run: its personal models are written as
``personal/client_{k}.safetensors`` beside the global checkpoint.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import nn

from baselines.core.client_job import ClientJob, local_training_update
from baselines.core.client_update import ClientUpdate

if TYPE_CHECKING:
    from baselines.core.task import FederatedTask


@dataclass(frozen=True)
class RunShape:
    """What a method may need to know about the run when it is built.

    Attributes:
        rounds: federated rounds.
        clients_per_round: M.
    """

    rounds: int
    clients_per_round: int


class Method(ABC):
    """Base class of client methods."""

    name: ClassVar[str] = ""
    prefix: str = ""
    """Prefix that [prepare][] adds to parameter names (stripped in messages)."""
    private: ClassVar[bool] = False
    """The method protects providers: the run writes ``privacy.json`` and belongs to track 2."""
    personal: ClassVar[bool] = False
    """Each client ends with a model of its own: the run writes ``personal/`` (track 3)."""
    option_classes: ClassVar[tuple[type, ...]] = ()
    """The options dataclasses of the method (see `baselines.options`)."""
    presets: ClassVar[dict[str, dict[str, Any]]] = {}
    """Presets the method brings (name -> preset data, as in `baselines.presets`; the key
    ``extends`` names a preset whose data this one starts from).
    """

    @classmethod
    @abstractmethod
    def from_options(cls, options: Mapping[str, Any], *, run: RunShape) -> Method:
        """Build the method from its options.

        Args:
            options: option key -> value (only the keys of ``option_classes`` are read; rebuild
                each options object with `baselines.options.build_options`).
            run: rounds and clients per round.

        Returns:
            The method.

        Raises:
            ValueError: naming the invalid option.
        """

    @abstractmethod
    def prepare(self, model: nn.Module, *, seed: int) -> nn.Module:
        """Make the model trainable the way the method declares.

        Args:
            model: the pre-trained base model (modified in place where possible).
            seed: the run's shared seed (adapters are initialised from it, so every party builds
                the same adapters without any download or message).

        Returns:
            The model clients train; parameters with ``requires_grad`` are communicated.

        Raises:
            ValueError: when the declaration matches nothing in the model.
        """

    def compute_update(self, job: ClientJob) -> ClientUpdate:
        """What a client computes and sends in a round (default: local training, the delta).

        Args:
            job: the client's job, starting weights loaded.

        Returns:
            The update to send.
        """
        return local_training_update(job)

    def local_loss(self, job: ClientJob, batch: Mapping[str, Any], outputs: Any) -> torch.Tensor:
        """The loss a client minimises on one batch (default: the model's own loss).

        A method adds a proximal or distillation term here; it may read the round's starting
        weights (``job.start_weights``) and its own state for the client (``job.state``).

        Args:
            job: the client's job.
            batch: the model inputs with ``labels``.
            outputs: what ``job.model(**batch)`` returned.

        Returns:
            A scalar to backpropagate.
        """
        del job, batch
        return outputs.loss

    def personalises(self) -> bool:
        """Whether every client runs [personalise][] after the last round (default: no).

        The engine then sends the final global model to each client (logged as round R + 1;
        after 0 rounds the clients start from the base they hold, and nothing is sent), calls
        [personalise][] and keeps the client's state; nothing is sent back.
        """
        return False

    def personalise(self, job: ClientJob) -> None:
        """A client's local work after the last round (fine-tuning, say), kept in ``job.state``.

        Args:
            job: the client's job, the final global weights loaded (``job.start_weights``).
        """
        del job
        raise NotImplementedError(f"method {self.name!r} does not personalise")

    def personal_model(self, model: nn.Module, state: Mapping[str, torch.Tensor]) -> nn.Module:
        """A client's final personal model (default: the global model, unchanged).

        Called by `baselines.engine.simulation.FederatedSimulation.personal_model` with the global
        weights loaded; a personalised method applies the client's saved state (a local adapter,
        a head) to a copy.

        Args:
            model: the prepared model with the final global weights.
            state: the client's state as the method left it (empty when the client kept none).

        Returns:
            The module to evaluate for that client.
        """
        del state
        return model

    def inference_model(self, model: nn.Module) -> nn.Module:
        """The module to evaluate (with adapters active); the prepared model by default."""
        return model

    def export(self, model: nn.Module) -> nn.Module:
        """The base architecture with everything trained folded in (called once, at the end)."""
        return model

    def describe(self) -> dict[str, Any]:
        """The method's options, for ``config.json`` and ``submission.json``."""
        return {"name": self.name}

    def bind(self, task: FederatedTask) -> None:
        """Check the method against the federation before any training (default: nothing).

        Called once by the engine; a DP method reads the clients' providers and calibrates
        its noise here.

        Args:
            task: the model family and the clients' data.

        Raises:
            ValueError: when the data does not suit the method.
        """
        del task

    def privacy_declaration(self) -> dict[str, Any] | None:
        """The run's ``privacy.json`` (docs/design.md) for a DP method; ``None`` otherwise."""
        return None


def match_prefixes(model: nn.Module, prefixes: tuple[str, ...]) -> dict[str, int]:
    """Count the parameters whose name starts with each prefix.

    Args:
        model: the model.
        prefixes: parameter-name prefixes.

    Returns:
        Prefix -> number of matching parameter tensors.
    """
    counts = dict.fromkeys(prefixes, 0)
    for name, _ in model.named_parameters(remove_duplicate=False):
        for prefix in prefixes:
            if name.startswith(prefix):
                counts[prefix] += 1
    return counts
