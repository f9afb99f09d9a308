"""Secrets never reach the memory: card numbers, passwords and PINs, keys and ID numbers
are replaced by a marker before a turn is journaled, extracted from or stored.

A remembered secret would be read back into later LLM requests, and copied into the
journal, Mem0's history and backups. The rules are local and cheap (the write path
runs them on every turn) and each is narrowed by a check that plain speech rarely
passes: card numbers by the Luhn digit and an issuer prefix, Chinese ID numbers by
their check digit, keyword-led secrets by a value right after "is"/"是"/":".
Hand-written: the libraries that do this (Presidio, detect-secrets) bring spaCy
models to download or rules for source code, not for speech.
"""

from __future__ import annotations

import re
from collections.abc import Callable

MARK = "[redacted]"

# 13-19 digits, single spaces or dashes between them ("4111 1111 1111 1111").
_CARD = re.compile(r"(?<![\d+])\d(?:[ -]?\d){12,18}(?!\d)")
_CARD_ISSUERS = re.compile(r"(?:4|5[1-5]|2[2-7]|3[47]|3[05689]|6)")  # Visa, MC, Amex, Diners/JCB, Discover/UnionPay
_CN_ID = re.compile(r"(?<!\d)\d{17}[\dXx](?![\dXx])")
_CN_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_SSN = re.compile(r"(?<![\d-])\d{3}-\d{2}-\d{4}(?![\d-])")
_KEYS = re.compile(
    r"\b(?:sk|pk|rk)[-_][A-Za-z0-9_-]{16,}"  # OpenAI, Stripe
    r"|\bgh[pousr]_[A-Za-z0-9]{20,}"  # GitHub
    r"|\bAKIA[0-9A-Z]{16}\b"  # AWS
    r"|\bAIza[0-9A-Za-z_-]{30,}"  # Google
    r"|\bxox[abpr]-[A-Za-z0-9-]{10,}"  # Slack
    r"|(?<![\w/+=-])(?=[\w/+=-]*\d)(?=[\w/+=-]*[A-Za-z])[\w/+=-]{32,}"  # any long token of letters and digits
)
# "password is hunter2", "my bank PIN: 4711", "the door code to my flat is 1234".
_EN_WORD = r"(?:passwords?|passcodes?|pass\s+codes?|passphrases?)"
_EN_CODE = (
    r"(?:pin(?:\s+(?:code|number))?|cvv|cvc|security\s+code|verification\s+code|one[- ]time\s+code|otp"
    r"|(?:alarm|door|gate|safe|access|lock|locker|entry|unlock)\s+code)"
)
_EN_LEAD = r"\s*(?:\s[\w'’]+){0,4}?\s*(?:\bis\b|\bwas\b|\bare\b|:|=)\s*"
_EN_VALUE = r"[\"'“‘]?([^\s\"'”’,;]+?)[\"'”’]?(?=[\s,;.!?]*(?:\s|$))"
_EN_SECRET = re.compile(rf"\b{_EN_WORD}{_EN_LEAD}{_EN_VALUE}", re.IGNORECASE)
_EN_CODE_SECRET = re.compile(rf"\b{_EN_CODE}{_EN_LEAD}{_EN_VALUE}", re.IGNORECASE)
# "CVV 123", "PIN 4711": the short codes also come without a verb.
_BARE_CODE = re.compile(r"\b(?:cvv2?|cvc2?|pin)\s*:?\s*(\d{3,8})(?!\d)", re.IGNORECASE)
# "银行卡密码是839201", "验证码：4711", "门禁密码为八三九二".
_ZH_SECRET = re.compile(
    r"(?:密码|口令|验证码|校验码|安全码|PIN码?|CVV)[^\s，。！？,.!?]{0,6}?(?:是|为|:|：|=)\s*"
    r"([A-Za-z0-9!@#$%^&*._\-]+|[零〇一二三四五六七八九两幺]+)",
    re.IGNORECASE,
)


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch) * (2 if i % 2 else 1)
        total += d - 9 if d > 9 else d
    return total % 10 == 0


def _is_card(match: re.Match[str]) -> bool:
    digits = re.sub(r"\D", "", match.group())
    return bool(_CARD_ISSUERS.match(digits)) and _luhn(digits)


def _is_cn_id(match: re.Match[str]) -> bool:
    s = match.group().upper()
    check = "10X98765432"[sum(int(c) * w for c, w in zip(s[:17], _CN_ID_WEIGHTS)) % 11]
    return s[17] == check


def _has_digit(match: re.Match[str]) -> bool:
    return any(ch.isdigit() for ch in match.group(1))


def _always(_: re.Match[str]) -> bool:
    return True


# (name, pattern, check): a match that passes its check is redacted; its group 1 if it
# has one (the value after the keyword), else the whole match.
_RULES: tuple[tuple[str, re.Pattern[str], Callable[[re.Match[str]], bool]], ...] = (
    ("card_number", _CARD, _is_card),
    ("id_number", _CN_ID, _is_cn_id),
    ("ssn", _SSN, _always),
    ("key", _KEYS, _always),
    ("password", _EN_SECRET, _always),
    ("code", _EN_CODE_SECRET, _has_digit),
    ("code", _BARE_CODE, _always),
    ("password", _ZH_SECRET, _always),
)


def redact_secrets(text: str) -> tuple[str, list[str]]:
    """The text with every secret found replaced by `MARK`, and the kinds found (for
    logs and metrics: never the values)."""
    found: list[str] = []
    for kind, pattern, check in _RULES:

        def replace(m: re.Match[str], kind: str = kind, check: Callable[[re.Match[str]], bool] = check) -> str:
            if MARK in m.group() or not check(m):
                return m.group()
            found.append(kind)
            if m.re.groups:
                start, end = m.span(1)
                return m.group()[: start - m.start()] + MARK + m.group()[end - m.start() :]
            return MARK

        text = pattern.sub(replace, text)
    return text, found
