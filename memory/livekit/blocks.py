"""The memory block a reply's request carries: one quoted JSON line per memory, with
its kind, the day it was said where the user lives and the days its relative dates name,
bounded in characters.
"""

from __future__ import annotations

from datetime import UTC, tzinfo

from memory.language.quoting import quote
from memory.types import MemoryRecord, parse_time


def _local_date(stamp: str | None, zone: tzinfo) -> str:
    """The day a memory was said, where the user lives (a morning in Beijing is the day
    before in UTC)."""
    when = parse_time(stamp)
    if when is None:
        return (stamp or "")[:10]
    return when.astimezone(zone).date().isoformat()


def _about(rec: MemoryRecord) -> str:
    days = rec.metadata.get("dates")
    if not isinstance(days, list):
        return ""
    return "; ".join(str(d) for d in days[:3] if isinstance(d, str))[:80]


def _memory_line(rec: MemoryRecord, line_max: int | None = None, zone: tzinfo = UTC) -> str:
    """One memory as a line of a block: quoted JSON (`memory/language/quoting.py`), which stored
    text cannot close or imitate; with `line_max`, its text is cut to fit."""
    fields: dict[str, str] = {}
    if said := _local_date(rec.updated_at or rec.created_at, zone):
        fields["said"] = said
    if rec.category:
        fields["kind"] = rec.category
    if days := _about(rec):
        # The days its "yesterday", "next week", 上周五 name, resolved when it was stored
        # (memory/language/indexing.py): the model cannot tell from "said" alone.
        fields["about"] = days
    text = " ".join(rec.text.split())
    line = quote({**fields, "note": text})
    if line_max is not None and len(line) > line_max:
        # The longest start of the text that fits once quoted (an escape is 6 characters).
        lo, hi = 0, len(text)
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if len(quote({**fields, "note": text[:mid] + "…"})) <= line_max:
                lo = mid
            else:
                hi = mid - 1
        cut = text[:lo]
        space = cut.rfind(" ", len(cut) - 30)  # between words where there are any
        line = quote({**fields, "note": (cut[:space] if space > 0 else cut).rstrip() + "…"})
    return line


def fit_memories(records: list[MemoryRecord], max_chars: int, *, line_max: int | None = None) -> list[MemoryRecord]:
    """The records whose lines fit in `max_chars`, in order; one too long is passed over,
    not the end of the list. With `line_max`, each line is first cut to that length."""
    kept, used = [], 0
    for rec in records:
        size = len(_memory_line(rec, line_max)) + 1
        if used + size - 1 <= max_chars:
            kept.append(rec)
            used += size
    return kept


def fit_recalled(records: list[MemoryRecord], max_chars: int) -> tuple[list[MemoryRecord], int | None]:
    """The recalled memories a reply's block shows, and the line length they are cut to
    (None: shown whole). Whole when they all fit; else each line is cut to a third of the
    block, so one long turn leaves room for others, and what still does not fit is left out."""
    if fit_memories(records, max_chars) == records:
        return records, None
    line_max = (max_chars - 2) // 3
    return fit_memories(records, max_chars, line_max=line_max), line_max


def format_memories(
    records: list[MemoryRecord],
    *,
    max_chars: int | None = None,
    line_max: int | None = None,
    zone: tzinfo = UTC,
) -> str:
    """One memory a line, with its category and date (in `zone`), bounded in length."""
    shown = records if max_chars is None else fit_memories(records, max_chars, line_max=line_max)
    return "\n".join(_memory_line(rec, line_max, zone) for rec in shown)
