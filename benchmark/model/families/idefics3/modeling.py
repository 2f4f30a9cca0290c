"""Idefics3 as the kit's loops call it: ``generate`` returns the answer ids only.

transformers' ``Idefics3ForConditionalGeneration`` is decoder-only, so its ``generate`` returns
the prompt (the image tokens and the question) followed by the answer; the kit's evaluation loop
hands ``generate``'s ids straight to ``processor.decode``, as it does for the encoder-decoder
families. The subclass here drops the prompt and fills in what a kit checkpoint leaves to its
configuration (the end-of-answer token, the padding token, the answer bound), so that a
checkpoint directory without ``generation_config.json`` generates the same answers. Everything
else, the weights' names included, is transformers' class: ``model_type`` stays ``idefics3``.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import Idefics3ForConditionalGeneration

#: Answer tokens generated when neither the call nor the configuration bounds them.
DEFAULT_MAX_ANSWER_TOKENS = 20


class Idefics3ForDocumentVQA(Idefics3ForConditionalGeneration):
    """``Idefics3ForConditionalGeneration`` whose ``generate`` returns only the new tokens."""

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        # transformers picks the loss by class name; this one's no longer says "causal LM"
        self.loss_type = "ForCausalLM"

    def generate(  # type: ignore[override]
        self,
        input_ids: torch.Tensor | None = None,
        max_new_tokens: int | None = None,
        **kwargs: Any,
    ) -> Any:
        """Greedy answers to left-padded prompts, without the prompt.

        Args:
            input_ids: (batch, prompt length) left-padded prompts (required: the prompt length
                is what is cut off).
            max_new_tokens: bound on answer tokens (default: the configuration's
                ``max_answer_tokens``).
            **kwargs: ``attention_mask``, ``pixel_values``, ``pixel_attention_mask`` and any
                option of transformers' ``generate``.

        Returns:
            (batch, answer length) ids, or transformers' output object with its ``sequences``
            cut the same way when ``return_dict_in_generate`` is asked for.

        Raises:
            ValueError: without ``input_ids``.
        """
        if input_ids is None:
            raise ValueError("Idefics3ForDocumentVQA.generate needs input_ids (the prompts)")
        text = self.config.text_config
        kwargs.setdefault("eos_token_id", text.eos_token_id)
        kwargs.setdefault("pad_token_id", text.pad_token_id)
        kwargs.setdefault("do_sample", False)
        if max_new_tokens is None:
            max_new_tokens = getattr(self.config, "max_answer_tokens", DEFAULT_MAX_ANSWER_TOKENS)
        output = super().generate(input_ids=input_ids, max_new_tokens=max_new_tokens, **kwargs)
        prompt_length = input_ids.shape[1]
        if isinstance(output, torch.Tensor):
            return output[:, prompt_length:]
        output.sequences = output.sequences[:, prompt_length:]
        return output
