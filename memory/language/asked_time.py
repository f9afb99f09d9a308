"""Which time a question asks about, read from its grammar rather than from a list of
cue words: the tense ("where did I live", "which flat did I share"), an event it names
("when I got Nova", "before we bought the house", 我换工作前, 住在杭州的时候), an
ordinal ("my first job", 第一份工作), an explicit date (`dates`), or now ("still",
现在). `memory/retrieval/validity.py` ranks a fact's values by how well their spans fit.

Also the words of a text to compare a question's parts with a fact's: content words
(a crude stem: "lived", "lives", "living" -> "liv") and Chinese character pairs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memory.language.lexical import STOP_EN

__all__ = ["AskedTime", "asked_time", "words"]


@dataclass(frozen=True)
class AskedTime:
    """`past`: the question asks about a time before now; `now`: it says so ("still");
    `event`: the clause that names an event, `relation` to it ("at", "before", "after");
    `main`: the question without that clause; `first`: an ordinal asks for the earliest."""

    past: bool
    now: bool
    event: str | None
    relation: str
    main: str
    first: bool
    lasting: bool = False  # the event is a state that lasted ("when I lived in Leeds"), not a moment
    present: bool = False  # not past, and said in the present tense ("do I live in Leeds?")


# Past tense: an auxiliary, or a verb in the past after its subject ("I lived", "we bought").
_PAST_AUX = re.compile(
    r"\b(?:did|didn't|was|wasn't|were|weren't|had|hadn't|used\s+to|use\s+to|would\s+(?:always|usually))\b"
)
_SUBJECT = r"(?:i|we|you|he|she|they|my\s+\w+|our\s+\w+)"
_IRREGULAR = (
    "went got had made took came saw left gave bought thought taught brought found kept felt met sold told drove rode "
    "ran grew knew wore wrote spoke chose began became sat stood lost won paid sent spent built heard held led slept "
    "swam sang broke fell flew forgot hid hung lay meant rose shook shut stole threw understood woke did was were "
    "dated studied married moved lived worked played joined owned rented shared adopted"
)
_PAST_VERB = re.compile(rf"\b{_SUBJECT}\s+(?:\w+ly\s+)?(?:{'|'.join(_IRREGULAR.split())}|[a-z]{{3,}}ed)\b")
_ORDINAL_EN = re.compile(r"\b(?:first|original|earliest|initial|very\s+first|oldest)\b")
_NOW_EN = re.compile(r"\b(?:still|now|currently|these\s+days|nowadays|at\s+the\s+moment|right\s+now|today)\b")
_PREVIOUS_EN = re.compile(
    r"\b(?:previous|former|(?<!how\s)old(?!\s+(?:am|is|are)\b)|ex|last(?!\s+name)|prior|earlier|back\s+then|originally)\b"
)
# A participle after "am I" / "is my sister" / "what's my dog" is a state now ("who am I
# married to", "where is my daughter based", "what's my dog called"), not a past verb.
_BE_BEFORE = re.compile(r"(?:\b(?:am|is|are|isn't|aren't)|'s|'m|'re)\s+$")
# "what did I tell you my dog is called", "did I say I work at Tesco": a report of what was
# said; the tense that counts is the reported clause's.
_REPORTED = re.compile(
    r"\b(?:did|had)\s+i\s+(?:say|said|tell\s+you|told\s+you|mention)(?:\s+that)?\s+(?=.*\b(?:am|is|are|do|does)\b|.*'s\b)"
)
# Present tense in the main clause: with no past marker, an event clause said with it is
# a habit or a state now ("what do I do in my spare time", "where am I working as a nurse").
_PRESENT_EN = re.compile(r"\b(?:am|is|are|isn't|aren't|do|does|don't|doesn't|have|has)\b|'s\b|'m\b|'re\b")
# An event clause: "when I got Nova", "before we bought the house", "back when I lived in Leeds".
_EVENT_EN = re.compile(
    r"\b(?P<rel>back\s+when|when|while|whilst|before|after|until|till|since|by\s+the\s+time|at\s+the\s+time"
    r"|during|prior\s+to|as\s+an?|in\s+my|at\s+my|growing\s+up\s+in|back\s+in|back\s+at)\s+(?P<event>[^?.!,;]+)"
)

# A state that lasts (its whole span is the time asked), not a change at a moment ("when
# I got Nova", "when we moved in": the day it happened).
_LASTING_EN = re.compile(
    r"^(?:i|we|he|she|they)\s+(?:was|were|lived|was\s+living|were\s+living|worked|was\s+working|stayed|studied"
    r"|was\s+studying|had|owned|dated|was\s+dating)\b|^(?:student|kid|child|teenager)"
)
_LASTING_ZH = re.compile(r"^我?(?:还)?(?:在|住在|住|读|上学|念书|当)")
_LASTING_REL = re.compile(r"(?:while|whilst|during|as\s|in\s+my|at\s+my|growing|back\s+in|back\s+at)")
_NOW_ZH = re.compile(r"现在|現在|目前|如今|眼下|这会儿|這會兒|最近|还在|還在|还是|還是|仍然|依然|至今")
_PAST_ZH = re.compile(
    r"以前|之前|原来|原來|原先|过去|過去|曾经|曾經|当时|當時|那时|那時|那会|那會|当初|當初|起初|一开始|一開始|早先|从前|從前"
    r"|上一|前一|前任|前男友|前女友|前夫|前妻|前同事|前老板|前公司|[住做待干幹养養读讀上开開用学學带帶谈談交]过|[住做待干幹养養读讀上开開用学學]過"
)
# 是在哪儿读的: the 是…的 frame tells of a thing done, in the past.
_SHI_DE = re.compile(r"是[^，。？?！!]{1,10}的[？?。]?$")
_ORDINAL_ZH = re.compile(
    r"第一|最早|最初|头一|頭一|首个|首個|最开始|最開始|刚开始|剛開始|一开始|一開始|刚工作|剛工作|刚毕业|剛畢業"
)
# 换工作前 / 搬到上海之前 / 住在杭州的时候 / 结婚以后: the clause before the relation word.
_EVENT_ZH = re.compile(
    r"(?P<event>[\u3400-\u9fffA-Za-z0-9]{2,}?)(?P<rel>的时候|的時候|时候|時候|那会儿|那會兒|那阵子|那陣子|期间|期間"
    r"|那一年|那年|那时|那時|那会|那會"
    r"|之前|以前|之后|之後|以后|以後|时|時|前|后|後)"
)
_ZH_BEFORE = {"之前", "以前", "前"}
_ZH_AFTER = {"之后", "之後", "以后", "以後", "后", "後"}
_ZH_NOT_EVENT = re.compile(r"^(?:以|之|目|从|從|提|几|幾|多|很|好|最)$|^(?:不久|很久|好久|多久)")


def asked_time(text: str) -> AskedTime:
    """What time `text` asks about, read from its grammar (both languages)."""
    low = " ".join(text.lower().replace("’", "'").split())
    event, relation, main = None, "at", low
    m = _EVENT_EN.search(low)
    if m and m.start() > 0:
        rel = m.group("rel")
        relation = (
            "before"
            if rel in ("before", "prior to", "until", "till", "by the time")
            else ("after" if rel in ("after", "since") else "at")
        )
        event, main = m.group("event").strip(), (low[: m.start()] + " " + low[m.end() :]).strip()
    else:
        for z in _EVENT_ZH.finditer(text):
            if (
                _ZH_NOT_EVENT.match(z.group("event"))
                or z.group("event")[-1] in "以之"
                or len(z.group("event").lstrip("我")) < 2
            ):
                continue  # 以前, 之前, 目前: a time word, not an event
            rel = z.group("rel")
            if rel in ("前", "后", "後") and z.end() < len(text) and text[z.end()] in "天年月任夫妻男女":
                continue  # 前男友: a title, not an event
            if z.group("event")[-1] in "年月天周週钟鐘":
                continue  # 三年前: a time (`dates` reads it)
            relation = "before" if rel in _ZH_BEFORE else ("after" if rel in _ZH_AFTER else "at")
            event, main = z.group("event"), text[: z.start()] + text[z.end() :]
            break
    now = bool(_NOW_EN.search(low) or _NOW_ZH.search(text))
    first = bool(_ORDINAL_EN.search(low) or _ORDINAL_ZH.search(text))
    main = _REPORTED.sub("", main)
    past_verb = any(not _BE_BEFORE.search(main[: v.start()]) for v in _PAST_VERB.finditer(main))
    event_past = event is not None and not (
        m is not None and _PRESENT_EN.search(main) and not _PAST_AUX.search(event) and not _PAST_VERB.search(event)
    )
    past = bool(
        event_past
        or first
        or _PAST_AUX.search(main)
        or past_verb
        or _PREVIOUS_EN.search(low)
        or _PAST_ZH.search(text)
        or _SHI_DE.search(text.strip())
    )
    lasting = bool(event) and bool(
        _LASTING_EN.search(event or "")
        or _LASTING_ZH.search(event or "")
        or _LASTING_REL.match(m.group("rel") if m else "")
    )
    if now and not event_past and not first and not _PREVIOUS_EN.search(low) and not _PAST_ZH.search(text):
        past = False  # "am I still at Grind?", 我现在住哪
    present = not past and bool(_PRESENT_EN.search(main))
    return AskedTime(past=past, now=now and not past, event=event, relation=relation, main=main, first=first,
                     lasting=lasting, present=present)  # fmt: skip


_EN_WORD = re.compile(r"[a-z0-9]+")
_HAN = re.compile(r"[\u3400-\u9fff]+")
_STOP_MORE = frozenset("user users what which where who when how do does did was were is are am i me my we our".split())


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s", "e"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


_HAN_STOP = frozenset("用户戶我你他她的了是在和有个個吗嗎呢什么麼啥哪儿兒时時候那年前后後")


def words(text: str, *, chars: bool = False) -> frozenset[str]:
    """Content words (stemmed) and Chinese character pairs of `text`; `chars`: single
    characters too (an event said in other words: 摆摊 / 摆炸串摊)."""
    low = text.lower().replace("'s", " ")
    out = {_stem(w) for w in _EN_WORD.findall(low) if w not in STOP_EN and w not in _STOP_MORE}
    for run in _HAN.findall(text):
        run = run.replace("用户", "").replace("用戶", "")
        out.update(run[i : i + 2] for i in range(len(run) - 1))
        if len(run) == 1 or chars:
            out.update(ch for ch in run if ch not in _HAN_STOP)
    return frozenset(out)
