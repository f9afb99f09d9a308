"""Does a user turn only ask? What the user said, not what the user asked, answers later.

NORMAL stores every user turn, questions included, and people ask the same things
again: "what's my sister's name?" asked last week resembles today's question far more
than "My sister is called Anna" does, and outranked it (issue 38). A turn that only asks
tells nothing new about the user, so retrieval ranks it below turns that state
something (`memory/retrieval/ranking.py`). The store decides once, when it writes the
turn (`IndexForm.asks`); rows written before carry no flag and are read here at look-up.

A turn only asks when every sentence in it is a question or says nothing on its own
(greetings, thanks, fillers, reactions), in English or Chinese, with or without
punctuation; the pre-filter's reading of clauses (`memory/language/prefilter/`)
decides what is a question and what discloses. Kept as telling something:

- any statement beside the question ("I just moved to Berlin, any tips?");
- in a question, a part that says something about the user before it ("my dog is
  sick, what should I do?"), where a part that only points at what is asked about
  (那个身高是155cm的人，联系电话是什么？) stays part of the question;
- a request for something to be done that names the user's own ("can you find a vet
  for my dog Max?", 你能帮我的狗旺财找个兽医吗): it tells there is a dog called Max;
- a question that names someone or something of the user's by name ("is my sister Anna
  coming on Friday?").

`tells_nothing` (what the store flags) widens this to a turn that asks among remarks in
which GATED's pre-filter finds nothing durable ("Hey Mel! Good to see you! How have you
been?"); a turn without a question is never flagged, whatever it says.

Pure functions, cached by text (a look-up reads the same candidates often).
"""

from __future__ import annotations

import re
from functools import lru_cache

from memory.language.prefilter import GateAction, normalise, prefilter
from memory.language.prefilter.clauses import SENT_SPLIT, read_clauses
from memory.language.prefilter.reading import read_clause
from memory.language.prefilter.self_reference import first_person

__all__ = ["only_asks", "tells_nothing"]

# A request that something be done ("can you find...", "could you book..."), not a
# request to be told or reminded, which asks for what memory holds.
_REQUEST_EN = re.compile(
    r"^(?:please )?(?:can|could|would|will) (?:you|u) (?:please |maybe |also )?"
    r"(?!(?:remember|recall|tell|remind|know|guess|say|see|think|believe|imagine)\b)[a-z]+"
    r"|^(?:please )?(?:help|find|book|get|buy|order|schedule|call|text|send|make|plan|look up) (?:me|my|us|our)\b"
)
_REQUEST_ZH = re.compile(
    r"(?:帮|给|替)(?:我|咱)(?!(?:想|回忆|记|查查我|看看我以前))[^，,]{0,4}(?:找|订|预订|买|约|安排|叫|联系|查|选|挑|做|准备|发|打)"
    r"|(?:帮|给|替)(?:我|咱)(?:的|家)"
)
# In a Chinese question, a part that is a noun phrase points at what is asked about:
# 对于我拥有的手机, 那个身高是155cm的人, 我要参加的活动是X的活动 (it ends in 的 + a noun).
_POINTING_ZH = re.compile(r"^(?:对于|关于|至于)|的[\u4e00-\u9fff]{1,4}$")
# What a speaker says around a question without telling anything: "sorry, I forgot",
# "quick question", "I was wondering", 我想问一下, 我忘了, 你还记得吗.
_ASKING_FRAME = re.compile(
    r"^(?:(?:sorry|excuse me|hey|so|ok|okay|oh|um|uh)\b[\s,]*)*"
    r"(?:i (?:forgot|forget|was wondering|wonder|want(?:ed)? to (?:know|ask)|'d like to (?:know|ask)|would like to "
    r"(?:know|ask)|need to know|have a question|can't remember|cannot remember|don't remember|do not remember)"
    r"|quick question|one more (?:thing|question)|just wondering|sorry|excuse me)$"
    r"|^(?:我|咱)?(?:想|要)?(?:再)?(?:问|请教)(?:一下|下|你)?(?:啊|哈|呀)?$|^请问$|^(?:我)?(?:忘了|忘记了|不记得了|记不清了)$"
    r"|^(?:我)?想知道$|^你(?:还)?记得吗$|^你知道吗$"
)
# Unpunctuated Chinese asks with a final particle or a wh-word that is not an indefinite
# ("几个" is also "a few").
_ASKS_ZH = re.compile(
    r"[吗呢么嘛]$|来着|什么(?!的)|谁|哪|多少|怎么(?:样|办)?(?![^，]*[了的])|为什么|为啥"
    r"|是不是|有没有|能不能|会不会|要不要"
)
_CJK = re.compile(r"[\u3400-\u9fff]")
_WH_IS_EN = re.compile(r"^(?:what|where|who|how|which|whose)(?:'s|s|'re|re)\b")
# Quoted text is a name or a title ("...的活动"), not a statement of the user's.
_QUOTED = re.compile(r'"[^"]{0,200}"')
# A dot inside a word (an e-mail address, a web address, "3.5") ends no sentence.
_INNER_DOT = re.compile(r"(?<=\w)\.(?=\w)")
# "my dog Max", "our son Leo" in the original text: the user's own, named.
_NAMED_OWN_EN = re.compile(r"\b(?:my|our) (?:[a-z]+ ){0,2}?(?:[a-z]+) (?!I\b)[A-Z][a-z]+\b")


