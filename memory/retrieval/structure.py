"""Structure beyond each memory's own words: its conversation, its days.

The staged retriever scores each memory by itself (keywords, cosine). Systems that
rank far higher on conversational memory do it by structure: they find the
conversation first and the message in it, they match the time a question names
against the time a memory is about, and they read a memory with the turn it answers.
The write side is in `memory/language/indexing.py` (each memory indexed with the turn
before it and its resolved dates); this module is the read side, pure functions over
the candidates `Retriever` has scored:

- `Sessions`: each conversation of the user as the mean direction of its turns
  (a summary in vector form, computed with the memory densities at session start,
  from the same read). A turn gets a share of how well its conversation matches the
  query, relative to the user's other conversations: an answer said in passing in the
  conversation about the trip ranks above a look-alike from another.
- `time_bonus`: a query that names days ("last week", "in May 2023", 上个月) lifts the
  memories said on those days or about them (their resolved dates).
- `when_bonus`: a question that asks when ("when did...", 什么时候) lifts the memories
  that say a day: its answer is one that does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, tzinfo
from typing import Any, Protocol

import numpy as np

from memory.language.dates import Span
from memory.types import parse_time


class _Scored(Protocol):
    payload: dict[str, Any]
    score: float


@dataclass(frozen=True)
class Sessions:
    """The user's conversations as unit centroid vectors, for `session_bonus`."""

    ids: tuple[str, ...] = ()
    centroids: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))

    def similarities(self, vector: Sequence[float]) -> dict[str, float]:
        """Each conversation's cosine to the query vector, as a z-score among the user's
        conversations (how much better than the typical one), clipped at 0."""
        if not self.ids:
            return {}
        q = np.asarray(vector, dtype=np.float32)
        q /= np.linalg.norm(q) + 1e-12
        sims = self.centroids @ q
        spread = float(sims.std()) or 1.0
        z = np.clip((sims - float(sims.mean())) / spread, 0.0, None)
        return {sid: float(v) for sid, v in zip(self.ids, z, strict=True)}


NO_SESSIONS = Sessions()
MIN_TURNS = 3  # a conversation of fewer turns says too little to stand for them


def sessions_of(ids: Sequence[str | None], vectors: np.ndarray) -> Sessions:
    """Centroids of the conversations with at least `MIN_TURNS` turns (rows unit length)."""
    groups: dict[str, list[int]] = {}
    for i, sid in enumerate(ids):
        if sid:
            groups.setdefault(sid, []).append(i)
    kept = [(sid, rows) for sid, rows in groups.items() if len(rows) >= MIN_TURNS]
    if len(kept) < 2:  # one conversation: nothing to choose between
        return NO_SESSIONS
    cents = np.stack([vectors[rows].mean(axis=0) for _, rows in kept]).astype(np.float32)
    cents /= np.linalg.norm(cents, axis=1, keepdims=True) + 1e-12
    return Sessions(tuple(sid for sid, _ in kept), cents)


def session_bonus(cands: Iterable[_Scored], match: Mapping[str, float], weight: float) -> None:
    """Add `weight` times its conversation's match (a z-score, capped at 2) to each turn."""
    if not match or weight <= 0:
        return
    for cand in cands:
        sid = cand.payload.get("session_id")
        if sid is not None:
            cand.score += weight * min(2.0, match.get(str(sid), 0.0)) / 2.0


def memory_days(payload: Mapping[str, Any], zone: tzinfo) -> list[Span]:
    """The days a memory is about (its resolved dates) and the day it was said."""
    spans = [s for s in (Span.from_iso(p) for p in payload.get("when") or []) if s is not None]
    said = parse_time(payload.get("timestamp")) or parse_time(payload.get("created_at"))
    if said is not None:
        day: date = said.astimezone(zone).date()
        spans.append(Span(day, day))
    return spans


def time_bonus(cands: Iterable[_Scored], span: Span | None, weight: float, zone: tzinfo) -> None:
    """Add `weight` to each memory said on, or about, a day of `span`."""
    if span is None or weight <= 0:
        return
    for cand in cands:
        if any(s.overlaps(span) for s in memory_days(cand.payload, zone)):
            cand.score += weight


def when_bonus(cands: Iterable[_Scored], weight: float) -> None:
    """Add `weight` to each memory that names a day (a resolved relative date)."""
    if weight <= 0:
        return
    for cand in cands:
        if cand.payload.get("when"):
            cand.score += weight
