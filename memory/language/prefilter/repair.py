"""Corrections and changes of a value said before, with or without a first-person word.

A correction ("I meant Tuesday") or a change ("the meeting got moved to 3pm") replaces
a stored value; it must refer back to something said or stored, else the gatekeeper
checks it against the user's facts (`anchored_in`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from memory.language.prefilter.clauses import read_clauses
from memory.language.prefilter.text import CJK, HAS_WORD, LATIN, normalise

#
# A correction or a change replaces a value said before ("Correction: the meeting
# moved to 3pm", "the reunion is on Sunday now", 比赛改到下个月了, 我不再吃肉了), often
# with no first-person word: what it is about was named earlier in the session or is
# a stored fact. Two things are read, both general grammar, never phrases of the data:
#
# * the *grammar of correcting*: a self-repair marker ("correction", "I meant",
#   "scratch that", "no wait", "make that", 不对, 说错了, 更正, 应该是, 我是说) or a
#   contrast "not X, (but) Y" / 不是X，是Y; and of *changing*: a change-of-state verb,
#   mostly passive or resultative ("got moved to", "was rescheduled", "pushed back",
#   改到, 推迟, 取消了, 换成), aspect words that mark a new state ("no longer", "not ...
#   anymore", "... now", "turns out", "instead", 不再, 已经不, 现在...了);
# * a *reference* to what the value belongs to: a content word shared with the turns
#   before it in the session, or a definite subject ("the concert", "it", "our ...",
#   "Anna's ...", 这个会议) that points at something already established. A change
#   with neither comes back as SKIP ``unanchored_change``; the gatekeeper then checks
#   it against the user's stored facts (`anchored_in`) before dropping it.
#
# "actually", "wrong" and "not X" are also ordinary words ("actually that sounds fun"):
# they count only when a previous turn exists and, for "not X", X is in it.

_SELF_REPAIR_EN = re.compile(
    r"(?:^|[.!?;,:]\s*)(?:(?:oh|um|uh|sorry|oops|wait|no|ok|okay|so|and|but)[\s,]+)*"
    r"(?:correction|to correct|let me correct|quick correction|small correction|scratch that|strike that"
    r"|i meant|i mean to say|what i meant|i misspoke|i said (?:it )?wrong|i got (?:it|that) wrong|my mistake"
    r"|no wait|wait no|make (?:that|it)\b(?= \w)|rather|update|quick update|change of plans?|plans? changed"
    r"|i was wrong|i stand corrected)\b"
)
_CONTEXT_REPAIR_EN = re.compile(
    r"\bactually\b|\bwrong\b|^(?:no|nope)\b[\s,.!]+(?:it's|its|it is|i'm|im|i am|the|that's|it was|they're)\b"
)
_NOT_THAT = re.compile(r"\bnot (\w{3,})\b")
_CHANGE_EN = re.compile(
    r"\b(?:got|get|gets|getting|was|were|is|are|has been|have been|'s been|'ve been|been|being|'s|'re)\s+"
    r"(?:just |now |finally |officially |all )?"
    r"(?:moved|changed|rescheduled|postponed|pushed|bumped|delayed|cancel+ed|called off|brought forward|switched"
    r"|shifted|swapped|updated|replaced|renamed|promoted|transferred|relocated|reassigned|upgraded|downgraded)\b"
    r"|\b(?:moved|changed|switched|rescheduled|postponed|pushed|bumped|shifted|swapped|changing|moving|switching)"
    r" (?:it |that |this |them |things )?(?:to|back|forward|up|over|from|out)\b"
    r"|\bno longer\b|\b(?:anymore|any more)\b|\bturns? out\b|\bturned out\b|\binstead\b|\bfrom now on\b"
    r"|\b(?:is|are|'s|'re|will be|starts?|ends?|leaves?|lands?|opens?|closes?|happens?)\b(?! \w+ing now$)"
    r"[^.!?]{1,40} now$|\b(?:is|are|'s|'re) now\b"
)
_SELF_REPAIR_ZH = re.compile(
    r"不对|不是的|说错了|搞错了|记错了|弄错了|口误|更正|纠正|应该是|其实是|准确(?:地|来)?说|确切(?:地|来)?说|我是说"
    r"|我的意思是|不是[^,.!?]{1,12}[,]?(?:而)?是|是[^,.!?]{1,12},\\s*(?:而)?不是"
)
_CHANGE_ZH = re.compile(
    r"改(?:到|成|为|在|期|了|天|时间)|换(?:成|到|了)|推迟|延期|延后|提前(?:到|了)|取消了|挪到|调(?:到|整)|变成"
    r"|不再|已经不|再也不|没再|搬(?:到|去|家)|现在(?:是|在|改|换|住|叫|做|变)"
)
_DEFINITE_EN = re.compile(
    r"^(?:(?:oh|um|uh|so|and|but|well|ok|okay|actually|correction|update|sorry|no|wait|yeah|yes)[\s,:]+)*"
    r"(?:the|this|that|these|those|it|its|it's|they|they're|them|our|his|her|their|we|we're|[a-z]+'s)\b"
)
_DEFINITE_ZH = re.compile(r"^(?:这|那)(?:个|次|场|位|家|件|些)?|^[他她它]们?|^(?:咱们?|我们)的")
_STOP_EN = frozenset(
    "the a an and or but so to of in on at for with from by as is are was were be been being it its it's this that"
    " these those they them their there here then than now just not no yes yeah oh um uh okay ok well also very"
    " really actually correction update sorry wait make rather instead anymore any more longer turns turned out got"
    " get gets moved changed will would can could should have has had do does did you your yours user assistant"
    " what when where which who how why about some all one two three time day week month year today tomorrow"
    " morning afternoon evening night monday tuesday wednesday thursday friday saturday sunday pm am".split()
)
_STOP_ZH = frozenset(
    "不对 不是 是的 现在 已经 应该 其实 改到 改成 一个 这个 那个 我们 你们 他们 用户 助手 时候 因为 所以 可以 没有"
    " 下个 上个 今天 明天 昨天 星期 周末 时间 取消 推迟 提前 不再".split()
)
_WORD_EN = re.compile(r"[a-z][a-z']{2,}")
_HAN_RUN = re.compile(r"[\u3400-\u9fff]+")


def _content_keys(t: str) -> set[str]:
    """Content words of a normalised text: English words of 3+ letters outside the
    function-word list, cut to 5 letters (moved/moving, meeting/meetings); Chinese
    character bigrams outside a list of function bigrams."""
    keys = {w[:5] for w in _WORD_EN.findall(t) if w not in _STOP_EN and w.rstrip("s") not in _STOP_EN}
    for run in _HAN_RUN.findall(t):
        keys.update(b for b in (run[i : i + 2] for i in range(len(run) - 1)) if b not in _STOP_ZH)
    return keys


def anchored_in(text: str, earlier: Sequence[str]) -> bool:
    """Does `text` share a content word with any of `earlier` (turns or stored facts)?"""
    keys = _content_keys(normalise(text))
    return bool(keys) and any(keys & _content_keys(normalise(e)) for e in earlier)


def repairs(t: str, statements: Sequence[str], prev: str) -> bool:
    """A self-repair: a repair marker, or (with a previous turn) "actually"/"wrong"/"not X"
    where X was said in it. Needs a statement beside the marker to carry the new value."""
    rest = (_SELF_REPAIR_ZH.sub("", _SELF_REPAIR_EN.sub("", c)).strip(" ,.!?:的了吧啊呀呢嘛") for c in statements)
    if not any(len(r) >= 2 and HAS_WORD.search(r) for r in rest):
        return False  # the marker alone ("不对吧", "correction?"): no new value to keep
    if _SELF_REPAIR_EN.search(t) or _SELF_REPAIR_ZH.search(t):
        return True
    if not prev:
        return False
    if _CONTEXT_REPAIR_EN.search(t):
        return True
    return any(re.search(rf"\b{re.escape(m.group(1))}\b", prev) for m in _NOT_THAT.finditer(t))


# "no York", "oh wait he's seven now", "no sorry it's Katie with a K": a short repair of
# what the turn before (the assistant's echo) said, with a new value after the opener.
_ECHO_OPENER = re.compile(
    r"^(?:(?:oh|um|uh|er|erm|hmm|well|ah)[\s,]+)*(?:no|nope|nah|wait|sorry)\b[\s,.!]*"
    r"(?:(?:no|sorry|wait)\b[\s,.!]*)*"
)
_NOT_VALUE = re.compile(r"\bnot\s+(?:a\s+|an\s+|the\s+|in\s+|at\s+)?([a-z]{3,})")
_NO_NEW_VALUE = frozenset(
    """thanks thank worries problem okay fine good sure bother way matter idea clue worry need want mind hurry rush
    sorry wait actually really thats that's never forget""".split()
)


