"""The self-question variant of a retrieval file: each store also holds its own queries.

NORMAL stores every user turn, questions included; people ask the same things again, so
a user who asked "what's my sister's name?" last week has that question in memory, and
it resembles today's question far more than the answer does. No evaluation file has a
stored question that resembles its queries, so none of them could show this. The
variant adds to each store, as earlier user turns of that user, every query of the store
and one paraphrase of it, each in a call of its own said before the query is asked.
`bench.retrieval.run --self-questions` writes them through the product's write path
(`MemoryStore.add_raw`, the same indexing a NORMAL turn gets) and reports each method on
the plain file and on this variant.

Paraphrases are made by rules, not kept as data: a frame a speaker puts around a question
asked again ("Remind me, ...", "... again?", 我想问一下, ...来着), and a few word swaps
(contractions, 什么/啥); a turn that is mostly statements and ends in one (MADial's) gets its sentences
in another order. Which rule a query gets depends only on its id (a CRC), so the variant
is the same on every run and machine. The rules are generic: none was written from an
item of the files.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from datetime import datetime, timedelta

from bench.common.evaldata import Query, RetrievalFile

# Memory ids of the added turns start with this: never a relevant id of the file.
PREFIX = "selfq:"
_CJK = re.compile(r"[\u3400-\u9fff]")
_SENTENCES = re.compile(r"(?<=[!?。！？])\s*|(?<=\.)(?!\w)\s*")  # not the dot of an e-mail address
_QUESTION_END = re.compile(r"[?？]\s*$")
_QUOTE = re.compile(r"[\"“”「」]")  # sentences inside a quote are a title, not what is said

# Word swaps a speaker makes between two askings; each applied where it matches.
_SWAPS_EN = (
    (r"\bWhat is\b", "What's"), (r"\bwhat is\b", "what's"), (r"\bWhat's\b", "What is"),
    (r"\bdid not\b", "didn't"), (r"\bdo not\b", "don't"), (r"\bI am\b", "I'm"), (r"\bI'm\b", "I am"),
    (r"\bis not\b", "isn't"), (r"\bWho is\b", "Who's"), (r"\bWhere is\b", "Where's"),
)  # fmt: skip
_SWAPS_ZH = (("是什么", "是啥"), ("什么", "啥"), ("哪个", "哪一个"), ("多少", "几"), ("吗？", "吗"))
# Frames around a question asked again: (prefix, suffix) on the question without its mark.
_FRAMES_EN = (
    ("Remind me, ", "?"), ("Quick question: ", "?"), ("", " again?"), ("Sorry, I forgot: ", "?"),
    ("Hey, ", "? Do you know?"),
)  # fmt: skip
_FRAMES_ZH = (("我想问一下，", "？"), ("", "来着？"), ("对了，", "？"), ("你还记得吗？", "？"), ("再问一下，", "？"))
# Frames around a turn that is mostly statements (it is said again, not asked).
_RESTATE_EN = ("As I said, ", "So, ", "You know, ")
_RESTATE_ZH = ("我之前说过，", "对了，", "你知道吗，")


@dataclass(frozen=True)
class SelfQuestion:
    """One added turn: a query (or its paraphrase) said in an earlier call."""

    memory_id: str
    store_id: str
    text: str
    session: str
    timestamp: str | None


def _pick(key: str, n: int) -> int:
    return zlib.crc32(key.encode("utf-8")) % n


def _swap(text: str, chinese: bool, key: str) -> str:
    """One word swap that applies, chosen by `key` among those that do."""
    if chinese:
        fits = [(a, b) for a, b in _SWAPS_ZH if a in text]
        if not fits:
            return text
        a, b = fits[_pick(key, len(fits))]
        return text.replace(a, b, 1)
    fits_en = [(a, b) for a, b in _SWAPS_EN if re.search(a, text)]
    if not fits_en:
        return text
    a, b = fits_en[_pick(key, len(fits_en))]
    return re.sub(a, b, text, count=1)


def paraphrase(query: Query) -> str:
    """The query said again in other words, by rule (see the module's docstring)."""
    text = " ".join(query.query.split())
    chinese = bool(_CJK.search(text))
    sentences = [s for s in _SENTENCES.split(text) if s.strip()]
    statements = [s for s in sentences if not _QUESTION_END.search(s)]
    swapped = _swap(text, chinese, query.id)
    told = len(sentences) > 1 and len(statements) * 2 >= len(sentences) and not _QUESTION_END.search(sentences[-1])
    if told and not _QUOTE.search(text):
        # Mostly statements, ending in one: said again, the last sentence first.
        reordered = [sentences[-1], *sentences[:-1]]
        frames = _RESTATE_ZH if chinese else _RESTATE_EN
        joint = "" if chinese else " "
        body = _swap(joint.join(s.strip() for s in reordered), chinese, query.id)
        return frames[_pick(query.id, len(frames))] + _lower_first(body)
    frames_q = _FRAMES_ZH if chinese else _FRAMES_EN
    prefix, suffix = frames_q[_pick(query.id, len(frames_q))]
    body = _QUESTION_END.sub("", swapped).rstrip("。.!！ ")
    if prefix and not chinese:
        body = _lower_first(body)
    return f"{prefix}{body}{suffix}"


def _lower_first(text: str) -> str:
    """The first letter in lower case after a frame, unless it starts a name ("I", "LGBTQ")."""
    first = text.split(" ", 1)[0]
    if first in ("I", "I'm", "I've", "I'd", "I'll") or first[1:2].isupper():
        return text
    return text[:1].lower() + text[1:]


def self_questions(data: RetrievalFile, asked: dict[str, datetime]) -> dict[str, list[SelfQuestion]]:
    """Per store, its queries and their paraphrases as turns said before the query:
    the query itself a day before it is asked (`asked`), the paraphrase two days before,
    each the only turn of its call."""
    out: dict[str, list[SelfQuestion]] = {s.store_id: [] for s in data.stores}
    for q in data.queries:
        if q.store_id not in out:
            continue
        when = asked.get(q.id)
        for n, (text, days) in enumerate(((q.query, 1), (paraphrase(q), 2))):
            said = (when - timedelta(days=days)).isoformat(timespec="minutes") if when is not None else None
            out[q.store_id].append(SelfQuestion(f"{PREFIX}{q.id}:{n}", q.store_id, text, f"{PREFIX}{q.id}:{n}", said))
    return out


__all__ = ["PREFIX", "SelfQuestion", "paraphrase", "self_questions"]
