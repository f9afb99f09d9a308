"""A bar chart as SVG geometry, drawn by the page's template: no script, nothing to load.
Hand-written: a dozen lines of arithmetic, where a charting library would bring
JavaScript the page's Content-Security-Policy forbids."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

WIDTH = 600
HEIGHT = 90
GAP = 2


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    value: int
    label: str


def bars(points: Sequence[tuple[str, int]], *, width: int = WIDTH, height: int = HEIGHT) -> list[Bar]:
    """One bar per (label, value), left to right, scaled to the largest value (a zero is a
    1-pixel line, so an empty day still shows as a day)."""
    if not points:
        return []
    top = max(v for _, v in points) or 1
    step = width / len(points)
    out = []
    for i, (label, value) in enumerate(points):
        h = max(1.0, height * value / top)
        out.append(Bar(round(i * step, 2), round(height - h, 2), round(max(step - GAP, 1.0), 2), round(h, 2),
                       value, label))  # fmt: skip
    return out
