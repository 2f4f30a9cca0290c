"""Where the shipped pre-trained base model lives (a light module: no torch import)."""

from pathlib import Path

#: The shipped pre-trained tiny model (`pflkit pretrain --ship` writes it).
BASE_MODEL_DIR = Path(__file__).resolve().parent / "assets" / "base"
