"""The two VT5 input embeddings besides the T5 token embedding: OCR boxes and the page image.

Module and parameter names follow the public VT5 checkpoint (`x_position_embeddings`,
`y_position_embeddings`, `LayerNorm`, `spatial_emb_matcher.layers.0`, `image_model`,
`visual_emb_matcher.layers.0`) so that its state dict loads without renaming.
"""

from __future__ import annotations

import torch
from torch import nn
from transformers import BeitModel

from benchmark.model.configuration_vt5 import VT5Config


class Projection(nn.Module):
    """One `Linear` kept inside a `layers` list, the layout of the reference's one-layer MLP."""

    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(in_features, out_features)])

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """Apply the linear map."""
        return self.layers[0](hidden_states)


class SpatialEmbeddings(nn.Module):
    """Box embedding: x table(x0) + y table(y0) + x table(x1) + y table(y1), LayerNorm, Linear.

    Boxes are integer bucket ids in `[0, max_2d_position_embeddings)` (see `VT5Config.box_scale`).
    """

    def __init__(self, config: VT5Config) -> None:
        super().__init__()
        dim = config.spatial_dim
        self.x_position_embeddings = nn.Embedding(config.max_2d_position_embeddings, dim)
        self.y_position_embeddings = nn.Embedding(config.max_2d_position_embeddings, dim)
        self.LayerNorm = nn.LayerNorm(dim, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.spatial_emb_matcher = Projection(dim, config.d_model)

    def forward(self, boxes: torch.Tensor) -> torch.Tensor:
        """Embed boxes of shape (batch, tokens, 4) into (batch, tokens, d_model)."""
        embeddings = (
            self.x_position_embeddings(boxes[..., 0])
            + self.y_position_embeddings(boxes[..., 1])
            + self.x_position_embeddings(boxes[..., 2])
            + self.y_position_embeddings(boxes[..., 3])
        )
        embeddings = self.dropout(self.LayerNorm(embeddings))
        return self.spatial_emb_matcher(embeddings)


class VisualEmbeddings(nn.Module):
    """Page image to visual tokens: a BEiT (DiT) encoder, then a Linear to the T5 width."""

    def __init__(self, config: VT5Config) -> None:
        super().__init__()
        beit_config = config.beit_config
        self.image_model = BeitModel(beit_config)
        self.visual_emb_matcher = Projection(beit_config.hidden_size, config.d_model)

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """Encode (images, 3, H, W) pixels into (images, patches + 1, d_model) tokens."""
        hidden = self.image_model(pixel_values=pixel_values).last_hidden_state
        return self.visual_emb_matcher(hidden)
