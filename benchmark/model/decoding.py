"""One-token-at-a-time T5 decoding with plain key/value tensors, for greedy answers.

`VT5ForConditionalGeneration.generate` feeds the decoder one token per step. Through the
transformers T5 stack each such step rebuilds masks, goes through the cache classes and calls
SDPA's flash kernel, whose set-up dominates the cost of a single query (measured: 1.9 ms against
0.6 ms for the plain matrix products, for 32 answers over 460 encoder positions). This decoder
uses the backbone's own modules (layer norms, projections, feed-forward layers, lm head) and
does the attention of the single new query as two matrix products; the cross-attention keys and
values are computed once per batch. (transformers' T5 block also clamps float16 activations;
that is not repeated here, as the kit evaluates in float32.)
"""

from __future__ import annotations

import torch
from torch import nn


def _split_heads(states: torch.Tensor, head_dim: int) -> torch.Tensor:
    """(batch, positions, heads x head_dim) to (batch, heads, positions, head_dim)."""
    batch, positions, _ = states.shape
    return states.view(batch, positions, -1, head_dim).transpose(1, 2)


def _attend(query: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """T5 attention (no 1/sqrt(d) scaling) of one query position; returns (batch, 1, inner)."""
    scores = torch.matmul(query, keys.transpose(-1, -2)) + bias
    weights = torch.softmax(scores.float(), dim=-1).type_as(scores)
    attended = torch.matmul(weights, values)
    return attended.transpose(1, 2).reshape(query.shape[0], 1, -1)


class CachedT5Decoder:
    """The T5 decoder of a backbone, stepped one token at a time over fixed encoder states.

    Args:
        backbone: a `T5ForConditionalGeneration` (the VT5 language backbone), in eval mode.
        states: (batch, positions, d_model) encoder output.
        mask: (batch, positions) 1 for real encoder positions, 0 for padding.
    """

    def __init__(self, backbone: nn.Module, states: torch.Tensor, mask: torch.Tensor) -> None:
        self.backbone = backbone
        self.decoder = backbone.decoder
        self.head_dim = backbone.config.d_kv
        dtype = states.dtype
        self.cross_bias = (1.0 - mask[:, None, None, :].to(dtype)) * torch.finfo(dtype).min
        self.cross_keys, self.cross_values = [], []
        for block in self.decoder.block:
            attention = block.layer[1].EncDecAttention
            self.cross_keys.append(_split_heads(attention.k(states), self.head_dim))
            self.cross_values.append(_split_heads(attention.v(states), self.head_dim))
        self.self_keys: list[torch.Tensor | None] = [None] * len(self.decoder.block)
        self.self_values: list[torch.Tensor | None] = [None] * len(self.decoder.block)
        self.steps = 0

    def step(self, token_ids: torch.Tensor) -> torch.Tensor:
        """Logits (batch, vocabulary) of the next token after `token_ids` (batch, 1)."""
        decoder = self.decoder
        position_bias = decoder.block[0].layer[0].SelfAttention.compute_bias(
            1, self.steps + 1, device=token_ids.device, past_seen_tokens=self.steps
        )
        hidden = decoder.dropout(decoder.embed_tokens(token_ids))
        position_bias = position_bias.to(hidden.dtype)
        for index, block in enumerate(decoder.block):
            self_layer, cross_layer, feed_forward = block.layer
            hidden = hidden + self_layer.dropout(self._self_attention(index, self_layer, hidden, position_bias))
            attention = cross_layer.EncDecAttention
            query = _split_heads(attention.q(cross_layer.layer_norm(hidden)), self.head_dim)
            attended = _attend(query, self.cross_keys[index], self.cross_values[index], self.cross_bias)
            hidden = hidden + cross_layer.dropout(attention.o(attended))
            hidden = feed_forward(hidden)
        hidden = decoder.dropout(decoder.final_layer_norm(hidden))
        if self.backbone.config.scale_decoder_outputs:
            hidden = hidden * (self.backbone.config.d_model**-0.5)
        self.steps += 1
        return self.backbone.lm_head(hidden)[:, -1, :]

    def _self_attention(
        self, index: int, layer: nn.Module, hidden: torch.Tensor, position_bias: torch.Tensor
    ) -> torch.Tensor:
        """Causal self-attention of the new position over every earlier one (cached)."""
        attention = layer.SelfAttention
        normed = layer.layer_norm(hidden)
        query = _split_heads(attention.q(normed), self.head_dim)
        key = _split_heads(attention.k(normed), self.head_dim)
        value = _split_heads(attention.v(normed), self.head_dim)
        if self.self_keys[index] is not None:
            key = torch.cat([self.self_keys[index], key], dim=2)
            value = torch.cat([self.self_values[index], value], dim=2)
        self.self_keys[index], self.self_values[index] = key, value
        return attention.o(_attend(query, key, value, position_bias))

    def keep(self, rows: torch.Tensor) -> None:
        """Continue with these rows of the batch only (the others have finished)."""
        self.cross_bias = self.cross_bias[rows]
        self.cross_keys = [keys[rows] for keys in self.cross_keys]
        self.cross_values = [values[rows] for values in self.cross_values]
        self.self_keys = [keys[rows] for keys in self.self_keys]
        self.self_values = [values[rows] for values in self.self_values]
