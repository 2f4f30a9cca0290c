"""The method interface: what a client trains and what it sends.

A method prepares the model once (which parameters are trainable, hence communicated; adapters
such as LoRA), computes a client's update from a :class:`~baselines.client_job.ClientJob`, and turns
the trained model back into the base architecture for the submission. Methods and strategies are
separate axes: any method runs under any strategy, and wrappers (a DP update rule, for instance)
can hold an inner method and override only :meth:`Method.compute_update`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any

from torch import nn

from baselines.client_job import ClientJob, ClientUpdate, local_training_update

if TYPE_CHECKING:
    from baselines.config import TrainConfig
    from baselines.task import FederatedTask


class Method(ABC):
    """Base class of client methods."""

    name: str = ""
    #: prefix that :meth:`prepare` adds to parameter names (stripped in messages).
    prefix: str = ""

    @classmethod
    @abstractmethod
    def from_config(cls, config: TrainConfig) -> Method:
        """Build the method from a run's configuration."""

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
