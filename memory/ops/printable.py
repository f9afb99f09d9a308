"""Stored text on an operator's terminal: control characters made visible, never sent.

A user's typed turn can hold terminal escape sequences (ESC ] 0 ; title BEL sets the
window title, ESC [ 2 J clears the screen, the single byte CSI 0x9b does the same on some
terminals) and bidi overrides that reorder what is shown. Printed raw by `memory.admin
show`, they would act on the operator's terminal. `printable` writes each such character
as an escape (`\\x1b`, `\\u202e`); `terminal_json` keeps JSON faithful (the same string
once parsed) but escapes the characters `json.dumps` leaves raw (C1 controls, DEL,
format characters, line separators). Hand-written: the standard library has the test
(`str.isprintable`, `unicodedata.category`) but no function that escapes only these.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

_ESCAPED = frozenset(("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"))  # Zs (a space of any width) stays
_NOT_PLAIN = re.compile(r"[^\x20-\x7e]")


def _unsafe(ch: str) -> bool:
    return unicodedata.category(ch) in _ESCAPED


def printable(text: str) -> str:
    """`text` with every control or format character written as a visible escape."""
    if text.isprintable():
        return text

    def escape(m: re.Match[str]) -> str:
        ch = m.group()
        if not _unsafe(ch):
            return ch
        code = ord(ch)
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"

    return _NOT_PLAIN.sub(escape, text)


def terminal_json(doc: Any, **kwargs: Any) -> str:
    """`json.dumps(doc, ensure_ascii=False, **kwargs)`, with every control or format
    character inside a string as a `\\uXXXX` escape: the same data once parsed, nothing
    a terminal acts on. (The newlines of `indent` are outside strings and stay.)"""
    text = json.dumps(doc, ensure_ascii=False, **kwargs)

    def escape(m: re.Match[str]) -> str:
        ch = m.group()
        if ch == "\n" or not _unsafe(ch):
            return ch
        return json.dumps(ch)[1:-1]  # \\u001b, \\u202e, a surrogate pair for the astral ones

    return _NOT_PLAIN.sub(escape, text)
