"""The one quoting rule for text that memory shows the LLM: a line of JSON whose
strings no stored or submitted text can close, imitate or hide anything in.

Memories, the profile, conversation summaries, earlier conversations, forms and shared
contexts all come from users (or from a model repeating users). Each is shown as one
JSON object on one line between a block's tags (`memory/livekit/blocks.py`):

- JSON keeps a value on its line (a newline is `\\n`) and inside its string (a quote is
  `\\"`), so a stored `(personal_facts, 2099-12-31) - ...` or `{"said": "2099-12-31"}`
  stays part of one value.
- Angle brackets and every character that looks like one are written as `\\u` escapes:
  `<`, `>`, the characters whose compatibility form (NFKC) holds one (fullwidth `＜＞`,
  small `﹤﹥`; a test checks this against all of Unicode) and those that only look like
  them (`‹›«»〈〉《》⟨⟩❬❭❮❯˂˃ᐸᐳ...`). No text can spell a block's closing tag, in ASCII
  or in a look-alike.
- Invisible characters are escaped too: controls, format characters (zero-width
  spaces, bidi overrides, tag characters), line and paragraph separators, private use
  and lone surrogates. Nothing can hide between them or start a line of its own.

Escaping, not NFKC folding: the text stays exactly what was said (a name in fullwidth
letters is still that name), and a model that reads the JSON reads it back. The
standard library's `json` does the quoting; only the character table is ours.
"""

from __future__ import annotations

import json
import re

# Angle brackets and their look-alikes (forms and shared contexts used to map some of
# these to parentheses; they are escaped like the rest now).
# U+2329/U+232A are written as escapes: their canonical form is U+3008/U+3009, and an
# editor or tool that normalises the file (NFC) turned them into a second 〈〉 unnoticed.
LOOKALIKES = "<>﹤﹥＜＞‹›«»〈〉《》⟨⟩⟪⟫❬❭❮❯❰❱⦑⦒⦉⦊⧼⧽\u2329\u232a˂˃ᐸᐳ⋖⋗≺≻⸨⸩"
# Invisible characters, as ranges of Python 3.11's Unicode database: Cc (controls), Cf
# (format), Zl/Zp (line and paragraph separators), Cs (surrogates), Co (private use).
# tests/language/test_quoting.py checks them against `unicodedata` for every code point.
_INVISIBLE = (
    "\x00-\x1f\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f"
    "\u2028-\u202e\u2060-\u2064\u2066-\u206f\ud800-\udfff\ue000-\uf8ff\ufeff\ufff9-\ufffb"
    "\U000110bd\U000110cd\U00013430-\U00013438\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0001\U000e0020-\U000e007f\U000f0000-\U000ffffd\U00100000-\U0010fffd"
)
_ESCAPE = re.compile(f"[{re.escape(LOOKALIKES)}{_INVISIBLE}]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000  # JSON writes a character past the BMP as its UTF-16 surrogate pair
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def quote(value: object) -> str:
    """`value` as compact JSON on one line: non-ASCII text kept readable, angle brackets,
    their look-alikes and invisible characters escaped. `json.loads` gives `value` back."""
    return _ESCAPE.sub(_escape, json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def escaped(ch: str) -> bool:
    """Is this character written as an escape inside a memory block?"""
    return _ESCAPE.fullmatch(ch) is not None
