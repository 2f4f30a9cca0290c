"""One hand-made invoice line for the FSP tests: its OCR words and their boxes (x0, y0, x1, y1)."""

WORDS = ["Invoice", "No", "42", "Total", "9.50", "EUR"]
BOXES = [(0.10, 0.05, 0.30, 0.08), (0.32, 0.05, 0.36, 0.08), (0.38, 0.05, 0.42, 0.08),
         (0.10, 0.90, 0.20, 0.93), (0.70, 0.90, 0.80, 0.93), (0.82, 0.90, 0.90, 0.93)]  # fmt: skip
