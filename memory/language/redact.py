"""Secrets never reach the memory: card numbers, passwords and PINs, keys and ID numbers
are replaced by a marker before a turn is journaled, extracted from or stored.

A remembered secret would be read back into later LLM requests, and copied into the
journal, Mem0's history and backups. The rules are local and cheap (the write path
runs them on every turn) and each is narrowed by a check that plain speech rarely
passes: card numbers by the Luhn digit and an issuer prefix, Chinese ID numbers by
their check digit, keyword-led secrets by a value right after "is"/"'s"/"是"/":" that
is digits, or a word that is neither a function word nor one of the very common ones
("the same as", "was wrong"). Digits come as STT writes them too: "4 7 1 1".
Hand-written: the libraries that do this (Presidio, detect-secrets) bring spaCy
models to download or rules for source code, not for speech.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from wordfreq import zipf_frequency

from memory.language.lexical import STOP_EN

MARK = "[redacted]"
# Words at least this common (Zipf scale: "same" 5.8, "hard" 5.5) describe a password
# rather than being one; rarer words ("sunshine" 4.2, "football" 5.1) are redacted.
COMMON_WORD_ZIPF = 5.5

_DIGITS = r"\d+(?:[ -]\d+)*"  # "4711", "4 7 1 1", "839 201"
# 13-19 digits with up to two spaces, dots or dashes between them ("4111 1111 1111 1111",
# "4111.1111.1111.1111", "4111  1111  1111  1111").
_CARD = re.compile(r"(?<![\d+])\d(?:[ .-]{0,2}\d){12,}(?!\d)")
_CARD_ISSUERS = re.compile(r"(?:4|5[1-5]|2[2-7]|3[47]|3[05689]|6)")  # Visa, MC, Amex, Diners/JCB, Discover/UnionPay
_CN_ID = re.compile(r"(?<![\d-])\d{6}[ -]?\d{8}[ -]?\d{3}[\dXx](?![\dXx])")  # also said in groups: 6-8-4
_CN_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_SSN = re.compile(r"(?<![\d-])\d{3}-\d{2}-\d{4}(?![\d-])|(?<![\d ])\d{3} \d{2} \d{4}(?![\d])")
# "SSN 123456789", "my social security number is 123 45 6789": nine digits after the word.
_SSN_WORD = re.compile(
    r"\b(?:ssn|social\s+security(?:\s+(?:number|no\.?|#))?|social)(?:\s+[\w'’]+){0,2}?"
    r"(?:\s+(?:is|was)\b|['’]s\b|\s*[:=#])?\s*(\d{3}[ -]?\d{2}[ -]?\d{4})(?!\d)",
    re.IGNORECASE,
)
# The 15-digit Chinese ID of before 1999: area (first digit 1-8), a yymmdd birth date, 3 digits.
_CN_ID15 = re.compile(r"(?<![\d-])[1-8]\d{5}[ -]?\d{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])[ -]?\d{3}(?![\dXx])")
_TOKEN = r"[A-Za-z0-9+=_-]"  # ASCII only: Chinese text has no spaces, and \w would take whole sentences
_KEYS = re.compile(
    r"\b(?:sk|pk|rk)[-_][A-Za-z0-9_-]{16,}"  # OpenAI, Stripe
    r"|\bgh[pousr]_[A-Za-z0-9]{20,}"  # GitHub
    r"|\bAKIA[0-9A-Z]{16}\b"  # AWS access key id
    # AWS secret access key: 40 characters of base64 with upper, lower case and a digit
    r"|(?<![A-Za-z0-9/+=])(?=[A-Za-z0-9/+]*\d)(?=[A-Za-z0-9/+]*[a-z])(?=[A-Za-z0-9/+]*[A-Z])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"
    r"|\bAIza[0-9A-Za-z_-]{30,}"  # Google
    r"|\bxox[abpr]-[A-Za-z0-9-]{10,}"  # Slack
    rf"|(?<!{_TOKEN})(?={_TOKEN}*\d)(?={_TOKEN}*[A-Za-z]){_TOKEN}{{32,}}(?!{_TOKEN})"  # any long key-like token
)
_EN_VERB = r"(?:\s+(?:is|was|are|were)\b|['’]s\b|\s*[:=])\s*"
_EN_VALUE = rf"[\"'“‘]?({_DIGITS}(?![\w])|[^\s\"'”’,;]+?)[\"'”’]?(?=[\s,;.!?]|$)"
_PASSWORD_WORD = r"(?:passwords?|passcodes?|pass\s+codes?|pass\s*words?|pw|pwd|passwd|login\s+code)"
# "password is hunter2", "my password's sunshine", "the password for my bank is X",
# "my password? it's X", "pw is X"; the words after the first that are neither function
# words nor very common are part of it ("blue monkey 77").
_EN_SECRET = re.compile(
    rf"\b{_PASSWORD_WORD}(?:\s+[\w'’]+){{0,4}}?"
    rf"(?:{_EN_VERB}|\s*[?!.,—–-]+\s*(?:it['’]?s|it\s+is|that['’]s|is)\s+)"
    rf"[\"'“‘]?({_DIGITS}(?![\w])|[^\s\"'”’,;]+?(?:\s+[^\s\"'”’,;.!?]+)*)[\"'”’]?(?=[\s,;.!?]|$)",
    re.IGNORECASE,
)
# "my passphrase is correct horse battery staple": all of it, to the end of the clause.
_EN_PASSPHRASE = re.compile(
    rf"\b(?:passphrases?|pass\s+phrases?|(?:password|pw)\s+(?:phrase|sentence)|secret\s+(?:phrase|words?)|seed\s+phrase|recovery\s+phrase)"
    rf"(?:\s+[\w'’]+){{0,3}}?{_EN_VERB}[\"'“‘]?([^.;!?\"”’\n]+?)[\"'”’]?(?=\s*(?:[.;!?\n]|,\s*(?:and|but)\b|$))",
    re.IGNORECASE,
)
# "my AWS secret key is ...", "the API token: ...": a long value after a key word.
_KEY_WORD = re.compile(
    r"\b(?:secret(?:\s+access)?\s+key|access\s+key|api\s+(?:key|token)|auth\s+token|private\s+key|token|secret)"
    rf"(?:\s+[\w'’]+){{0,2}}?{_EN_VERB}[\"'“‘]?([A-Za-z0-9/+=_.\-]{{16,}})",
    re.IGNORECASE,
)
# "my bank PIN is 4711", "the door code to my flat is 1 2 3 4"
_EN_CODE_SECRET = re.compile(
    r"\b(?:pin(?:\s+(?:code|number))?|cvv|cvc|security\s+code|verification\s+code|one[- ]time\s+code|otp"
    r"|(?:alarm|door|gate|safe|access|lock|locker|entry|unlock)\s+code)"
    rf"(?:\s+[\w'’]+){{0,4}}?{_EN_VERB}({_DIGITS})(?!\w)",
    re.IGNORECASE,
)
# "CVV 123", "PIN 4 7 1 1": the short codes also come without a verb. Upper case only
# for PIN, so that "pin 300 photos" (the verb) is left alone.
_BARE_CODE = re.compile(rf"(?:\bPIN|\b[Cc][Vv][Vv]2?|\b[Cc][Vv][Cc]2?)\s*:?\s*({_DIGITS})(?!\w)")
# "银行卡密码是839201", "验证码：4 7 1 1", "门禁密码为八三九二".
# Simplified and traditional keywords; "is", or "changed / set to" (密码改成了 abc123).
_ZH_SECRET_WORD = r"(?:密码|密碼|口令|验证码|驗證碼|校验码|校驗碼|安全码|安全碼|PIN码?|PIN碼|CVV)"
_ZH_SECRET = re.compile(
    _ZH_SECRET_WORD
    + r"[^\s，。！？,.!?]{0,6}?(?:是|为|為|:|：|=|改成了?|改为|改為|设成了?|設成了?|设为|設為|设置为|設置為)\s*"
    r"([A-Za-z0-9!@#$%^&*._\-]+(?:\s+[A-Za-z0-9!@#$%^&*._\-]+)*|[零〇一二三四五六七八九两兩幺]{3,})",
    re.IGNORECASE,
)
# The value straight after the word, with no "is" (银行卡密码839201, 验证码 4711): digits
# in it, four or more characters, so "密码有8位" is left alone.
_ZH_SECRET_BARE = re.compile(
    _ZH_SECRET_WORD
    + r"\s*((?=[A-Za-z0-9!@#$%^&*._\-]*\d)[A-Za-z0-9!@#$%^&*._\-]{4,}|[零〇一二三四五六七八九两兩幺]{4,})",
    re.IGNORECASE,
)


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch) * (2 if i % 2 else 1)
        total += d - 9 if d > 9 else d
    return total % 10 == 0


def _card_end(run: str) -> int | None:
    """Where the card number in a run of digits ends (it may run on into an expiry
    date or a CVV: "4111 1111 1111 1111 12 29"), or None if there is none."""
    ends = [i + 1 for i, ch in enumerate(run) if ch.isdigit()]
    for n in range(min(19, len(ends)), 12, -1):
        digits = re.sub(r"\D", "", run[: ends[n - 1]])
        if _CARD_ISSUERS.match(digits) and _luhn(digits):
            return ends[n - 1]
    return None


def _is_cn_id(match: re.Match[str]) -> bool:
    s = re.sub(r"[ -]", "", match.group()).upper()
    check = "10X98765432"[sum(int(c) * w for c, w in zip(s[:17], _CN_ID_WEIGHTS, strict=True)) % 11]
    return s[17] == check


def _secret_like(word: str) -> bool:
    """Digits or symbols, or a word that is neither a function word nor a common one."""
    if not word.isalpha():
        return True
    word = word.lower()
    return word not in STOP_EN and zipf_frequency(word, "en") < COMMON_WORD_ZIPF


def _is_secret_word(match: re.Match[str]) -> bool:
    """A value after "password is": digits or symbols, or a word that is not a common
    one ("the same as my email", "was wrong" describe a password; "sunshine" is one)."""
    return _secret_like(match.group(1).split()[0])


def _password_end(match: re.Match[str]) -> int:
    """Where a password's value ends: its first word, and the words after it while they
    look like part of it ("blue monkey 77"; not "and my name is Bob")."""
    start, end = match.span(1)
    words = list(re.finditer(r"\S+", match.string[start:end]))
    stop = start + words[0].end()
    for w in words[1:]:
        if not _secret_like(w.group().strip("\"'”’")):
            break
        stop = start + w.end()
    return stop


def _enough_digits(match: re.Match[str]) -> bool:
    return sum(ch.isdigit() for ch in match.group(1)) >= 3


def _always(_: re.Match[str]) -> bool:
    return True


# (name, pattern, check): a match that passes its check is redacted; its group 1 if it
# has one (the value after the keyword), else the whole match.
_RULES: tuple[tuple[str, re.Pattern[str], Callable[[re.Match[str]], bool]], ...] = (
    ("id_number", _CN_ID, _is_cn_id),
    ("id_number", _CN_ID15, _always),
    ("ssn", _SSN_WORD, _always),
    ("ssn", _SSN, _always),
    ("key", _KEYS, _always),
    ("key", _KEY_WORD, _always),
    ("password", _EN_PASSPHRASE, _always),
    ("password", _EN_SECRET, _is_secret_word),
    ("code", _EN_CODE_SECRET, _enough_digits),
    ("code", _BARE_CODE, _enough_digits),
    ("password", _ZH_SECRET, _always),
    ("password", _ZH_SECRET_BARE, _always),
)


def _redact_cards(text: str, found: list[str]) -> str:
    def replace(m: re.Match[str]) -> str:
        end = _card_end(m.group())
        if end is None:
            return m.group()
        found.append("card_number")
        return MARK + m.group()[end:]

    return _CARD.sub(replace, text)


def redact_secrets(text: str) -> tuple[str, list[str]]:
    """The text with every secret found replaced by `MARK`, and the kinds found (for
    logs and metrics: never the values)."""
    found: list[str] = []
    text = _redact_cards(text, found)
    for kind, pattern, check in _RULES:

        def replace(m: re.Match[str], kind: str = kind, check: Callable[[re.Match[str]], bool] = check) -> str:
            if MARK in m.group() or not check(m):
                return m.group()
            found.append(kind)
            if m.re.groups:
                start, end = m.span(1)
                if m.re is _EN_SECRET and not m.group(1)[:1].isdigit():
                    end = _password_end(m)
                return m.group()[: start - m.start()] + MARK + m.group()[end - m.start() :]
            return MARK

        text = pattern.sub(replace, text)
    return text, found