_ECHO_OPENER_ZH = re.compile(r"^(?:不是|不对|错了|搞错了|说错了)[^，,。？?]{0,8}[，,]\s*[\u3400-\u9fff]{2,}")


def echo_repair(t: str, prev: str) -> bool:
    if not prev or "?" in t or "？" in t:
        return False
    if _ECHO_OPENER_ZH.match(t):  # 不是北京，上海
        return True
    if len(t.split()) > 14:
        return False
    m = _ECHO_OPENER.match(t)
    if m and m.end() < len(t):
        rest = [w for w in re.findall(r"[a-z']{3,}", t[m.end() :]) if w not in _NO_NEW_VALUE and w not in _STOP_EN]
        return bool(rest)
    p = prev.lower()
    return any(re.search(rf"\b{re.escape(v.group(1).rstrip('s'))}", p) for v in _NOT_VALUE.finditer(t))


def changes(statements: Sequence[str]) -> bool:
    """Does a statement use the grammar of a change of state?"""
    return any(
        (LATIN.search(c) and _CHANGE_EN.search(c)) or (CJK.search(c) and _CHANGE_ZH.search(c)) for c in statements
    )


def says_change(text: str) -> bool:
    """Does the turn use the grammar of a change of state ("got moved to", "now", 改到, 不再)?"""
    return changes([c.text for c in read_clauses(normalise(text)) if not c.question])


def refers_back(statements: Sequence[str], context: Sequence[str]) -> bool:
    """Does the change point at something already established: a definite subject, or a
    content word of the turns before it?"""
    if any(_DEFINITE_EN.match(c) or _DEFINITE_ZH.match(c) for c in statements):
        return True
    return anchored_in(" ".join(statements), context)
