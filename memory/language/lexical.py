"""Lexical side of retrieval: normalise, extract keywords, score keyword matches.

Dense similarity with a small multilingual embedder misses exactly the queries a
voice user asks most: short ones ("颜色"), first versus second person ("我喜欢的颜色"
against the stored "你喜欢的颜色"), and names. These pure functions supply the
lexical signal that the retriever fuses with the vector similarity:

- `normalise`: case, width and script folded (NFKC + casefold, traditional Chinese
  characters as simplified); the pronouns that name the user (你/我/您, I/me/you, ...)
  rewritten to one neutral form (用户, user), so the speaker's point of view stops
  mattering; numbers one form (160cm -> 160 cm, 08月 and 八月 -> 8 月). Applied to the
  query and to memory text alike; the stored text never changes.
- `question_focus`: the word a question asks for ("是啥职位"), which its answer seldom
  repeats; the retriever weighs it down.
- `keywords`: the content words of a message: English words minus stop words;
  Chinese segmented with jieba (precise mode) minus function and question words.
- `lexical_score`: per keyword 1.0 (a word of the memory, possibly only after
  normalisation or light stemming), 0.7 (inside a longer word of the memory),
  0.3 (only part of the keyword occurs), 0 otherwise; averaged over keywords.
- `index_text`: the normalised, segmented form stored in the payload key `lex` at
  write time, so Postgres full-text search (which cannot segment Chinese) has words.

Everything here is deterministic, needs no database and no network.
"""

from __future__ import annotations

import re
import threading
import unicodedata
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from memory.language import hanzi

# Stored with `lex` as `lex_v`; bump when `index_text` changes. Session start rewrites
# a user's rows of an older form (`MemoryStore.reindex_lex`); until then they are
# still found by the substring and vector stages, and always scored from their text.
# 2: numbers and letters are separate words, numbers lose leading zeros; 3: Chinese
# numerals before a unit are digits; 4: traditional characters as simplified.
LEX_VERSION = 4

USER_ZH = "用户"
USER_EN = "user"

# Exact match or match after normalisation / stemming; inside a longer word; a part only.
EXACT = 1.0
SUBSTRING = 0.7
PARTIAL = 0.3

_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CJK_RUN = re.compile(f"[{_CJK}]+")
# A run of CJK characters, a latin word (with an inner apostrophe), or a number.
# A number is its own word ("160cm" -> 160 cm, "iphone13" -> iphone 13) so that it
# matches however it is written next to it: "160厘米", "5月" (a CJK run ends it anyway).
_PIECE = re.compile(rf"([{_CJK}]+)|([a-z\u00c0-\u024f]+(?:['’][a-z]+)?)|([0-9]+)")

# 我/你/您 (and with 的) name the user, whoever speaks; 我们/你们/咱们 (a group),
# 自我 ("self") and the greetings 你好/您好 are left alone.
_ZH_PRONOUN = re.compile(r"(?<!自)[你我您](?![们好])(的)?")
_EN_PRONOUNS: dict[str, str] = {
    "i": USER_EN, "me": USER_EN, "myself": USER_EN, "you": USER_EN, "yourself": USER_EN,
    "my": "user's", "mine": "user's", "your": "user's", "yours": "user's",
    "i'm": "user is", "i've": "user has", "i'll": "user will", "i'd": "user would",
    "you're": "user is", "you've": "user has", "you'll": "user will", "you'd": "user would",
}  # fmt: skip
# A Chinese numeral before a unit of time, age, count or measure: "六月", "四千人",
# "二十五岁", "一个周". Not before 个 alone or 点: "一个", "一点" are function words.
_ZH_NUMERAL = re.compile(
    r"[零〇一二两三四五六七八九十百千万]+(?=个月|个周|个小时|月|日|号|岁|天|周|年|人|次|小时|分钟|公里|米|元|块)"
)
_EN_PRONOUN = re.compile(r"\b(?:" + "|".join(sorted(map(re.escape, _EN_PRONOUNS), key=len, reverse=True)) + r")\b")


