"""One-token-at-a-time T5 decoding with plain tensors, for greedy answers.

`VT5ForConditionalGeneration.generate` feeds the decoder one token per step. Through the
transformers T5 stack each such step rebuilds masks, goes through the cache classes and calls
SDPA's flash kernel, whose set-up dominates the cost of a single query (measured: 1.9 ms against
0.6 ms for the plain matrix products, for 32 answers over 460 encoder positions). This decoder
uses the backbone's own weights (layer norms, projections, feed-forward layers, lm head) and
does the attention of the single new query as matrix products.

The cross-attention never computes the encoder positions' keys and values. With `S` the encoder
states and `W_k`, `W_v` a head's key and value projections, the query's scores are
`q S W_k^T`, computed as `(q W_k) S^T`, and its attention output `p S W_v^T` as `(p S) W_v^T`:
the same products in another order (float rounding aside), and each step reads `S` itself
instead of each layer's keys and values. Answers are a few tokens long while the encoder has
hundreds of positions, so projecting all of them for every layer cost more than these steps
(the keys and values of 32 questions: 35 MB, written per batch and copied whenever answers
ended). A step is about 100 torch calls, a cost of its own for a model this small, so each layer
norm is one call (`t5_layer_norm`), the self-attention projections one matrix product and its
position bias prepared once. (transformers' T5 block also clamps float16 activations and applies
dropout; neither is repeated here: the kit decodes in eval mode, in float32 or under bfloat16
autocast.)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def _split_heads(states: torch.Tensor, head_dim: int) -> torch.Tensor:
    """(batch, positions, heads x head_dim) to (batch, heads, positions, head_dim)."""
    batch, positions, _ = states.shape
    return states.view(batch, positions, -1, head_dim).transpose(1, 2)


def t5_layer_norm(layer: nn.Module, hidden: torch.Tensor) -> torch.Tensor:
    """A `T5LayerNorm` as one `F.rms_norm` call in float32 (the same values), else the module."""
    if hidden.dtype == torch.float32 and layer.weight.dtype == torch.float32:
        return F.rms_norm(hidden, layer.weight.shape, layer.weight, layer.variance_epsilon)
    return layer(hidden)


def _attend(
    query: torch.Tensor, keys_t: torch.Tensor, values: torch.Tensor, bias: torch.Tensor
) -> torch.Tensor:
    """T5 attention (no 1/sqrt(d) scaling) of one query position; returns (batch, 1, inner).

    `keys_t` is (batch, heads, head_dim, positions) and `values` (batch, heads, positions,
    head_dim).
    """
    scores = torch.matmul(query, keys_t) + bias
    if scores.dtype == torch.float32:
        weights = torch.softmax(scores, dim=-1)
    else:
        weights = torch.softmax(scores.float(), dim=-1).type_as(scores)
    attended = torch.matmul(weights, values)
    return attended.transpose(1, 2).reshape(query.shape[0], 1, -1)


class CachedT5Decoder:
    """The T5 decoder of a backbone, stepped one token at a time over fixed encoder states.

    Args:
        backbone: a `T5ForConditionalGeneration` (the VT5 language backbone), in eval mode.
        states: (batch, positions, d_model) encoder output.
        mask: (batch, positions) 1 for real encoder positions, 0 for padding.
        max_steps: most steps that will be taken (the self-attention position bias of each is
            prepared at once).
    """

    def __init__(
        self, backbone: nn.Module, states: torch.Tensor, mask: torch.Tensor, max_steps: int = 32
    ) -> None:
        self.backbone = backbone
        self.decoder = backbone.decoder
        self.head_dim = backbone.config.d_kv
        self.output_scale = (
            backbone.config.d_model**-0.5 if backbone.config.scale_decoder_outputs else None
        )
        dtype = states.dtype
        self.cross_bias = (1.0 - mask[:, None, :].to(dtype)) * torch.finfo(dtype).min
        device_type = states.device.type
        if torch.is_autocast_enabled(device_type):  # cast once, not in each step's products
            states = states.to(torch.get_autocast_dtype(device_type))
        self.states = states
        self.key_weights, self.value_weights, self.self_projections = [], [], []
        for block in self.decoder.block:
            attention = block.layer[1].EncDecAttention
            heads = attention.n_heads
            # (heads, head_dim, d_model) and (heads, d_model, head_dim)
            self.key_weights.append(attention.k.weight.view(heads, self.head_dim, -1))
            self.value_weights.append(attention.v.weight.view(heads, self.head_dim, -1).transpose(1, 2))
            own = block.layer[0].SelfAttention
            self.self_projections.append(torch.cat([own.q.weight, own.k.weight, own.v.weight]))
        self.self_keys: list[torch.Tensor | None] = [None] * len(self.decoder.block)
        self.self_values: list[torch.Tensor | None] = [None] * len(self.decoder.block)
        # row s, columns 0..s: the bias of step s's query over the positions it sees, which is
        # what compute_bias(1, s + 1, past_seen_tokens=s) returns
        self.position_bias = self.decoder.block[0].layer[0].SelfAttention.compute_bias(
            max_steps, max_steps, device=states.device
        )
        self.steps = 0

    def step(self, token_ids: torch.Tensor) -> torch.Tensor:
        """Logits (batch, vocabulary) of the next token after `token_ids` (batch, 1)."""
        decoder = self.decoder
        if self.steps >= self.position_bias.shape[2]:
            self.position_bias = decoder.block[0].layer[0].SelfAttention.compute_bias(
                2 * self.steps, 2 * self.steps, device=token_ids.device
            )
        hidden = decoder.embed_tokens(token_ids)
        position_bias = self.position_bias[:, :, self.steps : self.steps + 1, : self.steps + 1]
        position_bias = position_bias.to(hidden.dtype)
        for index, block in enumerate(decoder.block):
            self_layer, cross_layer, feed_forward = block.layer
            hidden = hidden + self._self_attention(index, self_layer, hidden, position_bias)
            hidden = hidden + self._cross_attention(index, cross_layer, hidden)
            dense = feed_forward.DenseReluDense
            if hasattr(dense, "wi") and isinstance(dense.act, nn.ReLU):
                inner = torch.relu_(dense.wi(t5_layer_norm(feed_forward.layer_norm, hidden)))
                hidden = hidden + dense.wo(inner)
            else:
                hidden = feed_forward(hidden)
        hidden = t5_layer_norm(decoder.final_layer_norm, hidden)
        if self.output_scale is not None:
            hidden = hidden * self.output_scale
        self.steps += 1
        return self.backbone.lm_head(hidden)[:, -1, :]

    def _self_attention(
        self, index: int, layer: nn.Module, hidden: torch.Tensor, position_bias: torch.Tensor
    ) -> torch.Tensor:
        """Causal self-attention of the new position over every earlier one (cached)."""
        attention = layer.SelfAttention
        projected = F.linear(t5_layer_norm(layer.layer_norm, hidden), self.self_projections[index])
        query, key, value = (
            _split_heads(part, self.head_dim) for part in projected.split(attention.inner_dim, dim=-1)
        )
        if self.self_keys[index] is not None:
            key = torch.cat([self.self_keys[index], key], dim=2)
            value = torch.cat([self.self_values[index], value], dim=2)
        self.self_keys[index], self.self_values[index] = key, value
        # a contiguous key cache, transposed, is multiplied as it is (no copy)
        return attention.o(_attend(query, key.transpose(-1, -2), value, position_bias))

    def _cross_attention(self, index: int, layer: nn.Module, hidden: torch.Tensor) -> torch.Tensor:
        """Attention of the new position over the encoder states, keys and values folded in."""
        attention = layer.EncDecAttention
        batch = hidden.shape[0]
        query = attention.q(t5_layer_norm(layer.layer_norm, hidden))
        query = query.view(batch, -1, self.head_dim).transpose(0, 1)  # (heads, batch, head_dim)
        query = torch.bmm(query, self.key_weights[index]).transpose(0, 1)  # (batch, heads, d_model)
        scores = torch.bmm(query, self.states.transpose(1, 2)) + self.cross_bias
        if scores.dtype == torch.float32:
            weights = torch.softmax(scores, dim=-1)
        else:
            weights = torch.softmax(scores.float(), dim=-1).type_as(scores)
        mixed = torch.bmm(weights, self.states).transpose(0, 1)  # (heads, batch, d_model)
        values = torch.bmm(mixed, self.value_weights[index]).transpose(0, 1)  # (batch, heads, head_dim)
        return attention.o(values.reshape(batch, 1, -1))

    def keep(self, rows: torch.Tensor) -> None:
        """Continue with these rows of the batch only (the others have finished)."""
        self.cross_bias = self.cross_bias[rows]
        self.states = self.states[rows]
        self.self_keys = [keys[rows] for keys in self.self_keys]
        self.self_values = [values[rows] for values in self.self_values]
