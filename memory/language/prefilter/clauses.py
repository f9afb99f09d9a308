"""A turn as sub-clauses, each marked as a question or a statement.

Voice transcripts often lack punctuation and "?", so a question is told by its form
(wh-word + auxiliary, 吗/什么 ...) as well as by its mark, and a run-on tail question is
split off so the statement before it is still read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from memory.language.prefilter.formulas import FILLER_RE, LEAD_INTERJECTION, VOCATIVE_ZH, VOCATIVES_ZH
from memory.language.prefilter.text import CJK, HAS_WORD

WH_EN = r"(?:what|what's|whats|where|where's|when|who|who's|whom|whose|why|how|how's|which)"
_AUX_EN = (
    r"(?:do|does|did|is|are|was|were|am|can|could|would|will|should|shall|may|might|have|has|had|must"
    r"|don't|doesn't|didn't|isn't|aren't|wasn't|weren't|can't|couldn't|wouldn't|won't|shouldn't|haven't|hasn't)"
)
_SUBJ_EN = r"(?:you|u|i|we|they|he|she|it|my|your|there|this|that|these|those|the|a|an|any|anyone|someone|ya)"
QUESTION_EN = re.compile(
    rf"^(?:{WH_EN}\b(?:\s+\w+)?\s+{_AUX_EN}\b|{WH_EN}$|{WH_EN} (?:about|else|come|so|many|much|long|often|old)\b"
    rf"|{_AUX_EN} {_SUBJ_EN}\b|(?:any|anything|anyone|got any)\b|(?:you|u) (?:ever|too|know)\b|or not$|right$|huh$)"
)
# Chinese: 吗/嘛/么 close a yes-no question; 呢 only with a wh-word or after a pronoun
# ("你呢"); a declarative 呢 ("他在北京上班呢") is not a question.
_QUESTION_ZH = re.compile(
    r"[吗嘛么]$|^(?:你|您|他|她|他们|那你|那您)呢$|什么|怎么|怎样|为什么|为啥|哪|谁|几[个点时天岁号月年次]"
    r"|多少|多久|多大|多远|多长|是不是|有没有|能不能|会不会|要不要|可不可以|对不对|好不好|行不行|是否|如何"
)
# Run-on speech: "I enjoy walking my dog what about you?" -> split before the tail
# question addressed to the listener.
_QUESTION_TAIL_EN = re.compile(
    r"(?<=\w)\s+(?=(?:what|how) about (?:you|u|yours)\b|(?:and|or) (?:you|u|yours)\s*$"
    rf"|{WH_EN}\b[^,]*\b(?:you|your|u)\b|(?:do|does|did|are|have|can|would|will|were) (?:you|u|your)\b)"
)
# A "?" clause in declarative form with a first-person subject is a statement said
# with rising intonation ("I was hoping to start a garden?"), not a request for info.
_FP_SUBJECT_EN = re.compile(
    r"^(?:i|i'm|im|i've|i'd|i'll|we|we're|we've|my|our)\b(?!.*\b(?:what|who|where|when|why|how|which)\b)(?:\s+\S+){3,}"
)


# ==================================================================================
# Clause analysis
# ==================================================================================


@dataclass(frozen=True)
class _Clause:
    text: str
    question: bool


SENT_SPLIT = re.compile(r"(?<=[.!?;])\s*|\n+")
_SUB_SPLIT = re.compile(r" ?[,:] ?| -+ | (?=but )")
# Transcripts without any punctuation: break before a first-person subject that follows
# other words ("do you like the farm i grew up there"), so a question-form opening
# does not swallow the statement after it.
HAS_PUNCT = re.compile(r"[.!?;,。]")
_UNPUNCTUATED_SPLIT = re.compile(r"(?<=\w) (?=(?:i|i'm|im|i've|i'd|i'll|we|we're|we've)\s\w)")


def read_clauses(t: str) -> list[_Clause]:
    """Split normalised text into sub-clauses and mark which are questions."""
    return list(_split_clauses(t))


@lru_cache(maxsize=256)
def _split_clauses(t: str) -> tuple[_Clause, ...]:
    out: list[_Clause] = []
    if not HAS_PUNCT.search(t):
        t = _UNPUNCTUATED_SPLIT.sub(", ", t)
    for sent in SENT_SPLIT.split(t):
        sent = sent.strip(" .!;\"'()")
        if not HAS_WORD.search(sent):
            continue
        ends_q = sent.endswith("?")
        body = sent.rstrip("?")
        if ends_q:
            body = _QUESTION_TAIL_EN.sub(", ", body, count=1)
        parts = [p.strip(" ?.!\"'()") for p in _SUB_SPLIT.split(body)]
        parts = [p for p in parts if HAS_WORD.search(p)]
        for i, part in enumerate(parts):
            part = FILLER_RE.sub("", part)
            if part.endswith(VOCATIVES_ZH):
                part = VOCATIVE_ZH.sub("", part)
            part = part.strip(" ,")
            if not part:
                continue
            is_q = bool(QUESTION_EN.match(part) or (CJK.search(part) and _QUESTION_ZH.search(part)))
            if ends_q and i == len(parts) - 1 and not _FP_SUBJECT_EN.match(LEAD_INTERJECTION.sub("", part)):
                is_q = True
            out.append(_Clause(part, is_q))
    return tuple(out)