@lru_cache(maxsize=4096)
def only_asks(text: str) -> bool:
    """True when the turn only asks: every sentence a question or content-free, and no
    part of it telling something about the user (see the module's docstring)."""
    if not text.strip():
        return False
    asked = False
    for sentence in SENT_SPLIT.split(_INNER_DOT.sub("", _QUOTED.sub("某", normalise(text)))):
        clauses = read_clauses(sentence)
        if not clauses:
            continue
        # A question sentence: its mark, or (unpunctuated speech) its last part asks. A wh-word
        # inside a statement (拍拍照什么的, 不怎么掉, 多放几个座椅) does not make it a question.
        marked = sentence.rstrip().endswith("?")
        asks = [_asks(c.text, c.question, marked) for c in clauses]
        is_question = marked or asks[-1]
        for clause, question in zip(clauses, asks, strict=True):
            if question:
                asked = True
                if _reveals(clause.text):
                    return False
                continue
            reading = read_clause(clause.text)
            if not reading.content or _ASKING_FRAME.match(clause.text):
                continue  # "ok", "thanks", "hmm", a reaction: says nothing
            if is_question and (not reading.disclosure or _POINTING_ZH.search(clause.text)):
                continue  # the thing asked about, pointed at: part of the question
            return False
    return asked and not _NAMED_OWN_EN.search(text)


@lru_cache(maxsize=4096)
def tells_nothing(text: str) -> bool:
    """True when the turn only asks (`only_asks`), or asks among remarks that tell nothing
    about the user, as GATED's pre-filter reads them ("Hey Mel! Good to see you! How have
    you been?", "Wow, that's cool! What happened?"): the pre-filter would store nothing of
    it, and it asks something. A turn with no question is never flagged here, whatever the
    pre-filter says: "Bart won the 100 metres" tells about someone, and is kept."""
    if only_asks(text):
        return True
    if prefilter(text).action is not GateAction.SKIP:
        return False
    # Questions said as such: in a sentence with its mark, or (unpunctuated speech) the last part.
    sentences = [x for x in SENT_SPLIT.split(normalise(text)) if x.strip()]
    marked = [c for x in sentences if x.rstrip().endswith("?") for c in read_clauses(x) if c.question]
    last = read_clauses(sentences[-1])[-1:] if sentences and "?" not in text and "？" not in text else []
    questions = marked or [c for c in last if c.question]
    return bool(questions) and not any(_reveals(q.text) for q in questions) and not _NAMED_OWN_EN.search(text)


def _asks(clause: str, question: bool, marked: bool) -> bool:
    """Is this clause a question: by the pre-filter's reading, a wh-word with the copula
    run in ("what's my sister called" without its mark), and in unpunctuated Chinese only
    with a final particle or a wh-word that is not an indefinite."""
    if not question:
        return bool(_WH_IS_EN.match(clause))
    return marked or not _CJK.search(clause) or bool(_ASKS_ZH.search(clause))


def _reveals(question: str) -> bool:
    """A question that tells something: a request for a task about the user's own."""
    if _REQUEST_EN.search(question) and first_person(question):
        return True
    return bool(_REQUEST_ZH.search(question))
