"""`VT5ForConditionalGeneration`: T5 with spatial and visual input embeddings, in transformers.

Architecture of VT5 (Tito et al., "Hierarchical multimodal transformers for Multi-Page DocVQA",
Pattern Recognition 2023), the baseline model of PFL-DocVQA (Tito et al., NeurIPS 2023
competition): the encoder input is `shared(input_ids) + spatial(boxes)` for the text tokens,
concatenated with the projected DiT patch tokens of the page image; decoding is greedy.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import PreTrainedModel, T5ForConditionalGeneration
from transformers.modeling_outputs import BaseModelOutput, Seq2SeqLMOutput

from benchmark.model.configuration_vt5 import VT5Config
from benchmark.model.decoding import CachedT5Decoder
from benchmark.model.embeddings import SpatialEmbeddings, VisualEmbeddings
from benchmark.model.encoding import encode_each_at_its_length


class UntiedHeadT5(T5ForConditionalGeneration):
    """T5 whose `lm_head` is a parameter of its own, as in the public VT5 code.

    The public code's `HF_VT5` is a `PreTrainedModel` holding a `T5ForConditionalGeneration`;
    transformers 4.27 leaves the inner model's tying to `from_pretrained`, which ties only the
    outer model (it has no output embeddings). So `lm_head` is loaded from the checkpoint and
    trained apart from `shared`, while the encoder's and decoder's `embed_tokens` stay the
    `shared` module and the decoder output keeps T5's `d_model ** -0.5` scaling (its config
    says `tie_word_embeddings`). Only the `lm_head` entry leaves the tying map.
    """

    _tied_weights_keys = {
        "encoder.embed_tokens.weight": "shared.weight",
        "decoder.embed_tokens.weight": "shared.weight",
    }


def language_backbone_class(config: VT5Config) -> type[T5ForConditionalGeneration]:
    """The T5 class of a configuration: tied `lm_head` (the kit's models) or its own."""
    return T5ForConditionalGeneration if config.tie_lm_head else UntiedHeadT5


class VT5PreTrainedModel(PreTrainedModel):
    """Weight initialisation and loading glue shared by the VT5 classes."""

    config_class = VT5Config
    base_model_prefix = "vt5"
    main_input_name = "input_ids"
    supports_gradient_checkpointing = True
    _no_split_modules = ["T5Block", "BeitLayer"]

    @torch.no_grad()
    def _init_weights(self, module: nn.Module) -> None:
        """Initialise the VT5-specific modules; the sub-models initialise their own."""
        if isinstance(module, SpatialEmbeddings):
            for table in (module.x_position_embeddings, module.y_position_embeddings):
                nn.init.normal_(table.weight, mean=0.0, std=0.02)
            nn.init.ones_(module.LayerNorm.weight)
            nn.init.zeros_(module.LayerNorm.bias)
            _init_linear(module.spatial_emb_matcher.layers[0])
        elif isinstance(module, VisualEmbeddings):
            _init_linear(module.visual_emb_matcher.layers[0])


def _pack_visual_tokens(
    text: torch.Tensor, text_mask: torch.Tensor, visual: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Place each row's visual tokens right after its own text tokens, padding last.

    T5's relative position bias makes the encoder depend on where the visual tokens sit; packing
    them after the real text tokens (text must be right-padded) makes every question's encoding
    independent of how much padding its batch needs.
    """
    batch, text_len, _ = text.shape
    n_visual = visual.shape[1]
    lengths = text_mask.sum(dim=1, keepdim=True)
    if bool((lengths == text_len).all()):
        mask = torch.cat([text_mask, text_mask.new_ones(batch, n_visual)], dim=1)
        return torch.cat([text, visual], dim=1), mask
    positions = torch.arange(text_len + n_visual, device=text.device).expand(batch, -1)
    # source index of each output slot in cat([text, visual]): text, then visual, then padding
    source = torch.where(
        positions < lengths,
        positions,
        torch.where(positions < lengths + n_visual, positions - lengths + text_len, positions - n_visual),
    )
    embeds = torch.cat([text, visual], dim=1)
    embeds = embeds.gather(1, source[..., None].expand(-1, -1, embeds.shape[-1]))
    mask = (positions < lengths + n_visual).to(text_mask.dtype)
    return embeds, mask


def _init_linear(linear: nn.Linear) -> None:
    """LeCun-normal weights (std = fan_in ** -0.5), zero bias."""
    nn.init.normal_(linear.weight, mean=0.0, std=linear.in_features**-0.5)
    nn.init.zeros_(linear.bias)


class VT5ForConditionalGeneration(VT5PreTrainedModel):
    """VT5 for Document VQA: answer generation conditioned on question, OCR layout and image.

    Submodules (their names are the state-dict prefixes of the public checkpoint):
    `language_backbone` (`T5ForConditionalGeneration`), `spatial_embedding` (`SpatialEmbeddings`)
    and `visual_embedding` (`VisualEmbeddings`: `image_model` + `visual_emb_matcher`).

    Args:
        config: the model configuration.
    """

    def __init__(self, config: VT5Config) -> None:
        super().__init__(config)
        self.language_backbone = language_backbone_class(config)(config.t5_config)
        self.spatial_embedding = SpatialEmbeddings(config)
        self.visual_embedding = VisualEmbeddings(config)
        self.post_init()
        if not config.tie_lm_head:
            # a fresh untied head starts as the embedding, so it computes what a tied one would
            with torch.no_grad():
                self.language_backbone.lm_head.weight.copy_(self.language_backbone.shared.weight)

    def get_input_embeddings(self) -> nn.Embedding:
        """The shared T5 token embedding."""
        return self.language_backbone.get_input_embeddings()

    def enable_gradient_checkpointing(self) -> None:
        """Recompute every T5 and DiT block's activations in the backward pass instead of
        keeping them: memory for about a third more compute. The encoder loop of `encode`
        calls the T5 blocks directly, which checkpoint themselves (transformers'
        `GradientCheckpointingLayer`); the random state of dropout is replayed, so the loss and
        gradients are those of the plain pass."""
        self.activation_checkpointing_enable({"use_reentrant": False})

    def freeze_visual_encoder(self) -> None:
        """Stop gradients through the image encoder (kept frozen in the baselines)."""
        for parameter in self.visual_embedding.image_model.parameters():
            parameter.requires_grad = False

    def embed(
        self,
        input_ids: torch.Tensor,
        boxes: torch.Tensor,
        attention_mask: torch.Tensor,
        pixel_values: torch.Tensor | None = None,
        visual_embeds: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Build the encoder input: token + box embeddings, then the visual tokens.

        Each row's visual tokens follow its own text tokens and the padding comes last, so a
        question's encoding does not depend on its batch (see `_pack_visual_tokens`).

        Args:
            input_ids: (batch, tokens) token ids.
            boxes: (batch, tokens, 4) integer box bucket ids.
            attention_mask: (batch, tokens) 1 for real tokens, 0 for padding (right-padded).
            pixel_values: (batch, 3, H, W) page images; used when `config.use_visual`.
            visual_embeds: (batch, visual tokens, d_model) output of `embed_images`, to reuse
                visual tokens computed once per page instead of `pixel_values`.

        Returns:
            The encoder input embeddings and their attention mask.

        Raises:
            ValueError: if the model uses the image and neither image input is given.
        """
        embeds = self.language_backbone.shared(input_ids) + self.spatial_embedding(boxes)
        if not self.config.use_visual:
            return embeds, attention_mask
        if visual_embeds is None:
            if pixel_values is None:
                raise ValueError(
                    "this VT5 uses the page image (config.use_visual): pass pixel_values or "
                    "visual_embeds"
                )
            visual_embeds = self.embed_images(pixel_values)
        return _pack_visual_tokens(embeds, attention_mask, visual_embeds.to(embeds.dtype))

    def embed_images(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """Visual tokens (images, patches + 1, d_model) of (images, 3, H, W) pixels."""
        return self.visual_embedding(pixel_values)

    def encode(
        self,
        input_ids: torch.Tensor,
        boxes: torch.Tensor,
        attention_mask: torch.Tensor,
        pixel_values: torch.Tensor | None = None,
        visual_embeds: torch.Tensor | None = None,
    ) -> tuple[BaseModelOutput, torch.Tensor]:
        """Run the T5 encoder on the VT5 input; returns its output and the full attention mask."""
        embeds, mask = self.embed(input_ids, boxes, attention_mask, pixel_values, visual_embeds)
        return BaseModelOutput(last_hidden_state=self._run_encoder(embeds, mask)), mask

    def _run_encoder(self, embeds: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The T5 encoder stack with the padding mask folded into the position bias once.

        Same computation as `T5Stack.forward` for an encoder, but transformers would combine
        the (batch, heads, length, length) bias and mask again in every layer; here the sum is
        built once and shared by all layers (masked scores get the most negative float, so their
        attention weight is exactly 0, as in the stock path).
        """
        encoder = self.language_backbone.encoder
        length = embeds.shape[1]
        attention = encoder.block[0].layer[0].SelfAttention
        # compute_bias returns a permuted view: made contiguous before the broadcast sum, the
        # (batch, heads, length, length) result is written once in the layout SDPA needs
        bias = attention.compute_bias(length, length, device=embeds.device).to(embeds.dtype)
        padding = (1.0 - mask[:, None, None, :].to(embeds.dtype)) * torch.finfo(embeds.dtype).min
        bias = bias.contiguous() + padding
        hidden = encoder.dropout(embeds)
        for block in encoder.block:
            hidden = block(hidden, None, bias)[0]
        return encoder.dropout(encoder.final_layer_norm(hidden))

    def forward(
        self,
        input_ids: torch.Tensor,
        boxes: torch.Tensor,
        attention_mask: torch.Tensor,
        pixel_values: torch.Tensor | None = None,
        visual_embeds: torch.Tensor | None = None,
        labels: torch.Tensor | None = None,
        decoder_input_ids: torch.Tensor | None = None,
        decoder_attention_mask: torch.Tensor | None = None,
        use_cache: bool | None = None,
    ) -> Seq2SeqLMOutput:
        """Teacher-forced pass; returns the cross-entropy loss when `labels` are given.

        Args:
            input_ids: (batch, tokens) token ids.
            boxes: (batch, tokens, 4) integer box bucket ids.
            attention_mask: (batch, tokens) 1 for real tokens.
            pixel_values: (batch, 3, H, W) page images.
            visual_embeds: precomputed visual tokens instead of `pixel_values`.
            labels: (batch, answer tokens) target ids, -100 where ignored.
            decoder_input_ids: decoder input; by default `labels` shifted right, or the decoder
                start token alone when there are no labels.
            decoder_attention_mask: mask of the decoder input.
            use_cache: return the decoder's key/value cache.

        Returns:
            The backbone's `Seq2SeqLMOutput` (loss, logits, encoder state).
        """
        encoder_outputs, mask = self.encode(
            input_ids, boxes, attention_mask, pixel_values, visual_embeds
        )
        if labels is None and decoder_input_ids is None:
            decoder_input_ids = input_ids.new_full(
                (input_ids.shape[0], 1), self.language_backbone.config.decoder_start_token_id
            )
        return self.language_backbone(
            encoder_outputs=encoder_outputs,
            attention_mask=mask,
            labels=labels,
            decoder_input_ids=decoder_input_ids,
            decoder_attention_mask=decoder_attention_mask,
            use_cache=use_cache,
        )

    @torch.no_grad()
    def generate(
        self,
        input_ids: torch.Tensor,
        boxes: torch.Tensor,
        attention_mask: torch.Tensor,
        pixel_values: torch.Tensor | None = None,
        visual_embeds: torch.Tensor | None = None,
        max_new_tokens: int | None = None,
    ) -> torch.Tensor:
        """Greedy decoding with a key/value cache; finished answers leave the batch.

        Produces the tokens of the backbone's `generate(num_beams=1, do_sample=False)` on the
        same encoder input (up to float rounding: the single-query attention is matrix products
        here, SDPA's flash kernel there), without its per-step overhead
        (`benchmark.model.decoding`). Once a quarter of the rows have produced EOS, the rows that
        ended leave the decoder batch. On a CPU in float32 (no autocast) the encoder attends
        over each question's own positions only (`benchmark.model.encoding`).

        Args:
            input_ids: (batch, tokens) token ids.
            boxes: (batch, tokens, 4) integer box bucket ids.
            attention_mask: (batch, tokens) 1 for real tokens.
            pixel_values: (batch, 3, H, W) page images.
            visual_embeds: precomputed visual tokens instead of `pixel_values`.
            max_new_tokens: bound on generated tokens (EOS included); default
                `config.max_answer_tokens`.

        Returns:
            (batch, generated) token ids without the decoder start token, padded after EOS.
        """
        limit = max_new_tokens or self.config.max_answer_tokens
        embeds, mask = self.embed(input_ids, boxes, attention_mask, pixel_values, visual_embeds)
        if embeds.device.type == "cpu" and not torch.is_autocast_enabled("cpu") and not self.training:
            states = encode_each_at_its_length(self.language_backbone.encoder, embeds, mask)
        else:
            states = self._run_encoder(embeds, mask)
        t5 = self.language_backbone.config
        batch = input_ids.shape[0]
        answers = input_ids.new_full((batch, limit), t5.pad_token_id)
        decoder = CachedT5Decoder(self.language_backbone, states, mask, max_steps=limit)
        # the decoder holds the states it needs (and drops finished rows' ones): the encoder's
        # input and whole output are not kept through the decoding (issue 47, peak memory)
        del embeds, states
        active = torch.arange(batch, device=input_ids.device)  # the answer of each decoder row
        running = torch.ones(batch, dtype=torch.bool, device=input_ids.device)
        step_ids = input_ids.new_full((batch, 1), t5.decoder_start_token_id)
        steps = 0
        for step in range(limit):
            next_ids = decoder.step(step_ids).argmax(dim=-1)
            answers[active[running], step] = next_ids[running]
            steps = step + 1
            running &= next_ids != t5.eos_token_id
            left = int(running.sum())
            if left == 0:
                break
            if 4 * left <= 3 * len(active):
                # a quarter of the rows have ended: they leave the batch, later steps compute
                # the others only (rows that ended run on until then, their tokens unused)
                keep = running.nonzero().squeeze(1)
                active, next_ids, running = active[keep], next_ids[keep], running[keep]
                decoder.keep(keep)
            step_ids = next_ids[:, None]
        return answers[:, :steps]