# Function words and question words: they say how something is asked, not what about.
def _word_list(name: str) -> frozenset[str]:
    """The words of ``data/<name>.txt``, one a line ("#" starts a comment line)."""
    lines = (Path(__file__).with_name("data") / f"{name}.txt").read_text(encoding="utf-8").splitlines()
    return frozenset(w for w in (line.strip() for line in lines) if w and not w.startswith("#"))


STOP_EN: frozenset[str] = _word_list("stop_en")
STOP_ZH: frozenset[str] = _word_list("stop_zh")

_jieba_lock = threading.Lock()
_jieba_ready = False


def _jieba():
    """jieba, initialised once per process (loading its dictionary takes about a second)."""
    global _jieba_ready
    with warnings.catch_warnings():  # jieba 0.42 has invalid escapes in its regexes
        warnings.simplefilter("ignore", DeprecationWarning)
        import jieba

    if not _jieba_ready:
        with _jieba_lock:
            if not _jieba_ready:
                jieba.setLogLevel(60)
                jieba.initialize()
                _jieba_ready = True
    return jieba


@lru_cache(maxsize=65536)
def rarity(word: str) -> float:
    """How rare a word is in general language, 1 (as common as "the") to 8 (unseen).

    From wordfreq's Zipf frequency (log10 of occurrences per billion words): a
    query's "叫" or "feel" says less about which memory is meant than "表姐" or
    "pottery", whatever the user's own memories hold.
    """
    import wordfreq

    lang = "en" if word.isascii() else "zh"
    return min(8.0, max(1.0, 9.0 - wordfreq.zipf_frequency(word, lang)))


def warm_up() -> None:
    """Load the segmenter, the word frequencies and the character tables now (prewarm),
    not on the first turn."""
    import cn2an  # noqa: F401 - Chinese numerals' converter (`_digits`), here and not at the first number

    hanzi.warm_up()
    _jieba()
    analyse("你喜欢的颜色")
    rarity("颜色")
    rarity("colour")


def fold(text: str) -> str:
    """Case and width folded (full-width letters and digits become ASCII), traditional
    Chinese characters as simplified (memory/language/hanzi.py).

    The script is folded because one user's memories come in both: an STT may write
    Mandarin in traditional characters on one turn and the extraction model, or an
    earlier session, in simplified ("我女兒" asks about "你的女儿").
    """
    return hanzi.to_simplified(unicodedata.normalize("NFKC", text).casefold().replace("’", "'"))


def normalise(text: str, *, pronouns: bool = True) -> str:
    """Folded text, Chinese numerals before a unit as digits (六月 -> 6月), and the user's
    pronouns made neutral (你/我/您 -> 用户, I/you -> user).

    Who says "I" differs between a stored turn ("我喜欢蓝色"), a canonical fact
    ("你喜欢的颜色") and the question ("我喜欢的颜色是什么"); all of them mean the user.
    Numbers are written both ways too: "八月份" asks about "08月26日".
    """
    out = _ZH_NUMERAL.sub(_digits, fold(text))
    if pronouns:
        out = _ZH_PRONOUN.sub(lambda m: USER_ZH + ("的" if m.group(1) else ""), out)
        out = _EN_PRONOUN.sub(lambda m: _EN_PRONOUNS[m.group(0)], out)
    return out


def _digits(numeral: re.Match[str]) -> str:
    """The numeral as digits (cn2an), or as it was when it is no number ("万万")."""
    import cn2an  # loaded by the first Chinese numeral (prewarm's `warm_up`), not by every import (0.2 s)

    try:
        return str(cn2an.cn2an(numeral.group(0).replace("两", "二"), "normal"))
    except Exception:  # noqa: BLE001 - cn2an raises KeyError too ("七十〇年"); any failure keeps the text
        return numeral.group(0)


