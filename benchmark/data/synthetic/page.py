"""A page being laid out: words with their boxes, plus the shapes drawn around them.

Layout and rendering are separate: laying out a page only measures text (so records can be
produced without images), `render` draws exactly what was laid out. Every word's box comes from
the same font metrics the renderer uses, so OCR tokens, boxes and pixels agree.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from functools import cache, lru_cache

import numpy as np
from PIL import Image, ImageDraw, ImageFont

PAGE_WIDTH = 600
PAGE_HEIGHT = 848  # A4 aspect ratio (1 : 1.414)
JPEG_QUALITY = 75
INK = (25, 25, 30)


@cache
def font(size: int) -> ImageFont.FreeTypeFont:
    """The font shipped inside Pillow (Aileron Regular) at `size` px, identical on every machine."""
    loaded = ImageFont.load_default(size=size)
    if not isinstance(loaded, ImageFont.FreeTypeFont):
        raise RuntimeError(
            "Pillow was built without FreeType, so its scalable default font is missing; "
            "install the official Pillow wheel (pip install --force-reinstall pillow)."
        )
    return ImageFont.truetype(
        io.BytesIO(loaded.font_bytes), size, layout_engine=ImageFont.Layout.BASIC
    )


@cache
def _glyph(size: int, char: str) -> tuple[Image.Image | None, tuple[int, int], float]:
    """Cached glyph of `char` at `size` px: its ink mask, the mask's offset from the pen, the advance.

    Pages are drawn by pasting cached glyphs (FreeType rasterises each glyph once per size instead
    of once per call), and laid out with the same advances, so boxes and pixels agree exactly.
    """
    face = font(size)
    advance = face.getlength(char)
    left, top, right, bottom = face.getbbox(char)
    if char.isspace() or right <= left or bottom <= top:
        return None, (0, 0), advance
    mask = Image.new("L", (right - left, bottom - top), 0)
    ImageDraw.Draw(mask).text((-left, -top), char, font=face, fill=255)
    return mask, (left, top), advance


@lru_cache(maxsize=200_000)
def _advance(size: int, text: str) -> float:
    """Horizontal advance of `text` at `size` px (sum of its glyphs' advances)."""
    return sum(_glyph(size, char)[2] for char in text)


@cache
def _ink_rows(size: int) -> tuple[int, int]:
    """Top and bottom ink offsets of a line of text (ascender to descender) at `size` px."""
    _, top, _, bottom = font(size).getbbox("AHbdfhklgjpqy|")
    return top, bottom


def text_width(text: str, size: int) -> float:
    """Width in pixels of `text` drawn at `size` px, as `Page.text` lays it out."""
    words = text.split()
    if not words:
        return 0.0
    return sum(_advance(size, w) for w in words) + _advance(size, " ") * (len(words) - 1)


@dataclass
class Word:
    """One OCR token with its pixel box."""

    text: str
    x0: float
    y0: float
    x1: float
    y1: float


@dataclass
class _Run:
    """A line of words drawn with one call."""

    x: float
    y: float
    text: str
    size: int
    bold: bool
    colour: tuple[int, int, int]


@dataclass
class Page:
    """A page under construction: call the drawing methods, then `tokens`/`boxes`/`render`."""

    width: int = PAGE_WIDTH
    height: int = PAGE_HEIGHT
    words: list[Word] = field(default_factory=list)
    _runs: list[_Run] = field(default_factory=list)
    _shapes: list[tuple] = field(default_factory=list)

    def text(
        self,
        x: float,
        y: float,
        text: str,
        size: int = 11,
        *,
        bold: bool = False,
        align: str = "left",
        colour: tuple[int, int, int] = INK,
    ) -> tuple[float, float]:
        """Lay out one line of text; `x` is its left, right or centre edge per `align`.

        Returns:
            The left and right pixel edges of the line.

        Raises:
            ValueError: when the text is not ASCII (the shipped font has no other glyphs) or
                does not fit on the page.
        """
        if not text.isascii():
            raise ValueError(
                f"text {text!r} is not ASCII: the font shipped with Pillow only has ASCII glyphs"
            )
        words = text.split()
        width = text_width(text, size)
        left = {"left": x, "right": x - width, "center": x - width / 2}[align]
        if left < 0 or left + width + 1 > self.width or y < 0 or y + size * 1.3 > self.height:
            raise ValueError(
                f"text {text!r} at ({left:.0f}, {y:.0f}) size {size} does not fit on the page"
            )
        top, bottom = _ink_rows(size)
        extra = 1 if bold else 0  # bold text is drawn twice, one pixel apart
        space = _advance(size, " ")
        cursor = left
        for word in words:
            advance = _advance(size, word)
            self.words.append(Word(word, cursor, y + top, cursor + advance + extra, y + bottom))
            cursor += advance + space
        self._runs.append(_Run(left, y, " ".join(words), size, bold, colour))
        return left, left + width

    def line(
        self, x0: float, y0: float, x1: float, y1: float, colour=(120, 120, 120), width: int = 1
    ) -> None:
        """Draw a straight rule."""
        self._shapes.append(("line", (x0, y0, x1, y1), colour, width))

    def rectangle(self, box: tuple[float, float, float, float], fill=None, outline=None) -> None:
        """Draw a rectangle (a filled band or a frame)."""
        self._shapes.append(("rectangle", box, fill, outline))

    def ellipse(self, box: tuple[float, float, float, float], fill) -> None:
        """Draw a filled ellipse."""
        self._shapes.append(("ellipse", box, fill))

    def polygon(self, points: list[tuple[float, float]], fill) -> None:
        """Draw a filled polygon."""
        self._shapes.append(("polygon", points, fill))

    def tokens(self) -> list[str]:
        """OCR tokens in reading order (the order they were laid out)."""
        return [w.text for w in self.words]

    def boxes(self) -> np.ndarray:
        """Normalised boxes (N x 4, float32, x0 y0 x1 y1 in [0, 1])."""
        if not self.words:
            return np.zeros((0, 4), dtype=np.float32)
        pixels = np.array([(w.x0, w.y0, w.x1, w.y1) for w in self.words], dtype=np.float64)
        pixels /= np.array([self.width, self.height, self.width, self.height], dtype=np.float64)
        return np.clip(pixels, 0.0, 1.0).astype(np.float32)

    def render(self) -> Image.Image:
        """Draw the page (shapes first, then text) as an RGB image."""
        image = Image.new("RGB", (self.width, self.height), (255, 255, 255))
        draw = ImageDraw.Draw(image)
        for shape in self._shapes:
            kind = shape[0]
            if kind == "line":
                draw.line(shape[1], fill=shape[2], width=shape[3])
            elif kind == "rectangle":
                draw.rectangle(shape[1], fill=shape[2], outline=shape[3])
            elif kind == "ellipse":
                draw.ellipse(shape[1], fill=shape[2])
            else:
                draw.polygon(shape[1], fill=shape[2])
        for run in self._runs:
            for shift in (0, 1) if run.bold else (0,):  # bold: the run drawn twice, one pixel apart
                pen = run.x + shift
                for char in run.text:
                    mask, (left, top), advance = _glyph(run.size, char)
                    if mask is not None:
                        image.paste(run.colour, (round(pen + left), round(run.y + top)), mask)
                    pen += advance
        return image


def encode_jpeg(image: Image.Image) -> bytes:
    """JPEG bytes with fixed settings (quality, subsampling, no metadata): same image, same bytes."""
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=JPEG_QUALITY, subsampling=2, optimize=False)
    return buffer.getvalue()


