"""GATED's facts over time: which value of a fact a question about the past asks for.

A fact that changed is kept as a line of values (its lineage: the row that holds the
slot now, and the values it replaced, each with the span it held: `valid_from`,
`valid_until`; memory/storage/store.py). A question about the past (`asks_about_past`:
"before", "used to", "last year", 之前, 以前, 去年) searches them all; this module then
puts, in each lineage among the candidates, the value for the question's time first,
with the score of the lineage's best match (the lineage is what the question is about;
which of its values answers it is a matter of time, not of words):

- a question that names past days ("last year", 去年, "in 2024"): the value whose span
  overlaps them most;
- "before X" (搬到上海之前): the value that held just before the one the question names
  (the lineage's best lexical match);
- otherwise ("used to", 以前): the latest value that no longer holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from typing import Any, Protocol

from memory.language import dates
from memory.language.validity import asks_before

__all__ = ["Held", "for_its_time", "held"]

# How far above its lineage's best score the value for the question's time is put.
_LIFT = 1e-6


class Ranked(Protocol):
    """What this module reads of a retrieval candidate (`retriever.Candidate`)."""

    id: str
    payload: dict[str, Any]
    score: float
    lexical: float


class Held:
    """The span a fact held: from `start` (None: not known) to `end` (None: it holds now)."""

    __slots__ = ("end", "start")

    def __init__(self, start: date | None, end: date | None) -> None:
        self.start, self.end = start, end

    def overlap(self, span: dates.Span, today: date) -> int:
        """Days of `span` (both ends in) that fall in this one."""
        lo = max(self.start or span.start, span.start)
        hi = min(self.end or today, span.end)
        return (hi - lo).days + 1 if hi >= lo else 0


def _day(value: object) -> date | None:
    try:
        return date.fromisoformat(str(value)[:10]) if value else None
    except ValueError:
        return None


def held(payload: dict[str, Any]) -> Held:
    """The span a stored fact held, from its payload."""
    return Held(_day(payload.get("valid_from")), _day(payload.get("valid_until")))


def _lineages(ranked: Sequence[Ranked]) -> list[list[Ranked]]:
    """The facts among the candidates grouped by lineage, oldest value first, where a
    lineage has a past value among them."""
    groups: dict[str, list[Ranked]] = {}
    for cand in ranked:
        if cand.payload.get("category") is None:
            continue  # a raw turn (NORMAL) has no lineage
        groups.setdefault(str(cand.payload.get("superseded_by") or cand.id), []).append(cand)
    out = []
    for members in groups.values():
        if any(m.payload.get("valid_until") for m in members):
            out.append(sorted(members, key=_chronological))
    return out


def _chronological(cand: Ranked) -> tuple[int, date, date]:
    span = held(cand.payload)
    return (span.end is None, span.end or date.max, span.start or date.min)


def _for_time(members: list[Ranked], query: str, today: date) -> Ranked | None:
    past = [m for m in members if held(m.payload).end is not None]
    span = dates.query_span(query, today)
    if span is not None and span.start <= today:
        overlaps = [(held(m.payload).overlap(span, today), i) for i, m in enumerate(members)]
        best = max(overlaps)
        if best[0] > 0:
            return members[best[1]]
    if asks_before(query):
        named = max(members, key=lambda m: m.lexical)
        if named.lexical > min(m.lexical for m in members):
            at = members.index(named)
            if at > 0:
                return members[at - 1]
    return past[-1] if past else None


def for_its_time(ranked: list[Ranked], query: str, today: date) -> list[Ranked]:
    """`ranked` (best first) with each lineage's value for the question's time lifted to
    just above its lineage's best score; the rest unchanged. Best first again."""
    for members in _lineages(ranked):
        chosen = _for_time(members, query, today)
        if chosen is None:
            continue
        top = max(m.score for m in members)
        if chosen.score < top or sum(m.score == top for m in members) > 1:
            chosen.score = top + _LIFT
    return sorted(ranked, key=lambda c: (-c.score, c.id))
