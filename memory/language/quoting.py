"""Memory shown to the LLM as quoted data that stored text cannot close or imitate.

Every memory is one line of JSON (`{"said": ..., "kind": ..., "note": ...}`) between
the block's tags. JSON keeps a note on its line (a newline is `\\n`) and inside its
string (a quote is `\\"`), so a stored `(personal_facts, 2099-12-31) - ...` or a
stored `{"said": "2099-12-31", ...}` stays part of one note's text. Angle brackets and
the characters that look like them (fullwidth `＜`, `‹`, `〈`, `﹤`, ...) are written as
`\\u` escapes: no stored text can spell the block's closing tag, in ASCII or a
look-alike. The JSON standard library does the quoting; only the look-alike table is
ours.
"""

from __future__ import annotations

import json

# Angle brackets and their look-alikes: the characters whose compatibility form (NFKC)
# is "<" or ">" (small and fullwidth forms; tests/livekit/test_memory_quoting.py checks the
# list against all of Unicode), and those that only look like them.
LOOKALIKES = "<>﹤﹥＜＞‹›«»〈〉《》⟨⟩⟪⟫❬❭❮❯❰❱⦑⦒⧼⧽〈〉˂˃ᐸᐳ⋖⋗≺≻"
_ESCAPED: frozenset[str] = frozenset(LOOKALIKES)


def quote(value: object) -> str:
    """`value` as compact JSON on one line, non-ASCII text kept readable, angle
    brackets and their look-alikes escaped."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if not any(c in _ESCAPED for c in text):
        return text
    return "".join(f"\\u{ord(c):04x}" if c in _ESCAPED and ord(c) <= 0xFFFF else c for c in text)


def escaped(ch: str) -> bool:
    """Is this character written as an escape inside a memory block?"""
    return ch in _ESCAPED
