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

import dataclasses
from collections.abc import Sequence
from datetime import date, timedelta
from typing import Any, Protocol, cast

from memory.language import dates
from memory.language.asked_time import AskedTime, asked_time, words
from memory.language.validity import asks_before

__all__ = ["Held", "current_first", "for_its_time", "held"]

# How far above its lineage's best score the value for the question's time is put.
_LIFT = 1e-6
READ = object()  # a `span` argument not given: the days are read from the question's text


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
    """The fact the question's event clause names: the most words in common, the best
    scored on a tie."""
    if not event:
        return None
    scored = [(_overlap(event, words(c.text, chars=True)), c) for c in cands if c.payload.get("category") is not None]
    scored = [(n, c) for n, c in scored if n > 0]
    if not scored:
        return None
    top = max(n for n, _ in scored)
    return max((c for n, c in scored if n == top), key=lambda c: c.score)


def _value_named(members: list[Ranked], asked: frozenset[str]) -> Ranked | None:
    """The one value of a line the question names by its own words ("which flat did I
    share with my mates"), when it has two of them or more, more than any other value."""
    counts = sorted(((_overlap(asked, words(m.text)), i) for i, m in enumerate(members)), reverse=True)
    if len(counts) > 1 and counts[0][0] > counts[1][0] and counts[0][0] >= 2:
        return members[counts[0][1]]
    return None


def _key(cand: Ranked) -> str:
    return str(cand.payload.get("superseded_by") or cand.id)


def for_its_time(
    ranked: list[Ranked], query: str, today: date, *, past: bool = False, span: object = READ
) -> list[Ranked]:
    """`ranked` (best first, past values among them) ordered for the time the question
    asks about (`asked_time`): for a question about now each fact's current value at its
    line's best score and no past value; for one about the past, in the line of values
    the question is about, the value that fits its time first: the days it names, the
    span of an event it names ("when I got Nova": the day that fact began), the value
    before or after the one it names, the first, the one it names by its own words, else
    the latest that no longer holds. Best first again. `span`: the days the question names
    as the look-up parsed them (`query.ParsedQuery.span`); by default read from `query`."""
    lines = _lineages(ranked)
    if not lines:
        return ranked
    asked, span = _judged(lines, query, today, past, span)
    if not asked.past:
        return _now_first(ranked, lines, words(query))
    dated = span is not None
    event = _event_fact(ranked, words(asked.event, chars=True)) if asked.event else None
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
    # The event's own line answers "before"/"after" a value of it (unless the question's
    # main part names another line), and "at" when the main part names it.
    event_line = False
    if event is not None:
        own = next((m for m in lines if any(x is event for x in m)), None)
        if own is not None:
            named_other = target is not None and target is not own
            at = own.index(event)
            if asked.relation == "before":
                event_line = at > 0 and not named_other
            elif asked.relation == "after":
                event_line = at + 1 < len(own) and not named_other
            else:
                event_line = target is own
    if event is not None and event_line and _key(event) in chosen_by_line:
        chosen = chosen_by_line[_key(event)]
        chosen.score = max(c.score for c in ranked) + _LIFT
    elif event is not None and (target is None or _key(event) != _key(target[0])):
        first = max(ranked, key=lambda c: c.score)
        if first is event or _key(first) == _key(event):  # the event is the question's time, not its answer
            others = [c for k, c in chosen_by_line.items() if k != _key(event)]
            others = others or [c for c in ranked if _key(c) != _key(event)]
            if others:
                max(others, key=lambda c: c.score).score = first.score + _LIFT
    return sorted(ranked, key=lambda c: (-c.score, c.id))


def _judged(
    lines: list[list[Ranked]], query: str, today: date, past: bool, span: object = READ
) -> tuple[AskedTime, dates.Span | None]:
    """Whether the question is about the past (`AskedTime.past`) and the past days it
    names. Days that reach today ("today", "this year") are now unless the tense says
    past; a question with no tense either way is past when it names a past value by its
    own words."""
    asked = asked_time(query)
    days = dates.query_span(query, today) if span is READ else cast("dates.Span | None", span)
    dated = days is not None and days.start <= today and (past or asked.past or days.end < today)
    if past or dated:
        return dataclasses.replace(asked, past=True), days if dated else None
    if asked.past:
        return asked, None
    if not (asked.now or asked.present):
        asked_words = words(query)
        for members in lines:
            named = _value_named(members, asked_words)
            if named is not None and held(named.payload).end is not None:
                return dataclasses.replace(asked, past=True), None
    return asked, None


def current_first(ranked: list[Ranked], query: str, today: date, *, span: object = READ) -> list[Ranked]:
    """`ranked` with no value that no longer holds when the question is not judged to be
    about the past (`_judged`): whatever later stages did to the scores, a question about
    now never gets a past value, let alone first."""
    lines = _lineages(ranked)
    if not lines or _judged(lines, query, today, False, span)[0].past:
        return ranked
    gone = {id(m) for members in lines for m in members if held(m.payload).end is not None}
    return [c for c in ranked if id(c) not in gone]


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
            if asked.relation == "at":
                return event  # "my job when I started at Western Power": the value named
        elif when.start is not None:
            if asked.relation == "before":
                found = _at(members, when.start - timedelta(days=1))
            elif asked.relation == "after":
                found = _at(members, when.start)
            elif when.end is not None and asked.lasting:
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


def _line_words(cand: Ranked) -> frozenset[str]:
    """A value's words and its slot's name ("job", "home_city")."""
    slot = str(cand.payload.get("slot") or cand.payload.get("was_slot") or "").replace("_", " ")
    return words(f"{cand.text} {slot}")


def _target_line(lines: list[list[Ranked]], main: frozenset[str], event: Ranked | None) -> list[Ranked] | None:
    """The line of values the question asks about: the most words of the question
    (the event clause left out) in its values; None on a tie or none."""
    scored = []
    for members in lines:
        n = max(_overlap(main, _line_words(m)) for m in members)
        scored.append((n, members))
    scored.sort(key=lambda x: -x[0])
    if not scored or scored[0][0] == 0 or (len(scored) > 1 and scored[1][0] == scored[0][0]):
        return None
    return scored[0][1]


def _now_first(ranked: list[Ranked], lines: list[list[Ranked]], asked: frozenset[str]) -> list[Ranked]:
    """A question about now: in each line the current value at the line's best score
    (the line is what the question is about, "am I still at Grind?"), and no past value:
    what no longer holds does not answer it."""
    gone: set[int] = set()
    for members in lines:
        current = [m for m in members if held(m.payload).end is None]
        best = max(members, key=lambda m: m.score)
        if current and current[-1].score < best.score and _overlap(asked, words(best.text)):
            current[-1].score = best.score + _LIFT  # the question named an old value
        gone.update(id(m) for m in members if held(m.payload).end is not None)
    return sorted((c for c in ranked if id(c) not in gone), key=lambda c: (-c.score, c.id))
