"""Readable tables for a terminal, and JSON for scripts (`--json`). Hand-written: a
dozen lines, where a table library would be a dependency for one function. Stored text
is shown with its control characters made visible (`memory/ops/printable.py`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from memory.ops.printable import printable, terminal_json


def cell(value: Any, width: int = 60) -> str:
    if value is None:
        return "-"
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M")
    text = printable(" ".join(str(value).split()))
    return text if len(text) <= width else text[: width - 1] + "…"


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]], *, width: int = 60) -> str:
    shown = [[cell(v, width) for v in row] for row in rows]
    widths = [max([len(h), *(len(r[i]) for r in shown)]) for i, h in enumerate(headers)]
    line = lambda vals: "  ".join(v.ljust(w) for v, w in zip(vals, widths, strict=True)).rstrip()  # noqa: E731 - a one-line helper
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
