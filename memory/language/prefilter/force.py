"""FORCE: the user's explicit request that something be remembered.

Kept apart from the other cues because it overrides them: a forced write skips the
gatekeeper's judgement, so only clause-initial imperatives count ("remember that ...",
请记住), never "I remember ..." or a recall question put the same way.
"""

from __future__ import annotations

import re

from memory.language.prefilter.clauses import QUESTION_EN
from memory.language.prefilter.reading import read_clause

# Clause-initial imperatives (after "ok", "please", "and", "also" ...), or "I want you
# to remember", "can you note that". "remember when ..." is a recall and "remember to
# ..." / 记得带伞 is advice, not an order to store a fact.
_FORCE_EN = re.compile(
    r"(?:^|[.!?;,]\s*)(?:(?:ok|okay|oh|hey|so|and|also|but|now|just|please|pls|btw|by the way)[\s,]+)*"
    r"(?:(?:please\s+)?(?:remember|memori[sz]e|note|keep in mind|make (?:a )?note(?: of)?|take (?:a )?note(?: of)?)\b"
    r"(?!\s+(?:when|the time|how|what|who|where|why|if|whether|me\b|to\b))"
    r"|(?:please\s+)?(?:don't|do not|never) forget"
    r"|(?:i want|i'd like|i would like|i need) you to (?:remember|note|keep in mind|know that)"
    r"|(?:can|could|would|will) you (?:please\s+)?(?:remember|note|keep in mind|make a note|save|store)"
    r"(?:\s+(?:that|this|it)\b|\s*:))"
    r"|\bplease remember\b|\bremember (?:this|that) for (?:me|later|next time)\b|\bfor future reference\b"
)
_FORCE_ZH = re.compile(
    r"(?:^|[.!?;,:]\s*)(?:(?:嗯|哦|那|对了|还有|另外|好|好的)[\s,]*)*"
    r"(?:请你?|麻烦你?|帮我|给我|你要|你得|你|要)?"
    r"(?:记住|记下|记一下|记好|记着|记得(?=我)|牢记|别忘了|别忘记|不要忘了|不要忘记|千万别忘)"
    r"|请(?:你)?(?:记住|记下|记一下)|帮我(?:记住|记下|记一下)"
)
# Cheap pre-check: every FORCE pattern contains one of these.
_FORCE_HINTS = ("remember", "forget", "note", "keep in mind", "memori", "save", "store", "future reference", "记", "忘")


def _may_force(t: str) -> bool:
    return any(h in t for h in _FORCE_HINTS)


# "记住了吗 / 你还记得...吗 / 你记得我叫什么" are questions, "记不住" is a complaint: not orders.
_FORCE_ZH_NOT = re.compile(r"记住了?吗|记[住下]了?没|记得.*(?:[吗呢？?]|什么|谁|哪|几|多少|怎么)|记不住|没记住")
# Not a request to store, in either language: the opposite one ("don't write this
# down", 别帮我记下来, 不用记住), or a question that starts like an order
# ("Remember my sister's name?"). Otherwise FORCE would keep the turn verbatim,
# password and all, even when extraction rightly finds nothing to keep.
_NOT_A_REQUEST = re.compile(
    r"\b(?:don't|dont|do not|never|no need to|you don't need to|you do not need to)\s+"
    r"(?:remember|memori[sz]e|note|write|save|store|keep)\b"
    r"|(?:^|[.!?;,]\s*)(?:please\s+)?remember\b[^.!?]*\?"
    r"|(?:别|不要|不用|不必|无需|甭|别再)(?:帮我|给我|替我|你)?(?:记|写下|存)"
)


# A request to remember put as a question: "Can you remember I'm allergic to peanuts?",
# 你能记住我对花生过敏吗. Not an order FORCE may trust (the same words ask for a recall:
# "Can you remember my sister's name?"), and not a pure question either: it was skipped
# as one, and the allergy was lost for good. Such a turn goes to extraction, which keeps
# the fact if there is one and nothing if it was a recall.
_ASK_TO_REMEMBER_EN = re.compile(
    r"(?:^|[.!?;,]\s*)(?:(?:ok|okay|oh|hey|so|and|also|but|now|just|please|btw)[\s,]+)*"
    r"(?:can|could|would|will) you (?:please\s+)?(?:also\s+)?"
    r"(?:remember|memori[sz]e|note(?: down)?|keep in mind|make (?:a )?note(?: of)?|save|store|write down)\b"
    r"(?!\s+(?:when|the time|how|what|who|where|why|which|if|whether|me\b|to\b))[\s,:]*(?:that\b)?"
)
_ASK_TO_REMEMBER_ZH = re.compile(
    r"(?:能|可以|会|要)(?:帮我|给我|替我)?(?:记住|记下|记一下|记着|记好|记得)(?:下来)?[\s,:]*"
    r"|^(?:请你?|你)?记得(?=我.*(?:好吗|行吗|可以吗|好不好|ok吗)[\s?]*$)"
)
_ASK_TAIL_ZH = re.compile(r"(?:吗|呢|好吗|行吗|可以吗|好不好|行不行|可不可以|ok吗)?[\s?]*$")
_RECALL_WORDS_ZH = re.compile(r"什么|谁|哪|几|多少|怎么")


def asks_to_remember(t: str) -> bool:
    """Does the (normalised) turn ask, as a question, that a fact about the user be
    remembered? Only when what follows the request says something about the user and is
    not itself a recall question ("... what my name is", 我叫什么)."""
    if not _may_force(t):
        return False
    m = _ASK_TO_REMEMBER_EN.search(t) or _ASK_TO_REMEMBER_ZH.search(t)
    if m is None:
        return False
    rest = _ASK_TAIL_ZH.sub("", t[m.end() :]).strip(" ,.!")
    if not rest or QUESTION_EN.match(rest) or _RECALL_WORDS_ZH.search(rest):
        return False
    return read_clause(rest).disclosure is not None


def orders_to_remember(t: str) -> bool:
    """Is the (normalised) turn an explicit order to remember (FORCE)?"""
    return bool(
        _may_force(t)
        and (_FORCE_EN.search(t) or (_FORCE_ZH.search(t) and not _FORCE_ZH_NOT.search(t)))
        and not _NOT_A_REQUEST.search(t)
    )
