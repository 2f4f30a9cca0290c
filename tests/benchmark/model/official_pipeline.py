"""The official starter kit's evaluation pipeline, restated step by step for the equivalence test.

Written from reading rubenpt91/PFL-DocVQA-Competition (`datasets/PFL_DocVQA.py`, `models/VT5.py`,
`models/_modules.py`, `eval.py`); none of its code is copied or imported. It shares nothing with
the kit's input construction, model classes or decoding:

- records are read from the `.npy` as the official dataset class reads them (OCR words and the
  answer string lower-cased, the question as it is, boxes as stored);
- tokens come from SentencePiece directly, as transformers' slow `T5Tokenizer` produced them
  (special-token strings split out first, each chunk encoded with SentencePiece, `extra_ids`
  100 sentinels after the pieces, `<extra_id_0>` last);
- the input: the prompt `question: {q}  context: ` without EOS (box 0,0,1000,1000), each word's
  tokens with its box, cut to 511 tokens, EOS with box 0,0,0,0; boxes written into an int64
  tensor from float64, which truncates;
- the page: the BEiT image processor of the DiT directory, the BEiT encoder loaded from it;
- the encoder input: T5 token embedding + spatial embedding (x/y tables summed over the four
  coordinates, LayerNorm eps 1e-12, Linear), then the projected visual tokens, mask all ones;
- the answer: the T5 backbone's own `generate` with transformers' defaults (greedy, max_length
  20), decoded with special tokens skipped;
- training (`train.py`'s `fl_train`, `build_utils.build_optimizer`): labels are the lower-cased
  answer's ids and EOS, never truncated; the loss is the T5 backbone's on the encoder input;
  `lm_head` is a parameter of its own (the public `HF_VT5` never re-ties its inner T5 after
  loading); torch's `AdamW` with its default weight decay 0.01 over every parameter, the frozen
  DiT encoder included (it gets no gradient, so no step).
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import torch

PROMPT = "question: {:s}  context: "
PROMPT_BOX = [0, 0, 1000, 1000]
EOS_BOX = [0, 0, 0, 0]
MAX_INPUT_TOKENS = 512
EXTRA_IDS = 100


class OfficialTokenizer:
    """The slow `T5Tokenizer` on top of SentencePiece: `<pad>` 0, `</s>` 1, `<unk>` 2."""

    def __init__(self, spiece_model: Path) -> None:
        import sentencepiece as spm

        self.sp = spm.SentencePieceProcessor(model_file=str(spiece_model))
        pieces = self.sp.get_piece_size()
        self.special = {"<pad>": 0, "</s>": 1, "<unk>": 2}
        self.special.update(
            {f"<extra_id_{i}>": pieces + EXTRA_IDS - 1 - i for i in range(EXTRA_IDS)}
        )
        self._split = re.compile("(" + "|".join(map(re.escape, self.special)) + ")")

    def ids(self, text: str) -> list[int]:
        """Token ids of a text without EOS (what `tokenizer(text).input_ids[:-1]` gave)."""
        ids: list[int] = []
        chunks = [chunk for chunk in self._split.split(text) if chunk]
        for position, chunk in enumerate(chunks):
            if chunk in self.special:
                ids.append(self.special[chunk])
                continue
            # the slow tokenizer strips whitespace next to a special token
            if position > 0 and chunks[position - 1] in self.special:
                chunk = chunk.lstrip()
            if position + 1 < len(chunks) and chunks[position + 1] in self.special:
                chunk = chunk.rstrip()
            if chunk:
                ids.extend(self.sp.encode(chunk))
        return ids

    def decode(self, ids: list[int]) -> str:
        """`batch_decode(..., skip_special_tokens=True)` of one sequence."""
        special = set(self.special.values())
        return self.sp.decode([i for i in ids if i not in special])


class OfficialVT5(torch.nn.Module):
    """The public `HF_VT5`'s trained parts, under the public state dict's names.

    `language_backbone` is a transformers T5 whose `lm_head` is made a parameter of its own
    before loading (the public `HF_VT5` never re-ties it), `spatial_embedding` the x/y tables,
    LayerNorm and matcher, `visual_embedding` the DiT encoder (frozen, as the public
    `VisualEmbeddings(finetune=False)`) and its matcher.
    """

    def __init__(self, public_dir: Path, dit_dir: Path) -> None:
        from transformers import BeitModel, T5Config, T5ForConditionalGeneration

        super().__init__()
        state = torch.load(public_dir / "pytorch_model.bin", weights_only=True)
        t5 = T5ForConditionalGeneration(T5Config.from_pretrained(str(public_dir)))
        t5.lm_head.weight = torch.nn.Parameter(t5.lm_head.weight.detach().clone())
        self.language_backbone = t5
        config = t5.config
        width = config.d_model
        self.spatial_embedding = torch.nn.Module()
        self.spatial_embedding.x_position_embeddings = torch.nn.Embedding(1024, width)
        self.spatial_embedding.y_position_embeddings = torch.nn.Embedding(1024, width)
        self.spatial_embedding.LayerNorm = torch.nn.LayerNorm(width, eps=1e-12)
        self.spatial_embedding.spatial_emb_matcher = torch.nn.Module()
        self.spatial_embedding.spatial_emb_matcher.layers = torch.nn.ModuleList(
            [torch.nn.Linear(width, width)])
        self.visual_embedding = torch.nn.Module()
        self.visual_embedding.image_model = BeitModel.from_pretrained(str(dit_dir))
        hidden = self.visual_embedding.image_model.config.hidden_size
        self.visual_embedding.visual_emb_matcher = torch.nn.Module()
        self.visual_embedding.visual_emb_matcher.layers = torch.nn.ModuleList(
            [torch.nn.Linear(hidden, hidden)])
        ours = {k: v for k, v in state.items()
                if not k.startswith("visual_embedding.image_model.")}
        missing, unexpected = self.load_state_dict(ours, strict=False)
        missing = [k for k in missing if not k.startswith("visual_embedding.image_model.")]
        assert not unexpected and not missing, (missing, unexpected)
        for parameter in self.visual_embedding.image_model.parameters():
            parameter.requires_grad = False

    def spatial(self, boxes: torch.Tensor) -> torch.Tensor:
        """`SpatialEmbeddings.forward`: x/y tables summed over the four coordinates."""
        module = self.spatial_embedding
        summed = (module.x_position_embeddings(boxes[:, :, 0])
                  + module.y_position_embeddings(boxes[:, :, 1])
                  + module.x_position_embeddings(boxes[:, :, 2])
                  + module.y_position_embeddings(boxes[:, :, 3]))
        return module.spatial_emb_matcher.layers[0](module.LayerNorm(summed))

    def embed(self, ids: torch.Tensor, boxes: torch.Tensor,
              pixels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """`prepare_inputs_for_vqa`'s encoder input and mask (batch size 1)."""
        semantic = self.language_backbone.shared(ids)
        visual = self.visual_embedding.image_model(pixels).last_hidden_state
        visual = self.visual_embedding.visual_emb_matcher.layers[0](visual)
        embeds = torch.cat([semantic + self.spatial(boxes), visual], dim=1)
        return embeds, torch.ones(embeds.shape[:2], dtype=torch.long, device=embeds.device)


