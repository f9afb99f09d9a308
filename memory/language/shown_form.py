"""Text in the form it is stored and shown in: NFKC, no control or format characters,
whitespace collapsed to single spaces.

A bound on characters must count what the model will see: NFKC turns some characters
into many ("ﷺ" is 18 once normalised, a fullwidth form into its ASCII), so a note
counted before normalisation could pass its bound eighteen times over. Storing the
normalised text makes the count exact and a later display of it cost nothing more.
"""

from __future__ import annotations

import unicodedata

# Control (Cc), format (Cf: zero-width, bidi overrides), surrogates, private use, unassigned;
# line and paragraph separators become spaces with the rest of the whitespace.
_DROPPED = frozenset(("Cf", "Cs", "Co", "Cn"))


def shown_form(text: str) -> str:
    """`text` as one line of normalised text (NFKC, controls gone, single spaces)."""
    normal = unicodedata.normalize("NFKC", text)
    kept = "".join(
        " " if unicodedata.category(ch) in ("Cc", "Zl", "Zp") else ch
        for ch in normal
        if unicodedata.category(ch) not in _DROPPED
    )
    return " ".join(kept.split())
