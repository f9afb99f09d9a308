"""Readable tables for a terminal, and JSON for scripts (`--json`). Hand-written: a
dozen lines, where a table library would be a dependency for one function; the width of
text on a terminal is `wcwidth`'s (a Chinese character takes two columns, a combining
mark none), so Chinese identities and text keep the columns in line. Stored text is
shown with its control characters made visible (`memory/ops/printable.py`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from wcwidth import wcswidth

from memory.ops.printable import printable, terminal_json


def columns(text: str) -> int:
    """How many terminal columns `text` takes (printable text: `cell` escaped the rest)."""
    width = wcswidth(text)
    return width if width >= 0 else len(text)


def cell(value: Any, width: int = 60) -> str:
    """A value as a table shows it, at most `width` columns."""
    if value is None:
        return "-"
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M")
    text = printable(" ".join(str(value).split()))
    if columns(text) <= width:
        return text
    text = text[: width - 1]  # no character takes fewer than one column but a combining mark
    while columns(text) > width - 1:
        text = text[:-1]
    return text + "…"


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], *, width: int = 60) -> str:
    shown = [[cell(v, width) for v in row] for row in rows]
    widths = [max([columns(h), *(columns(r[i]) for r in shown)]) for i, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v + " " * (w - columns(v)) for v, w in zip(values, widths, strict=True)).rstrip()

    out = [line(headers), line(["-" * w for w in widths]), *(line(r) for r in shown)]
    return "\n".join(out)


def to_json(doc: Any) -> str:
    return terminal_json(doc, indent=2, default=_default)


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if hasattr(value, "_asdict"):
        return value._asdict()
    return str(value)