def draw_logo(
    page: Page, x: float, y: float, size: float, style: int, colour: tuple[int, int, int]
) -> None:
    """Draw a provider's simple logo (a few geometric shapes) with its top-left at (x, y)."""
    light = tuple(min(255, c + 90) for c in colour)
    if style == 0:
        page.ellipse((x, y, x + size, y + size), fill=colour)
        page.ellipse(
            (x + size * 0.3, y + size * 0.3, x + size * 0.7, y + size * 0.7), fill=(255, 255, 255)
        )
    elif style == 1:
        page.rectangle((x, y, x + size, y + size), fill=colour)
        page.polygon([(x, y + size), (x + size, y), (x + size, y + size)], fill=light)
    elif style == 2:
        page.polygon([(x + size / 2, y), (x + size, y + size), (x, y + size)], fill=colour)
    elif style == 3:
        third = size / 3
        for i in range(3):
            page.rectangle(
                (x + i * third, y + size - (i + 1) * third, x + (i + 1) * third - 2, y + size),
                fill=colour,
            )
    else:
        page.polygon(
            [
                (x + size / 2, y),
                (x + size, y + size / 2),
                (x + size / 2, y + size),
                (x, y + size / 2),
            ],
            fill=colour,
        )
        page.ellipse(
            (x + size * 0.35, y + size * 0.35, x + size * 0.65, y + size * 0.65), fill=light
        )
