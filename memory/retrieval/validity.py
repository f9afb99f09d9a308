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
from datetime import date, timedelta
from typing import Any, Protocol

from memory.language import dates
from memory.language.asked_time import AskedTime, asked_time, words
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


def _overlap(a: frozenset[str], b: frozenset[str]) -> int:
    return len(a & b)


def _at(members: list[Ranked], day: date) -> Ranked | None:
    """The value that held on `day` (the first, if `day` is before them all)."""
    for m in members:
        span = held(m.payload)
        if (span.start is None or span.start <= day) and (span.end is None or day < span.end):
            return m
    starts = [m for m in members if held(m.payload).start is not None]
    if starts and day < min(held(m.payload).start for m in starts):  # type: ignore[type-var]
        return members[0]
    return None


def _overlapping(members: list[Ranked], start: date, end: date, today: date) -> Ranked | None:
    span = dates.Span(start, end)
    best = max(((held(m.payload).overlap(span, today), i) for i, m in enumerate(members)), default=(0, -1))
    return members[best[1]] if best[0] > 0 else None


def _event_fact(cands: Sequence[Ranked], event: frozenset[str]) -> Ranked | None:
    """The fact the question's event clause names: the most words in common (two at
    least, or one for a short clause), the earlier value on a tie."""
    if not event:
        return None
    scored = [(_overlap(event, words(c.text)), c) for c in cands if c.payload.get("category") is not None]
    scored = [(n, c) for n, c in scored if n > 0]
    if not scored:
        return None
    top = max(n for n, _ in scored)
    if top < min(2, len(event)):
        return None
    return min((c for n, c in scored if n == top), key=_chronological)


def _value_named(members: list[Ranked], asked: frozenset[str]) -> Ranked | None:
    """The one value of a line the question names by its own words ("which flat did I
    share with my mates"), when it has more of them than any other value of the line."""
    counts = sorted(((_overlap(asked, words(m.text)), i) for i, m in enumerate(members)), reverse=True)
    if len(counts) > 1 and counts[0][0] > counts[1][0] and counts[0][0] >= 1:
        return members[counts[0][1]]
    return None


def _key(cand: Ranked) -> str:
    return str(cand.payload.get("superseded_by") or cand.id)


def for_its_time(ranked: list[Ranked], query: str, today: date) -> list[Ranked]:
    """`ranked` (best first, past values among them) ordered for the time the question
    asks about (`asked_time`): for a question about now each fact's current value first
    and no past value above a current one; for one about the past, in the line of values
    the question is about, the value that fits its time first: the days it names, the
    span of an event it names ("when I got Nova": the day that fact began), the value
    before or after the one it names, the first, the one it names by its own words, else
    the latest that no longer holds. Best first again."""
    lines = _lineages(ranked)
    if not lines:
        return ranked
    asked = asked_time(query)
    span = dates.query_span(query, today)
    dated = span is not None and span.start <= today
    if not (asked.past or dated):
        return _now_first(ranked, lines)
    event = _event_fact(ranked, words(asked.event)) if asked.event else None
    main = words(asked.main)
    chosen_by_line: dict[str, Ranked] = {}
    for members in lines:
        chosen = _chosen(members, event, asked, main, query, today, span if dated else None)
        if chosen is not None:
            chosen_by_line[_key(members[0])] = chosen
            top = max(m.score for m in members)
            if chosen.score < top or sum(m.score == top for m in members) > 1:
                chosen.score = top + _LIFT
            for m in members:  # the other values of the line below the chosen one
                if m is not chosen and m.score >= chosen.score:
                    m.score = chosen.score - _LIFT
    target = _target_line(lines, main, event)
    if target is not None and _key(target[0]) in chosen_by_line:
        best = max(c.score for c in ranked)
        chosen = chosen_by_line[_key(target[0])]
        if chosen.score < best:
            chosen.score = best + _LIFT
    if event is not None and (target is None or _key(event) != _key(target[0])):
        first = max(ranked, key=lambda c: c.score)
        if first is event or _key(first) == _key(event):
            runner = max((c for c in ranked if _key(c) != _key(event)), key=lambda c: c.score, default=None)
            if runner is not None:
                runner.score = first.score + _LIFT  # the event is the question's time, not its answer
    return sorted(ranked, key=lambda c: (-c.score, c.id))


def _chosen(members: list[Ranked], event: Ranked | None, asked: AskedTime, main: frozenset[str], query: str,
            today: date, span: dates.Span | None) -> Ranked | None:  # fmt: skip
    if span is not None:
        overlaps = [(held(m.payload).overlap(span, today), i) for i, m in enumerate(members)]
        best = max(overlaps)
        if best[0] > 0:
            return members[best[1]]
    if event is not None:
        same_line = any(m is event for m in members)
        when = held(event.payload)
        if same_line:
            at = members.index(event)
            if asked.relation == "before" and at > 0:
                return members[at - 1]
            if asked.relation == "after" and at + 1 < len(members):
                return members[at + 1]
        elif when.start is not None:
            if asked.relation == "before":
                found = _at(members, when.start - timedelta(days=1))
            elif asked.relation == "after":
                found = _at(members, when.start)
            elif when.end is not None:
                found = _overlapping(members, when.start, when.end - timedelta(days=1), today)
            else:
                found = _at(members, when.start)
            if found is not None:
                return found
    if asked.first:
        return members[0]
    named = _value_named(members, main)
    if named is not None:
        return named
    if asks_before(query):
        named = max(members, key=lambda m: m.lexical)
        if named.lexical > min(m.lexical for m in members):
            at = members.index(named)
            if at > 0:
                return members[at - 1]
    past = [m for m in members if held(m.payload).end is not None]
    return past[-1] if past else None


def _target_line(lines: list[list[Ranked]], main: frozenset[str], event: Ranked | None) -> list[Ranked] | None:
    """The line of values the question asks about: the most words of the question
    (the event clause left out) in its values; None on a tie or none."""
    scored = []
    for members in lines:
        n = max(_overlap(main, words(m.text)) for m in members)
        scored.append((n, members))
    scored.sort(key=lambda x: -x[0])
    if not scored or scored[0][0] == 0 or (len(scored) > 1 and scored[1][0] == scored[0][0]):
        return None
    return scored[0][1]


def _now_first(ranked: list[Ranked], lines: list[list[Ranked]]) -> list[Ranked]:
    """A question about now: in each line the current value at the line's best score,
    the past values under it and under every current value."""
    for members in lines:
        current = [m for m in members if held(m.payload).end is None]
        top = max(m.score for m in members)
        if current and current[-1].score < top:
            current[-1].score = top + _LIFT
    now_scores = [c.score for c in ranked if not (c.payload.get("category") and c.payload.get("valid_until"))]
    floor = min(now_scores) if now_scores else 0.0
    for members in lines:
        for m in members:
            if held(m.payload).end is not None:
                m.score = min(m.score * 0.5, floor - _LIFT)
    return sorted(ranked, key=lambda c: (-c.score, c.id))
