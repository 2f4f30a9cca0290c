"""The T5 encoder at inference on a CPU: each question's attention over its own positions only.

`VT5ForConditionalGeneration._run_encoder` (training, teacher-forced passes, other devices)
gives a whole batch one attention call, with a (batch, heads, length, length) bias: the relative
position bias plus the padding mask. On a CPU that tensor is the largest one built per batch
(63 MB for 32 questions of 350 tokens), written once and read by every layer, and the attention
of padding positions is computed only to be masked out. Here each question attends over its own
positions with the position bias cut to its length (no padding mask to build). Everything else
works position by position, so it runs on `CHUNK_ROWS` positions of the batch at a time: the
attention output projection and residual, the feed-forward layer and the next layer's norm and
query/key/value projection (one matrix product), while that chunk is in the cache. Measured on
the `mini` val split: about a sixth less encoder time than the batched call, answers unchanged
(`bench.bench`); hidden states differ from the batched call's by float rounding only.

Same weights and operations as the stock T5 blocks (`transformers` `T5Block`), in eval mode: no
dropout, and no float16 clamping (the kit evaluates in float32 or under bfloat16 autocast,
which takes the batched path).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from benchmark.model.decoding import t5_layer_norm

#: positions per chunk: 512 x 512 float32 feed-forward activations are 1 MB
CHUNK_ROWS = 512


def relative_position_bias(attention: nn.Module, length: int, *, device: torch.device) -> torch.Tensor:
    """(1, heads, length, length) contiguous: `attention.compute_bias(length, length)`.

    The bias depends on key position minus query position only, so the buckets and the
    embedding are looked up for the 2 x length - 1 distances and spread over the square (the same
    values as `compute_bias`, which buckets all length x length pairs).
    """
    distances = torch.arange(-(length - 1), length, device=device)
    buckets = attention._relative_position_bucket(
        distances,
        bidirectional=not attention.is_decoder,
        num_buckets=attention.relative_attention_num_buckets,
        max_distance=attention.relative_attention_max_distance,
    )
    values = attention.relative_attention_bias(buckets).T  # (heads, distances)
    positions = torch.arange(length, device=device)
    index = positions[None, :] - positions[:, None] + (length - 1)  # key - query, shifted
    return values[:, index].unsqueeze(0)


def encode_each_at_its_length(encoder: nn.Module, embeds: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Output of a T5 encoder stack, each row's attention over its own (unpadded) positions.

    Args:
        encoder: the backbone's `T5Stack` encoder, in eval mode.
        embeds: (batch, positions, d_model) input embeddings, right-padded.
        mask: (batch, positions) 1 for real positions, 0 for padding (padding last in each row).

    Returns:
        (batch, positions, d_model) hidden states; the rows of padding positions are not those
        of the batched call (nothing attends to them: the decoder's cross-attention masks them).
    """
    batch, length, width = embeds.shape
    rows = batch * length
    lengths = mask.sum(dim=1).tolist()
    blocks = list(encoder.block)
    first = blocks[0].layer[0].SelfAttention
    heads, head_dim, inner = first.n_heads, first.key_value_proj_dim, first.inner_dim
    bias = relative_position_bias(first, length, device=embeds.device).to(embeds.dtype)
    source = embeds.reshape(rows, width)
    hidden = embeds.new_empty(rows, width)
    projection = _projection(blocks[0])
    qkv = torch.cat([
        F.linear(t5_layer_norm(blocks[0].layer[0].layer_norm, part), projection)
        for part in source.split(CHUNK_ROWS)
    ])  # fmt: skip
    attended = embeds.new_empty(batch, length, inner)
    for row, n in enumerate(lengths):
        attended[row, n:] = 0.0  # padding positions: never written below
    for index, block in enumerate(blocks):
        query, key, value = qkv.view(batch, length, 3, heads, head_dim).permute(2, 0, 3, 1, 4)
        for row, n in enumerate(lengths):
            out = F.scaled_dot_product_attention(
                query[row : row + 1, :, :n],
                key[row : row + 1, :, :n],
                value[row : row + 1, :, :n],
                attn_mask=bias[:, :, :n, :n],
                scale=1.0,  # T5 does not scale its attention scores
            )
            attended[row, :n] = out[0].transpose(0, 1).reshape(n, inner)
        output = block.layer[0].SelfAttention.o
        following = blocks[index + 1] if index + 1 < len(blocks) else None
        # one layer's fused projection at a time (all of them at once: 85 MB for VT5-base)
        projection = None if following is None else _projection(following)
        for start in range(0, rows, CHUNK_ROWS):
            part = slice(start, start + CHUNK_ROWS)
            states = (source if index == 0 else hidden)[part]
            states = states + output(attended.view(rows, inner)[part])
            states = _feed_forward(block.layer[-1], states)
            if following is None:
                hidden[part] = t5_layer_norm(encoder.final_layer_norm, states)
            else:
                hidden[part] = states
                normed = t5_layer_norm(following.layer[0].layer_norm, states)
                qkv[part] = F.linear(normed, projection)
    return hidden.view(batch, length, width)


def _projection(block: nn.Module) -> torch.Tensor:
    """A block's query, key and value weights as one (3 x inner, d_model) matrix."""
    attention = block.layer[0].SelfAttention
    return torch.cat([attention.q.weight, attention.k.weight, attention.v.weight])


def _feed_forward(layer: nn.Module, states: torch.Tensor) -> torch.Tensor:
    """`T5LayerFF` (norm, feed-forward, residual) at inference; ReLU applied in place."""
    dense = layer.DenseReluDense
    if not (hasattr(dense, "wi") and isinstance(dense.act, nn.ReLU)):
        return layer(states)
    inner = torch.relu_(dense.wi(t5_layer_norm(layer.layer_norm, states)))
    return states + dense.wo(inner)