class OfficialPipeline:
    """The public VT5 code's forward pass and generation on a public-layout checkpoint.

    Args:
        public_dir: `config.json` (T5), `pytorch_model.bin`, `spiece.model`.
        dit_dir: the DiT directory the public code loads (`config.json`,
            `preprocessor_config.json`, weights).
    """

    def __init__(self, public_dir: Path, dit_dir: Path) -> None:
        from transformers import BeitImageProcessorPil

        self.tokenizer = OfficialTokenizer(public_dir / "spiece.model")
        self.model = OfficialVT5(public_dir, dit_dir).eval()
        self.t5 = self.model.language_backbone
        self.image_processor = BeitImageProcessorPil.from_pretrained(str(dit_dir))

    @staticmethod
    def read_records(npy_path: Path, images_dir: Path) -> list[dict]:
        """Records as the official `PFL_DocVQA.__getitem__` returns them."""
        data = np.load(npy_path, allow_pickle=True)
        samples = []
        for idx, record in enumerate(data[1:]):
            samples.append({
                "question_id": record.get("question_id", f"{record['set_name']}-{idx}"),
                "question": record["question"],
                "answers": [record["answers"].lower()],
                "words": [word.lower() for word in record["ocr_tokens"]],
                "boxes": np.array([box for box in record["ocr_normalized_boxes"]]),
                "image": images_dir / f"{record['image_name']}.jpg",
            })
        return samples

    def tensors(self, sample: dict) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Token ids, boxes and page pixels of one sample (batch size 1)."""
        from PIL import Image

        input_ids = self.tokenizer.ids(PROMPT.format(sample["question"]))
        input_boxes = [PROMPT_BOX] * len(input_ids)
        for word, box in zip(sample["words"], sample["boxes"], strict=True):
            word_ids = self.tokenizer.ids(word)
            input_ids.extend(word_ids)
            input_boxes.extend([box] * len(word_ids))
        input_ids = input_ids[: MAX_INPUT_TOKENS - 1] + [1]
        boxes = np.concatenate([np.array(input_boxes[: MAX_INPUT_TOKENS - 1]).reshape(-1, 4),
                                np.array([EOS_BOX])])
        ids_tensor = torch.tensor([input_ids], dtype=torch.long)
        boxes_tensor = torch.zeros([1, len(input_ids), 4], dtype=torch.long)
        boxes_tensor[0, : len(boxes)] = torch.from_numpy(boxes)
        image = Image.open(sample["image"]).convert("RGB")
        pixels = self.image_processor(images=[image], return_tensors="pt").pixel_values
        return ids_tensor, boxes_tensor, pixels

    @property
    def device(self) -> torch.device:
        """Where the model's parameters are (the inputs are moved there)."""
        return next(self.model.parameters()).device

    def inputs(self, sample: dict) -> tuple[torch.Tensor, torch.Tensor]:
        """Encoder input embeddings and attention mask of one sample (batch size 1)."""
        with torch.no_grad():
            return self.model.embed(*self.tensors(sample))

    def labels(self, sample: dict) -> torch.Tensor:
        """`prepare_inputs_for_vqa`'s labels: the (only) answer's ids and EOS, untruncated."""
        return torch.tensor([self.tokenizer.ids(sample["answers"][0]) + [1]], dtype=torch.long)

    def loss(self, sample: dict) -> torch.Tensor:
        """`VT5.forward`'s training loss of one sample, with gradients."""
        dtype = next(self.model.parameters()).dtype
        embeds, mask = self.model.embed(*(t.to(self.device, dtype) if t.is_floating_point()
                                          else t.to(self.device) for t in self.tensors(sample)))  # fmt: skip
        return self.model.language_backbone(inputs_embeds=embeds, attention_mask=mask,
                                            labels=self.labels(sample).to(self.device)).loss

    def train_steps(self, samples: list[dict], *, lr: float) -> list[float]:
        """`fl_train`'s local loop on one provider: `build_optimizer`'s AdamW (torch's default
        weight decay 0.01) over every parameter, one step per sample (batch size 1)."""
        self.model.train()
        self.model.zero_grad(set_to_none=True)
        optimizer = torch.optim.AdamW(self.model.parameters(), lr=lr)
        losses = []
        for sample in samples:
            loss = self.loss(sample)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            losses.append(float(loss.detach()))
        return losses

    def answer(self, sample: dict) -> tuple[str, torch.Tensor]:
        """The official answer string and the first decoding step's logits."""
        embeds, mask = self.inputs(sample)
        with torch.no_grad():
            output = self.t5.generate(
                inputs_embeds=embeds, attention_mask=mask, max_length=20, num_beams=1,
                do_sample=False, output_logits=True, return_dict_in_generate=True,
            )
        return self.tokenizer.decode(output.sequences[0].tolist()), output.logits[0][0]
