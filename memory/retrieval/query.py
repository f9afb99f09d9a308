"""A message as a look-up reads it, parsed once (`Retriever.parse`) and passed down as a value.

The stages that rank by time (`structure.time_bonus`, `structure.when_bonus`) and by the
time a fact held (`validity.for_its_time`, `validity.current_first`) all read the days the
message names; they read them here, from one parse, not each from the text again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from functools import cached_property

from memory.language import dates


@dataclass(frozen=True)
class ParsedQuery:
    """What a look-up made of a message: the message, the part of it that is embedded and
    asks (`Retriever.embedding_text`: all of it, or the last sentences of a long one), the
    day it is asked on, the keywords and their weights (`Retriever.query_terms`); the days
    it names and whether it asks "when" are read from the asked part on first use."""

    text: str
    asked: str
    today: date
    words: tuple[str, ...]
    weights: tuple[float, ...]

    @cached_property
    def span(self) -> dates.Span | None:
        """The days the message names ("last week", 上个月), if any (`dates.query_span`)."""
        return dates.query_span(self.asked, self.today)

    @cached_property
    def asks_when(self) -> bool:
        return dates.asks_when(self.asked)


__all__ = ["ParsedQuery"]
