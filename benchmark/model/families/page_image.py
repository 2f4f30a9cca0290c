"""A benchmark page as an RGB image, for the families that turn pages into inputs themselves.

VT5 normalises its pages into a tensor of its own (``VT5Processor.load_image``); the OCR-free
families (Pix2Struct, SmolVLM) hand the page to transformers' image processors, which read PIL
images.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def open_page(image: Any) -> Any:
    """A page (a path or a PIL image) as an RGB PIL image.

    Raises:
        FileNotFoundError: naming a path that holds no file.
    """
    from PIL import Image

    if isinstance(image, (str, Path)):
        path = Path(image)
        if not path.is_file():
            raise FileNotFoundError(f"{path}: page image not found")
        with Image.open(path) as opened:
            return opened.convert("RGB")
    return image.convert("RGB")