def stem(word: str) -> str:
    """A light English suffix stripper (hikes/hiking/hiked -> hik); CJK words unchanged.

    Good enough to match inflections of the same word; not a linguistic stemmer.
    """
    if not word.isascii() or len(word) <= 3:
        return word
    if word.endswith(("ies", "ied")) and len(word) > 4:
        return word[:-3] + "i"
    for suffix in ("ings", "ing", "ed", "es", "s", "e"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    return word[:-1] + "i" if word.endswith("y") and len(word) > 3 else word


def tokens(normalised: str, *, search: bool = False) -> list[str]:
    """Words of already normalised text, in order: jieba for CJK runs, regex for latin.

    `search=True` adds jieba's search-mode sub-words ("编程语言" also yields 编程, 语言),
    for the full-text index; scoring uses precise mode so a sub-word stays a substring.
    """
    out: list[str] = []
    for match in _PIECE.finditer(normalised):
        cjk, latin, number = match.groups()
        if cjk:
            jb = _jieba()
            out.extend(jb.cut_for_search(cjk) if search else jb.lcut(cjk))
        elif latin:
            word = re.sub(r"['’]s$", "", latin)
            out.append(word.replace("'", "").replace("’", ""))
        elif number:
            out.append(number.lstrip("0") or "0")  # "08月" is "8月"
    return out


def content_words(memory: Analysed) -> list[str]:
    """The content words of an analysed text (`analyse`, cached), sorted: a look-up reads
    them from the analysis its scoring made, without segmenting the text again."""
    return sorted(w for w in memory.words if _is_content(w))


def _is_content(word: str) -> bool:
    if not word or word in STOP_EN or word in STOP_ZH:
        return False
    if word.isascii():
        return len(word) > 1 or word.isdigit()
    return True


@lru_cache(maxsize=4096)
def _words(text: str, pronouns: bool) -> tuple[str, ...]:
    """All words of a message, normalised, in order. Cached: a look-up reads the same
    message for its keywords and its question focus, and the session's earlier turns
    and a prefetched transcript come back on later look-ups."""
    return tuple(tokens(normalise(text, pronouns=pronouns)))


def keywords(text: str, *, pronouns: bool = True) -> list[str]:
    """The content words of a message, normalised, unique, in order of appearance."""
    seen: dict[str, None] = {}
    for word in _words(text, pronouns):
        if _is_content(word):
            seen.setdefault(word, None)
    return list(seen)


# Question words after which the next word names what is asked for: "什么颜色",
# "是啥职位", "哪种运动", "多大年纪", "what colour", "which city".
_WH: frozenset[str] = frozenset("什么 啥 哪 哪儿 哪里 哪个 哪些 哪种 哪家 哪位 多少 几 多大 what which whose".split())


def question_focus(text: str, *, pronouns: bool = True) -> frozenset[str]:
    """Words that a question asks for rather than about: the word right after a question
    word (after a one-character measure word: 哪 种 运动), when it occurs nowhere else.

    The answer stands in for them: "我上司是啥职位" is answered by "我的上司是研发总监",
    which says 职位 nowhere, while memories that do say it are about someone else's.
    So they should count less in the lexical score than what the question is about.
    """
    words = _words(text, pronouns)
    asked: set[int] = set()
    for i, word in enumerate(words[:-1]):
        if word in _WH:
            j = i + 1
            if len(words[j]) == 1 and not words[j].isascii() and j + 1 < len(words):
                j += 1  # a measure word: 哪 种 运动, 几 个 人
            asked.add(j)
    focus = {words[j] for j in asked if _is_content(words[j])}
    elsewhere = {w for i, w in enumerate(words) if i not in asked}
    return frozenset(focus - elsewhere)


def index_text(text: str, *, pronouns: bool = True) -> str:
    """The lexical form stored with a memory (payload `lex`): normalised words and stems.

    Space-separated so that Postgres' 'simple' parser sees one word per token,
    Chinese included; search-mode segmentation and English stems widen recall.
    """
    seen: dict[str, None] = {}
    for word in tokens(normalise(text, pronouns=pronouns), search=True):
        if _is_content(word):
            seen.setdefault(word, None)
            seen.setdefault(stem(word), None)
    return " ".join(seen)


def search_terms(words: Iterable[str]) -> list[str]:
    """Keywords plus their stems, as full-text search terms (letters and digits only)."""
    seen: dict[str, None] = {}
    for word in words:
        for term in (word, stem(word)):
            if term and re.fullmatch(r"\w+", term):
                seen.setdefault(term, None)
    return list(seen)


@dataclass(frozen=True)
class Analysed:
    """A memory text prepared for scoring: normalised string, its words and their stems."""

    text: str
    words: frozenset[str]
    stems: frozenset[str]


@lru_cache(maxsize=16384)
def analyse(text: str, pronouns: bool = True) -> Analysed:
    """Normalise and segment a memory once; cached because a user's memories recur."""
    norm = normalise(text, pronouns=pronouns)
    words = frozenset(tokens(norm))
    return Analysed(norm, words, frozenset(stem(w) for w in words))


@dataclass(frozen=True)
class _Keyword:
    """What matching needs to know about a keyword, computed once per keyword."""

    word: str
    stem: str
    cjk: bool
    parts: tuple[str, ...]  # CJK: sub-words of 2 characters (1 for a 2-character word)
    head: str  # latin: the first 5 letters ("" when shorter)


@lru_cache(maxsize=8192)
def _keyword(word: str) -> _Keyword:
    cjk = not word.isascii()
    parts: tuple[str, ...] = ()
    if cjk:
        size = 2 if len(word) >= 3 else 1
        found = {word[i : i + size] for i in range(len(word) - size + 1)}
        parts = tuple(p for p in found if _CJK_RUN.fullmatch(p) and p not in STOP_ZH)
    return _Keyword(word, stem(word), cjk, parts, word[:5] if not cjk and len(word) >= 5 else "")


def match_level(keyword: str, memory: Analysed, *, partial: bool = True) -> float:
    """How well one keyword matches a memory: 1.0, 0.7, 0.3 or 0 (see the module doc)."""
    k = _keyword(keyword)
    if keyword in memory.words or k.stem in memory.stems:
        return EXACT
    if (k.cjk or len(keyword) >= 4) and keyword in memory.text:
        return SUBSTRING
    if partial and _part_matches(k, memory):
        return PARTIAL
    return 0.0


def _part_matches(k: _Keyword, memory: Analysed) -> bool:
    """Part of the keyword occurs: a CJK sub-word of 2 characters (of 1 for a 2-character
    keyword), or for latin a word of the memory inside the keyword or a shared 5-letter start."""
    if k.cjk:
        return any(p in memory.text for p in k.parts)
    if not k.head:
        return False
    return any((len(w) >= 4 and w in k.word) or w.startswith(k.head) for w in memory.words if w.isascii())


def match_levels(words: Sequence[str], memory: Analysed, *, partial: bool = True) -> list[float]:
    return [match_level(k, memory, partial=partial) for k in words]


def lexical_score(
    words: Sequence[str],
    memory: str | Analysed,
    *,
    weights: Sequence[float] | None = None,
    partial: bool = True,
    pronouns: bool = True,
) -> float:
    """Keyword match score of a memory in [0, 1]: the (weighted) mean of `match_level`.

    `weights` lets the caller count rare keywords more than common ones; without
    it every keyword counts the same.
    """
    if not words:
        return 0.0
    analysed = memory if isinstance(memory, Analysed) else analyse(memory, pronouns)
    return weighted_mean(match_levels(words, analysed, partial=partial), weights)


def weighted_mean(levels: Sequence[float], weights: Sequence[float] | None = None) -> float:
    """Mean of per-keyword match levels, optionally weighted (0 when there is nothing)."""
    if not levels:
        return 0.0
    if weights is None:
        return sum(levels) / len(levels)
    total = sum(weights)
    return sum(w * lv for w, lv in zip(weights, levels, strict=True)) / total if total > 0 else 0.0


def lex_fields(text: str, extra: str = "") -> dict[str, object]:
    """Payload keys the store writes with each memory: `lex` (see `index_text`) of the
    text and of the words it is indexed under beside it (`extra`: the turn it answers,
    its resolved dates), and its version `lex_v`. Never raises: a memory is worth more
    than its lexical index, and rows without `lex` are still found by the substring and
    vector stages."""
    try:
        return {"lex": index_text(f"{text}\n{extra}" if extra else text), "lex_v": LEX_VERSION}
    except Exception:  # noqa: BLE001 - the write must not fail because of the index
        import logging

        logging.getLogger(__name__).exception("could not derive the lexical form")
        return {}
