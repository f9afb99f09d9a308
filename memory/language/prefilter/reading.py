"""One declarative clause read once: its disclosure cue, whether it says anything,
and its frame.

Cached because the learned stage asks the rules about a turn several times.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from memory.language.prefilter.formulas import LEAD_INTERJECTION, is_ack
from memory.language.prefilter.frames import strip_frame
from memory.language.prefilter.reactions import about_listener, is_reaction
from memory.language.prefilter.self_reference import (
    ATTRIBUTE_EN,
    ATTRIBUTE_ZH,
    GENERIC_EVALUATION_EN,
    GENERIC_EVALUATION_ZH,
    HERE_EN,
    IMPLIED_I_EN,
    KIN_EN,
    KIN_ZH,
    first_person,
)
from memory.language.prefilter.text import CJK, HAS_WORD, LATIN


@dataclass(frozen=True)
class _Reading:
    """What one declarative clause says (computed once per clause)."""

    disclosure: str | None  # reason tag if it may carry a fact about the user
    content: bool  # says something: not an ack, reaction, stance or address to the listener
    frame: str | None  # "stance" / "opinion" frame found at its start


@lru_cache(maxsize=1024)
def read_clause(c: str, off: frozenset[str] = frozenset()) -> _Reading:
    """Cached: the learned stage asks the rules about a turn several times
    (`fired_rules`, `cues`); a clause is read once."""
    if is_ack(c):
        return _Reading(None, False, None)
    rest, frame = strip_frame(c)
    if not HAS_WORD.search(rest):
        return _Reading(None, False, frame)
    reaction = is_reaction(rest)
    content = not (is_reaction(c) or reaction or about_listener(rest))
    return _Reading(_disclosure(rest, frame, reaction, off), content, frame)


def _disclosure(rest: str, frame: str | None, reaction: bool, off: frozenset[str] = frozenset()) -> str | None:
    """The cue, in order of strength, that a clause (frame removed) is about the user;
    cues named in `off` are not used (rule-set selection in bench/gate/run.py)."""
    if "first_person_statement" not in off and first_person(rest):
        return "first_person_statement"
    zh, en = bool(CJK.search(rest)), bool(LATIN.search(rest))
    bare = LEAD_INTERJECTION.sub("", rest) if en else rest
    if "implied_first_person" not in off and en and IMPLIED_I_EN.match(bare):
        return "implied_first_person"
    if "relation_mention" not in off and ((en and KIN_EN.search(rest)) or (zh and KIN_ZH.search(rest))):
        return "relation_mention"
    if "attribute_statement" not in off and ((en and ATTRIBUTE_EN.search(rest)) or (zh and ATTRIBUTE_ZH.search(rest))):
        return "attribute_statement"
    if "speaker_location" not in off and en and HERE_EN.search(rest):
        return "speaker_location"
    if "opinion" in off:
        return None
    if frame == "opinion" and not (reaction or about_listener(rest) or is_ack(rest)):
        return "opinion"
    if not reaction and ((en and GENERIC_EVALUATION_EN.match(bare)) or (zh and GENERIC_EVALUATION_ZH.match(bare))):
        return "opinion"
    return None
