"""Secrets never reach the memory: the one redaction step every way in passes before
anything is journaled, logged, sent to the extraction model or stored.

- `redact_secrets(text)`: what a user said or typed (spoken and typed turns, context
  notes, archive messages, log attributes).
- `redact_document(doc)`: structured data coming in (a form's fields, an import):
  every string and number in it, however nested, walked without recursion; a value
  under a key that names a secret ("password", "card number", "密码") goes whole; a
  list of digit groups is also checked joined (a card number typed in four boxes).

A remembered secret would be read back into later LLM requests, and copied into the
journal, Mem0's history and backups. The rules (`secret_rules.py`) are local and cheap
(the write path runs them on every turn) and each is narrowed by a check digit or a
keyword. What they do not cover is listed in docs/hostile-input.md.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from memory.language.purpose_rules import PURPOSE_RULES
from memory.language.secret_rules import MARK, Rule, apply, find_spans
from memory.language.secret_rules import RULES as SHAPE_RULES
from memory.language.spoken import spoken_digits

__all__ = ["MARK", "RULES", "is_secret_field", "redact_document", "redact_secrets"]

# Secrets by their shape and keyword, then by what they are for (a security answer, a
# recovery phrase, a one-time or door code, a tax or travel document's number).
# A password spelled out goes first: the shape rules would take its first word alone.
RULES: tuple[Rule, ...] = (
    *(r for r in PURPOSE_RULES if r.name == "spelled_password"),
    *SHAPE_RULES,
    *(r for r in PURPOSE_RULES if r.name != "spelled_password"),
)


def redact_secrets(text: str, rules: Iterable[Rule] = RULES) -> tuple[str, list[str]]:
    """The text with every secret found replaced by `MARK`, and the kinds found (for
    logs and metrics: never the values).

    The rules read the text's digit form, then the text as it is (`spoken.py`: "four four seven
    one" -> 4471, 幺三八 -> 138): what they find there is replaced in the words the user
    said."""
    rules = tuple(rules)
    spoken = spoken_digits(text)
    if not spoken.pieces:
        return apply(text, rules)
    spans, found = find_spans(spoken.text, rules)
    merged: list[list[int]] = []
    for start, end in sorted(spoken.to_original(s, e) for s, e in spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    for start, end in reversed(merged):
        text = text[:start] + MARK + text[end:]
    text, kinds = apply(text, rules)  # what only the words show ("Hunter two")
    return text, found + kinds


# Field names (keys) whose value is a secret whatever it looks like: {"password": "sunshine"}.
_SECRET_FIELD = re.compile(
    r"pass(?:word|wd|code|phrase)|\bpw\b|\bpwd\b|\bpin\b|pin[_ -]?(?:code|number)|\bcvv|\bcvc|\bcsc\b"
    r"|security[_ -]?code"
    r"|\bssn\b|social[_ -]?security|card[_ -]?(?:number|no\b|num\b)|cardnumber|credit[_ -]?card|debit[_ -]?card"
    r"|\biban\b|account[_ -]?(?:number|no\b|num\b)|routing|sort[_ -]?code|api[_ -]?key|secret|token|private[_ -]?key"
    r"|\botp\b|one[_ -]?time|verification[_ -]?code|security[_ -]?(?:question|answer)|secret[_ -]?answer"
    r"|(?:door|gate|alarm|garage|locker|lock|safe|entry|access|unlock|backup|recovery)[_ -]?codes?"
    r"|combination|\bcombo\b|门禁|門禁|取件码|取件碼"
    r"|密码|密碼|口令|卡号|卡號|账号|帳號|验证码|驗證碼|安全码|安全碼|身份证|身份證|密保|密钥|密鑰|秘钥|令牌",
    re.IGNORECASE,
)
_DIGIT_GROUP = re.compile(r"\d[\d .-]*")


def is_secret_field(name: str) -> bool:
    """Does this field name say its value is a secret ("password", "Card number", "密码")?"""
    return bool(_SECRET_FIELD.search(name))


def _redact_scalar(value: Any, whole: bool, found: list[str]) -> Any:
    if isinstance(value, bool) or value is None:
        return value
    if whole and (not isinstance(value, str) or value.strip()):
        found.append("field")
        return MARK
    if isinstance(value, str):
        text, kinds = redact_secrets(value)
        found += kinds
        return text
    if isinstance(value, int | float):
        text, kinds = redact_secrets(str(value))
        if kinds:
            found += kinds
            return MARK
    return value


def _joined_secret(items: list[Any]) -> bool:
    """A list of digit groups ([4111, 1111, 1111, 1111], a card typed in four boxes) that
    holds a secret once joined with spaces, as it was meant."""
    groups = [str(v) for v in items if not isinstance(v, bool) and isinstance(v, str | int)]
    if len(groups) < 2 or not all(_DIGIT_GROUP.fullmatch(g.strip()) for g in groups):
        return False
    return bool(redact_secrets(" ".join(g.strip() for g in groups))[1])


def redact_document(doc: Any) -> tuple[Any, list[str]]:
    """A copy of a JSON-like document (dicts, lists, strings, numbers, booleans, None)
    with every secret replaced by `MARK`, and the kinds found (never the values).

    The one step for structured data from outside (forms from the frontend, imports by
    the operator): each string is redacted on its own (never joined with its neighbours,
    which would let one value's words hide another's secret), keys included; a value
    under a secret's key goes whole. Walked with an explicit stack, so no nesting depth
    can raise `RecursionError`; bound the input's size and depth before calling it."""
    found: list[str] = []
    # (container being built, key or index in it, value to redact, whole: under a secret's key)
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any, bool]] = [(root, 0, doc, False)]
    while stack:
        parent, slot, value, whole = stack.pop()
        if isinstance(value, dict):
            out: dict[Any, Any] = {}
            parent[slot] = out
            for key, item in value.items():
                name = key if isinstance(key, str) else str(key)
                clean_key, kinds = redact_secrets(name)
                found += kinds
                while clean_key in out:  # two keys whose secrets made them the same
                    clean_key += "'"
                out[clean_key] = None
                stack.append((out, clean_key, item, whole or is_secret_field(name)))
        elif isinstance(value, list | tuple):
            items = list(value)
            joined = not whole and _joined_secret(items)
            if joined:
                found.append("card_number")
            copy: list[Any] = [None] * len(items)
            parent[slot] = copy
            stack.extend((copy, i, item, whole or joined) for i, item in enumerate(items))
        else:
            parent[slot] = _redact_scalar(value, whole, found)
    return root[0], found
