"""Cues from the turn before: a question the user answers, "your <someone>" the user
goes on about, a disclosure the user agrees with ("me too").

A reply such as "Paris" or "Yes" is a fact about the user only in the light of what
was asked.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from memory.language.prefilter.clauses import WH_EN
from memory.language.prefilter.text import normalise

PREV_QUESTION = re.compile(r"\?|[吗呢]\s*$|[吗呢][.!,]")
# "Do you have kids?" -> "Yes." A bare yes/no to a yes-no question about the user
# is a fact about the user (the LLM step sees the context and writes it out).
YES_NO_QUESTION = re.compile(
    r"\b(?:do|did|are|were|have|has|can|could|would|will|is|was)(?:n't)? (?:you|u|your)\b[^.!?]*\?"
    r"|[你您](?:有|是|会|喜欢|住|在|结婚|养)[^.!?]*吗"
)
BARE_ANSWER = re.compile(
    r"^(?:yes|yeah|yep|yup|no|nope|nah|sure|of course|definitely|absolutely|not really|not yet|never|i do|i don't"
    r"|i am|i'm not|i have|i haven't|是的|是啊|对|对的|有|没有|不是|会|不会|喜欢|不喜欢|嗯)[\s,!.]*$"
)
# "Your daughter sounds lovely" -> "She just started school": the user goes on about
# their own person.
YOUR_NOUN = re.compile(r"\byour (?!own\b|self\b)[a-z]+|你的|您的")
THIRD_PERSON_SUBJECT = re.compile(r"^(?:he|she|they|he's|she's|they're|his|her|their)\b|^(?:他|她|它|他们|她们)")
# Agreement with what the other side said about themselves.
AGREE_EN = re.compile(
    r"^(?:me too|same here|same|so do i|so am i|so did i|i do too|i am too|i did too|me either|me neither"
    r"|neither do i|likewise)\b"
)
AGREE_ZH = re.compile(r"^我也(?:是|一样|喜欢|爱|有|在|想|会|觉得)")


# In an unpunctuated previous turn, a question can start anywhere ("nice what color is it").
_ASKS_ANYWHERE = re.compile(
    rf"\b{WH_EN}\b|\b(?:do|does|did|are|were|have|has|can|could|would|will|is) (?:you|u|your)\b"
    r"|[吗呢]$|什么|怎么|哪|谁|多少|几[个点时天岁号月年次]|有没有|是不是"
)


def asks(prev: str) -> bool:
    """Does an unpunctuated previous turn ask something?"""
    return bool(_ASKS_ANYWHERE.search(prev))


def previous_turn(context: Sequence[str]) -> str:
    return normalise(context[-1]) if context else ""
