"""What a memory is indexed under, beside what it says: write-time context.

A spoken turn alone often cannot be found by what it is about: "I've had them for three
years" answers "how long have you had the turtles?", and "I went there yesterday" was
said on a day the question names ("in May"). Contextual retrieval (indexing each
chunk with the text that situates it) is reported to halve the top-20 misses of
lexical and dense search alike. So the store indexes each turn under three parts:

- the turn itself (what is shown, unchanged);
- what it answers or continues: the turn said just before it in the session
  (`context`, usually the assistant's question), bounded;
- the days its relative expressions name, resolved against the day it was said
  ("yesterday" said on 8 May 2023 -> "7 May 2023"; 上周五 -> 2023年5月5日).

`IndexForm.embed` is the text embedded for the vector index (the turn and what it
answers), `IndexForm.extra` the words added to the lexical index (the context and the
dates, scored at a lower weight than the turn's own), `IndexForm.when` the resolved
spans, kept as data for matching the time a query names.
Pure functions, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date

from memory.language import dates
from memory.language.asking import tells_nothing

# The most of the turn before that a memory is indexed with: a question, or the end of
# a longer turn. Longer context would drown the turn in the embedding (and costs write time).
CONTEXT_CHARS = 200
# Stored with the index (`idx_v`): bump when `index_form` changes what it produces.
INDEX_VERSION = 5
# The payload key that says a turn only asks, telling nothing about the user
# (`asking.tells_nothing`): retrieval ranks it below what states something. Rows of older
# versions have none and are read from their text.
ASKS_KEY = "asks"  # set (true) only on the turns that do
ASKS_SINCE = 5  # the index version from which a row without the key does not ask
_CJK = re.compile(r"[\u3400-\u9fff]")
_ROLE = re.compile(r"^\s*(?:user|assistant|system)\s*:\s*", re.IGNORECASE)


@dataclass(frozen=True)
class IndexForm:
    """What a memory is indexed under besides its text."""

    embed: str  # the text whose vector is stored
    context: str = ""  # what the memory answers or continues ("" when none)
    dates: tuple[str, ...] = ()  # the resolved dates, in words
    when: tuple[dates.Span, ...] = field(default_factory=tuple)
    asks: bool = False  # the turn only asks: nothing told about the user (`asking.tells_nothing`)

    @property
    def extra(self) -> str:
        """Words for the lexical index beside the text's own."""
        return " ".join(p for p in (self.context, *self.dates) if p)

    def payload(self) -> dict[str, object]:
        """The payload keys the store keeps: the context and the spans (for scoring)."""
        out: dict[str, object] = {"idx_v": INDEX_VERSION}
        if self.asks:
            out[ASKS_KEY] = True
        if self.context:
            out["ctx"] = self.context
        if self.when:
            out["when"] = [s.iso() for s in self.when]
        if self.dates:
            out["dates"] = list(self.dates)
        return out


def context_part(context: Sequence[str]) -> str:
    """What a turn answers or continues: the last earlier item, its role label off, its end
    kept within `CONTEXT_CHARS`."""
    for item in reversed(context):
        text = _ROLE.sub("", item or "").strip().lstrip("…").strip()
        if text:
            return text if len(text) <= CONTEXT_CHARS else "…" + text[-CONTEXT_CHARS:].lstrip()
    return ""


def index_form(
    text: str, *, context: Sequence[str] = (), said_on: date | None = None, use_context: bool, use_dates: bool
) -> IndexForm:
    """The index of a memory: its text, plus (switched by the caller) the turn before it
    and the days its relative dates name, said on `said_on`."""
    ctx = context_part(context) if use_context else ""
    found = dates.mentions(text, said_on) if use_dates and said_on is not None else []
    chinese = bool(_CJK.search(text))
    words = tuple(dict.fromkeys(dates.describe(m.span, m.kind, chinese=chinese) for m in found))
    # The dates go to the lexical index and the spans, not into the embedded text: a
    # date in words moved the vector away from what the turn is about (LoCoMo hit@5 -1.2
    # points with them embedded; docs/retrieval-experiments.md).
    embed = f"{text}\n{ctx}" if ctx else text
    spans = tuple(dict.fromkeys(s for m in found for s in m.spans()))
    return IndexForm(embed, ctx, words, spans, asks=tells_nothing(text))
