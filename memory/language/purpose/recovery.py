"""Recovery phrases: after a word that names them, or by their shape alone (twelve
words or more in a row from the BIP-39 list, which the `mnemonic` package ships).

A phrase read out whole gives away a wallet, and nobody says one without naming it
except when reading it off.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache

from memory.language.lexical import STOP_EN
from memory.language.secret_rules import _EN_VERB, _ZH_VERB, Span, _pattern


# ----------------------------------------------------------------- recovery phrases
@cache
def _bip39() -> tuple[frozenset[str], frozenset[str]]:
    from mnemonic import Mnemonic

    return frozenset(Mnemonic("english").wordlist), frozenset(Mnemonic("chinese_simplified").wordlist)


_RECOVERY_WORD = (
    r"(?:(?:seed|recovery|backup|mnemonic|wallet|secret)\s+(?:phrase|words?|sentence|seed)s?|mnemonic"
    r"|助记词|助記詞|恢复短语|恢復短語|恢复词|恢復詞|种子短语|種子短語)"
)
_recovery_after_word = _pattern(
    rf"(?i:{_RECOVERY_WORD})(?:[\w'’ ]{{0,30}}?(?:{_EN_VERB}|{_ZH_VERB}|\s*[:：]))\s*"
    r"[\"'“‘]?((?:[A-Za-z]+|[\u4e00-\u9fff])(?:[\s,，、]+(?:[A-Za-z]+|[\u4e00-\u9fff])){3,})",
    group=1,
)
PHRASE_WORDS = 12  # the shortest recovery phrase BIP-39 defines


def _recovery_shape(text: str) -> Iterator[Span]:
    """Twelve words or more in a row from the BIP-39 list ("abandon ability able ..."):
    plain speech runs out of such words in four or five. A count over the text's words
    (a trailing comma allowed); positions are looked up only for a run that qualifies."""
    tokens = text.lower().split()
    if len(tokens) < PHRASE_WORDS:
        return
    english, _ = _bip39()
    runs: list[tuple[int, int]] = []
    start = count = 0
    for i, token in enumerate(tokens):
        if token.rstrip(",.!?;") in english and (count == 0 or not tokens[i - 1].endswith((".", "!", "?", ";"))):
            if count == 0:
                start = i
            count += 1
            continue
        if count >= PHRASE_WORDS:
            runs.append((start, start + count))
        count = 1 if token.rstrip(",.!?;") in english else 0  # a sentence's end starts a new run
        start = i
    if count >= PHRASE_WORDS:
        runs.append((start, start + count))
    if not runs:
        return
    spans = [m.span() for m in re.finditer(r"\S+", text)]
    for first, end in runs:
        lo, hi = spans[first][0], spans[end - 1][1]
        if _random_words(text[lo:hi].lower()):
            yield lo, hi - (1 if text[hi - 1] in ",.!?;" else 0)


def _random_words(run: str) -> bool:
    """Drawn from the list at random, not speech: at most four different function words
    ("about", "again", "all" are on the list; a sentence has one every other word, and
    "the", "a", "to", "of", "and", "I" are not on it). Different ones: a random draw may
    repeat a word ("hello" five times), speech varies them."""
    return len({w for w in re.findall(r"[a-z]+", run) if w in STOP_EN}) <= 4


def recovery_phrases(text: str) -> Iterator[Span]:
    yield from _recovery_after_word(text)
    yield from _recovery_shape(text)
