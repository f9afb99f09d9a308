"""Structure beyond each memory's own words: its conversation, its days.

The staged retriever scores each memory by itself (keywords, cosine). Systems that
rank far higher on conversational memory do it by structure: they find the
conversation first and the message in it, they match the time a question names
against the time a memory is about, and they read a memory with the turn it answers.
The write side is in `memory/language/indexing.py` (each memory indexed with the turn
before it and its resolved dates); this module is the read side, pure functions over
the candidates `Retriever` has scored:

- `session_scores`: each conversation among the candidates, scored as a whole (the
  query's keywords held anywhere in it, its best turns' similarity). A turn gets a share
  of its conversation's match: an answer said in passing in the conversation about the
  trip ranks above a look-alike from another.
- `time_bonus`: a query that names days ("last week", "in May 2023", 上个月) lifts the
  memories said on those days or about them (their resolved dates).
- `when_bonus`: a question that asks when ("when did...", 什么时候) lifts the memories
  that say a day: its answer is one that does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import date, tzinfo
from typing import Any, Protocol

from memory.language.dates import Span
from memory.types import parse_time


class _Scored(Protocol):
    payload: dict[str, Any]
    score: float


class _Turn(_Scored, Protocol):
    cosine: float | None
    levels: Sequence[float]


def session_scores(
    cands: Sequence[_Turn], weights: Sequence[float], lexical_weight: float, cosine: Callable[[float | None], float]
) -> dict[str, float]:
    """How well each conversation among the candidates matches the query, in [0, 1]: the
    share of the query's keywords (weighted) that any of its turns holds, fused as a turn's
    score is with its three best turns' mean cosine (calibrated by `cosine`).

    A conversation about the trip holds "trip", "Rome" and "photos" across several turns,
    where no single turn holds all three: this is the conversation's match, not a turn's.
    Read from the candidates the stages found, so it costs no query and keeps no state."""
    by: dict[str, list[_Turn]] = {}
    for cand in cands:
        sid = cand.payload.get("session_id")
        if sid is not None:
            by.setdefault(str(sid), []).append(cand)
    total = sum(weights)
    out: dict[str, float] = {}
    for sid, turns in by.items():
        cover = 0.0
        if total > 0 and all(len(t.levels) == len(weights) for t in turns):
            cover = sum(w * max(t.levels[i] for t in turns) for i, w in enumerate(weights)) / total
        best = sorted((cosine(t.cosine) for t in turns), reverse=True)[:3]
        dense = sum(best) / 3
        out[sid] = (1 - lexical_weight) * dense + lexical_weight * cover
    return out


def session_bonus(cands: Iterable[_Scored], match: Mapping[str, float], weight: float) -> None:
    """Add `weight` times its conversation's match to each turn (facts have no conversation)."""
    if not match or weight <= 0:
        return
    for cand in cands:
        sid = cand.payload.get("session_id")
        if sid is not None:
            cand.score += weight * match.get(str(sid), 0.0)


# A span this long that holds today ("this year", 今年) says "now", not when: nothing to match.
_NOW_SPAN_DAYS = 92


def memory_days(payload: Mapping[str, Any], zone: tzinfo, *, said: bool = True) -> list[Span]:
    """The days a memory is about (its resolved dates) and, with `said`, the day it was said."""
    spans = [s for s in (Span.from_iso(p) for p in payload.get("when") or []) if s is not None]
    stamp = parse_time(payload.get("timestamp")) or parse_time(payload.get("created_at"))
    if said and stamp is not None:
        day: date = stamp.astimezone(zone).date()
        spans.append(Span(day, day))
    return spans


def time_bonus(cands: Iterable[_Scored], span: Span | None, weight: float, zone: tzinfo, today: date) -> None:
    """Add `weight` to each memory about a day of `span`, or said on one.

    The day a memory was said counts only for days that have begun: "what did I do last
    week" is answered by what was said then, while "the event next Saturday" is
    answered by a memory about that Saturday, said any day before (a plan, a birthday).
    A long span around today ("this year", 今年多大) names no time to match."""
    if span is None or weight <= 0:
        return
    if span.start <= today <= span.end and span.days > _NOW_SPAN_DAYS:
        return
    said = span.start <= today
    for cand in cands:
        if any(s.overlaps(span) for s in memory_days(cand.payload, zone, said=said)):
            cand.score += weight


def when_bonus(cands: Iterable[_Scored], weight: float) -> None:
    """Add `weight` to each memory that names a day (a resolved relative date)."""
    if weight <= 0:
        return
    for cand in cands:
        if cand.payload.get("when"):
            cand.score += weight
