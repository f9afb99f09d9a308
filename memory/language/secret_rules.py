"""What a secret looks like in what people say or type: one named rule per shape.

Each rule finds the spans of a text that are a secret (only the value: "my PIN is
[redacted]" keeps its words) and is narrowed by a check that plain speech rarely passes:
a check digit (cards by Luhn, IBANs by mod 97, Chinese ID numbers), a keyword right
before the value ("password is", "密码是", "code for the building is"), or a value that
is not a word people use to describe a password ("the same as my email", "weak").
Digits come as STT writes them too: "4 7 1 1", "12-34-56".

`redact.py` applies them in order (each sees the marks of those before it); tests take
each rule out by name and check that a probe then gets through (tests/language/).
Hand-written: the libraries that do this (Presidio, detect-secrets) bring spaCy models to
download or rules for source code, not for speech.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from memory.language.lexical import STOP_EN

MARK = "[redacted]"
# Words at least this common (Zipf scale: "same" 5.8, "hard" 5.5) describe a password
# rather than being one; rarer words ("sunshine" 4.2, "football" 5.1) are redacted.
COMMON_WORD_ZIPF = 5.5
# Words that say what a password is like, not what it is ("my password is weak").
DESCRIBING = frozenset(
    """weak strong secure insecure simple easy hard long short expired wrong right correct incorrect
    invalid valid changed reset blocked locked compromised leaked hacked stolen forgotten saved stored
    written different similar temporary complicated complex required needed case-sensitive""".split()
)
# Words that end a spoken value rather than go on it ("... Bluebird77 yesterday").
ENDING = frozenset(
    """yesterday today tomorrow tonight now please thanks thank again somewhere anyway already anymore
    okay ok though too either everywhere here there sometime lately recently""".split()
)
# Number words that go on a spoken password ("Hunter two", "tiger seven seven").
NUMBER_WORDS = frozenset(
    """zero oh one two three four five six seven eight nine ten eleven twelve thirteen fourteen
    fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety
    hundred thousand""".split()
)

Span = tuple[int, int]
Finder = Callable[[str], Iterable[Span]]


@dataclass(frozen=True)
class Rule:
    """`find` gives the spans to replace; `kind` is what logs and metrics may say
    (never the value); `name` is unique (the tests take each rule out by it)."""

    name: str
    kind: str
    find: Finder
    needs: re.Pattern[str] | None = None  # a cheap search that every text with such a secret passes


# ----------------------------------------------------------------- pieces
_DIGITS = r"\d+(?:[ -]\d+)*"  # "4711", "4 7 1 1", "839 201", "12-34-56"
_EN_GAP = r"[\w'’]+"  # a word between a keyword and its verb: "the password *for my bank* is"
# Verbs between a keyword and its value, longest first (a regex takes the first that fits).
_EN_VERB = (
    r"(?:\s+(?:is|was|will|would|should|'ll)\s+(?:going\s+to\s+)?be\b"
    r"|\s*[?!.,—–-]+\s*(?:it['’]?s|it\s+is|that['’]s)\b"
    r"|\s+(?:is|was|are|were|to|as)\b|['’]s\b|\s*[:=])\s*"
)
_TOKEN = r"[A-Za-z0-9+=_-]"  # ASCII only: Chinese text has no spaces, and \w would take whole sentences
_ZH_VERB = (
    r"(?:是|为|為|:|：|=|就是|改成了?|改为|改為|换成了?|換成了?|变成了?|變成了?|设成了?|設成了?|设为|設為|"
    r"设置为|設置為|设置成了?|設置成了?|[设設用定]的是|都是|也是|还是|還是)"
)
_ZH_NUMERALS = "零〇一二三四五六七八九两兩幺"


def _secret_like(word: str) -> bool:
    """Digits or symbols, or a word that is neither a function word, nor one that
    describes a password, nor a common one."""
    word = word.strip("\"'“”‘’")
    if not word:
        return False
    if not word.replace("-", "").isalpha():
        return True
    low = word.lower()
    if low in STOP_EN or low in DESCRIBING:
        return False
    from wordfreq import zipf_frequency  # here: its import (with langcodes, ftfy) took ~1 s of a start

    return zipf_frequency(low, "en") < COMMON_WORD_ZIPF


def _value_end(text: str, start: int, end: int) -> int:
    """Where a spoken value ends: its first word, then the words after it while they look
    like part of it ("blue monkey 77", "Hunter two"; not "and my name is Bob")."""
    words = list(re.finditer(r"[^\s,;.!?]+(?:[.][^\s,;.!?]+)*", text[start:end]))
    if not words:
        return end
    stop = start + words[0].end()
    for w in words[1:]:
        word = w.group().strip("\"'”’")
        if word.lower() in ENDING or not (_secret_like(word) or word.lower() in NUMBER_WORDS):
            break
        stop = start + w.end()
    return stop


def _inside_mark(text: str, start: int, end: int) -> bool:
    for m in re.finditer(re.escape(MARK), text):
        if m.start() < end and start < m.end():
            return True
    return False


def _after_keyword(
    keyword: str,
    value: str,
    *,
    verb: str = _EN_VERB,
    gap: int = 4,
    check: Callable[[str], bool] = lambda v: True,
    extend: bool = False,
    flags: int = re.IGNORECASE,
) -> Finder:
    """A value after a keyword, a verb and up to `gap` words ("the PUK code *for my SIM* is
    12345678"). Each gap length is tried in turn, so that a first verb whose value is no
    secret ("password *to my* bank is X") does not hide the one after it."""
    key = re.compile(keyword, flags)
    # "is just sunflowerseeds": a softener between the verb and the value
    tails = [re.compile(rf"(?:\s+{_EN_GAP}){{{g}}}{verb}(?:(?:just|simply|literally)\s+)?[\"'“‘]?({value})", flags)
             for g in range(gap + 1)]  # fmt: skip

    def find(text: str) -> Iterator[Span]:
        for k in key.finditer(text):
            for tail in tails:
                m = tail.match(text, k.end())
                if m and check(m.group(1)):
                    start, end = m.span(1)
                    yield start, _value_end(text, start, len(text)) if extend and not m.group(1)[:1].isdigit() else end
                    break

    return find


def _pattern(regex: str, *, group: int = 0, check: Callable[[re.Match[str]], bool] = lambda m: True,
             flags: int = 0) -> Finder:  # fmt: skip
    compiled = re.compile(regex, flags)

    def find(text: str) -> Iterator[Span]:
        for m in compiled.finditer(text):
            if check(m):
                yield m.span(group)

    return find


def _enough_digits(value: str, n: int = 3) -> bool:
    return sum(ch.isdigit() for ch in value) >= n


# ----------------------------------------------------------------- cards
# 13-19 digits with up to two spaces, dots or dashes between them ("4111 1111 1111 1111",
# "4111.1111.1111.1111", "4111  1111  1111  1111").
_CARD = re.compile(r"(?<![\d+])\d(?:[ .-]{0,2}\d){12,}(?!\d)")
_CARD_ISSUERS = re.compile(r"(?:4|5[1-5]|2[2-7]|3[47]|3[05689]|6)")  # Visa, MC, Amex, Diners/JCB, Discover/UnionPay


def luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch) * (2 if i % 2 else 1)
        total += d - 9 if d > 9 else d
    return total % 10 == 0


def _card_shape(text: str) -> Iterator[Span]:
    """A card number by its issuer prefix and Luhn digit; it may run on into an expiry
    date or a CVV ("4111 1111 1111 1111 12 29"): only the number goes."""
    for m in _CARD.finditer(text):
        run = m.group()
        ends = [i + 1 for i, ch in enumerate(run) if ch.isdigit()]
        for n in range(min(19, len(ends)), 12, -1):
            digits = re.sub(r"\D", "", run[: ends[n - 1]])
            if _CARD_ISSUERS.match(digits) and luhn(digits):
                yield m.start(), m.start() + ends[n - 1]
                break


_CARD_NUMBER = r"\d(?:[ .-]{0,2}\d){11,18}(?!\d)"
_card_keyword = _after_keyword(
    r"\b(?:(?:credit|debit|bank|visa|amex|master\s*card)\s+)?card(?:\s+(?:number|no\.?|#))?"
    r"|\b(?:visa|amex|mastercard|discover)\b",
    _CARD_NUMBER,
    verb=rf"(?:{_EN_VERB}|\s+)",
)
_card_keyword_zh = _pattern(
    r"(?:卡号|卡號|信用卡|银行卡|銀行卡|储蓄卡|儲蓄卡|借记卡|借記卡|工资卡|工資卡)[^\s，。！？,.!?\d]{0,6}?"
    rf"{_ZH_VERB}?\s*({_CARD_NUMBER})",
    group=1,
)


def _card_after_keyword(text: str) -> Iterator[Span]:
    """12-19 digits after "card number" / "卡号", whatever their check digit (a card read
    out wrong, a card the Luhn check does not know)."""
    yield from _card_keyword(text)
    yield from _card_keyword_zh(text)


# ----------------------------------------------------------------- IBAN
# IBAN length per country (ISO 13616 registry).
_IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BR": 29,
    "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DK": 18, "DO": 28, "EE": 20, "EG": 29,
    "ES": 24, "FI": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28,
    "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20,
    "LB": 28, "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "MC": 27, "MD": 24, "ME": 22, "MK": 19,
    "MR": 27, "MT": 31, "MU": 30, "NL": 18, "NO": 15, "PK": 24, "PL": 28, "PS": 29, "PT": 25, "QA": 29,
    "RO": 24, "RS": 22, "SA": 24, "SC": 31, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "ST": 25, "SV": 28,
    "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20,
}  # fmt: skip
_IBAN_START = re.compile(r"(?<![A-Za-z0-9])([A-Za-z]{2})(\d{2})")


def iban_valid(iban: str) -> bool:
    """ISO 13616: the length of its country, and mod 97 of the rearranged number is 1."""
    iban = iban.upper()
    if _IBAN_LENGTHS.get(iban[:2]) != len(iban) or not iban.isalnum():
        return False
    digits = "".join(str(int(ch, 36)) for ch in iban[4:] + iban[:4])
    return int(digits) % 97 == 1


def _iban(text: str) -> Iterator[Span]:
    """An IBAN, written whole or in groups ("DE89 3704 0044 0532 0130 00"), by its
    country's length and its check digits."""
    for m in _IBAN_START.finditer(text):
        length = _IBAN_LENGTHS.get(m.group(1).upper())
        if length is None:
            continue
        chars, i = [m.group(1), m.group(2)], m.end()
        count = 4
        while count < length and i < len(text):
            if text[i].isascii() and text[i].isalnum():
                chars.append(text[i])
                count += 1
                i += 1
            elif text[i] in " -" and i + 1 < len(text) and text[i + 1].isascii() and text[i + 1].isalnum():
                i += 1
            else:
                break
        end_ok = i >= len(text) or not (text[i].isascii() and text[i].isalnum())
        if count == length and end_ok and iban_valid("".join(chars)):
            yield m.start(), i


# ----------------------------------------------------------------- ID numbers
_CN_ID = re.compile(r"(?<![\d-])\d{6}[ -]?\d{8}[ -]?\d{3}[\dXx](?![\dXx])")  # also said in groups: 6-8-4
_CN_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)


def _cn_id_valid(m: re.Match[str]) -> bool:
    s = re.sub(r"[ -]", "", m.group()).upper()
    check = "10X98765432"[sum(int(c) * w for c, w in zip(s[:17], _CN_ID_WEIGHTS, strict=True)) % 11]
    return s[17] == check


# After its keyword an ID number may come in any groups ("身份证是 11010119900307781 1").
_CN_ID_KEYWORD = (
    r"(?:身份证|身份證|(?:ID|id|identity)\s*(?:card|number|no\.?))[^\s，。！？,.!?\d]{0,4}?"
    r"(?:是|为|為|:|：|就是|\s+is\b)?\s*(\d(?:[ -]?\d){16}[ -]?[\dXx])(?![\dXx])"
)


def _cn_id_after_keyword(m: re.Match[str]) -> bool:
    digits = re.sub(r"[ -]", "", m.group(1)).upper()
    check = "10X98765432"[sum(int(c) * w for c, w in zip(digits[:17], _CN_ID_WEIGHTS, strict=True)) % 11]
    return digits[17] == check


# The 15-digit Chinese ID of before 1999: area (first digit 1-8), a yymmdd birth date, 3 digits.
_CN_ID15 = r"(?<![\d-])[1-8]\d{5}[ -]?\d{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])[ -]?\d{3}(?![\dXx])"
# Spaced: not the tail of a longer run of digit groups ("4111 123 45 6789"), but after a
# word and a space ("my number is 123 45 6789") as well as at the start.
_SSN = r"(?<![\d-])\d{3}-\d{2}-\d{4}(?![\d-])|(?<!\d)(?<!\d )\d{3} \d{2} \d{4}(?!\d)"
# "SSN 123456789", "my social security number is 123 45 6789": nine digits after the word.
_SSN_WORD = (
    r"\b(?:ssn|social\s+security(?:\s+(?:number|no\.?|#))?|social)(?:\s+[\w'’]+){0,2}?"
    r"(?:\s+(?:is|was)\b|['’]s\b|\s*[:=#]|\s*,\s*it['’]?s\b)?\s*(\d{3}[ -]?\d{2}[ -]?\d{4})(?!\d)"
)

# ----------------------------------------------------------------- keys and tokens
_KEYS = (
    r"\b(?:sk|pk|rk)[-_][A-Za-z0-9_-]{16,}"  # OpenAI, Stripe
    r"|\bgh[pousr]_[A-Za-z0-9]{20,}"  # GitHub
    r"|\bAKIA[0-9A-Z]{16}\b"  # AWS access key id
    # AWS secret access key: 40 characters of base64 with upper, lower case and a digit
    r"|(?<![A-Za-z0-9/+=])(?=[A-Za-z0-9/+]*\d)(?=[A-Za-z0-9/+]*[a-z])(?=[A-Za-z0-9/+]*[A-Z])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"
    r"|\bAIza[0-9A-Za-z_-]{30,}"  # Google
    r"|\bxox[abpr]-[A-Za-z0-9-]{10,}"  # Slack
    rf"|(?<!{_TOKEN})(?={_TOKEN}*\d)(?={_TOKEN}*[A-Za-z]){_TOKEN}{{32,}}(?!{_TOKEN})"  # any long key-like token
)
# A JSON Web Token: a base64url header that starts '{"' (eyJ), then its payload and
# signature, however short ("eyJhbGciOiJIUzI1NiJ9.e30.sig").
_keys = re.compile(_KEYS)
_KEY_RUN = re.compile(r"[A-Za-z0-9+=_/-]{16,}")


def _key_shape(text: str) -> Iterator[Span]:
    """Keys by their shape, looked for only in runs of 16 key characters or more (the
    pattern's look-aheads at every position of a long turn cost milliseconds)."""
    for run in _KEY_RUN.finditer(text):
        for m in _keys.finditer(text, run.start(), run.end()):
            yield m.span()


_JWT = r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]*)?"
_PEM = r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)"


def _key_value(value: str) -> bool:
    """After "API key is": 16 characters or more, or 8 or more with a letter and a digit."""
    return len(value) >= 16 or (
        len(value) >= 8 and bool(re.search(r"\d", value)) and bool(re.search(r"[A-Za-z]", value))
    )


_key_keyword = _after_keyword(
    r"\b(?:secret(?:\s+access)?\s+key|access\s+key|api\s+(?:key|token|secret)|auth(?:entication)?\s+token"
    r"|private\s+key|bearer\s+token|token|secret|key)",
    r"[A-Za-z0-9/+=_.\-]+",
    verb=rf"(?:{_EN_VERB}|\s+)",
    gap=4,  # "the WPA key on the router sticker is ..."
    check=_key_value,
)
_key_keyword_zh = _pattern(
    rf"(?:密钥|密鑰|秘钥|秘鑰|令牌|(?i:token|api\s*key|access\s*key(?:\s*(?:id|secret))?|(?:client\s*)?secret(?:\s*key)?))"
    rf"[^\s，。！？,.!?]{{0,4}}?{_ZH_VERB}?\s*([A-Za-z0-9/+=_.\-]{{8,}})",
    group=1,
    check=lambda m: _key_value(m.group(1)),
)


def _key_after_keyword(text: str) -> Iterator[Span]:
    yield from _key_keyword(text)
    yield from _key_keyword_zh(text)


# ----------------------------------------------------------------- passwords
# Not when a noun after it makes a compound that is no password ("my password manager is ...").
_PASSWORD_WORD = (
    r"\b(?:passwords?|passcodes?|pass\s+codes?|pass\s*words?|pw|pwd|passwd|pswd?|login\s+code)"
    r"(?!\s+(?:managers?|reset|policy|policies|prompts?|hints?|fields?|box|strength|generators?|requirements?"
    r"|rules|vault|keeper|protection|protected)\b)"
)
# A value ends at a space, a comma or semicolon, or . ! ? before a space or the end ("BobbyT!2023" is one).
_EN_VALUE = rf"{_DIGITS}(?![\w])|[^\s\"'”’,;]+?(?=[\"'”’]?(?:[\s,;]|[.!?](?:\s|$)|$))"
# "password is hunter2", "my password's sunshine", "the password for my bank is X",
# "my password? it's X", "pw is X", "is going to be X", "changed my password to X"; the
# words after the first that are neither function words nor common go with it.
_password_after_keyword = _after_keyword(_PASSWORD_WORD, _EN_VALUE, check=_secret_like, extend=True)
# "password qwerty123", "with password purpleRain84": no verb, a value that is no word.
_password_bare = _pattern(
    rf"{_PASSWORD_WORD}\s*:?\s+((?=[^\s,;]*\d)[^\s,;\"'”’]{{4,}}?)(?=[\"'”’]?(?:[\s,;]|[.!?](?:\s|$)|$))",
    group=1,
    flags=re.IGNORECASE,
)
# "my passphrase is correct horse battery staple": all of it, to the end of the clause.
_passphrase = _pattern(
    r"\b(?:passphrases?|pass\s+phrases?|(?:password|pw)\s+(?:phrase|sentence)|secret\s+(?:phrase|words?)"
    r"|seed\s+phrase|recovery\s+phrase)"
    r"(?:\s+[\w'’]+){0,3}?(?:\s+(?:is|was|are|were)\b|['’]s\b|\s*[:=])\s*[\"'“‘]?([^.;!?\"”’\n]+?)[\"'”’]?"
    r"(?=\s*(?:[.;!?\n]|,\s*(?:and|but)\b|$))",
    group=1,
    flags=re.IGNORECASE,
)
# "the pass is hunter2": "pass" is a bus pass, a mountain pass or an exam as often, so
# only a value with letters and digits counts.
_pass_word = _after_keyword(
    r"(?<!\bbus\s)(?<!\bboarding\s)\bpass\b",
    r"(?=[^\s,;]*\d)(?=[^\s,;]*[A-Za-z])[^\s,;\"'”’]+?(?=[\"'”’]?(?:[\s,;]|[.!?](?:\s|$)|$))",
    gap=1,
)
_use_as_en = _pattern(
    r"\b(?:use|make|set|choose|pick|try)\s+[\"'“‘]?([^\s\"'”’,;]+?)[\"'”’]?\s+(?:as|for)\s+"
    r"(?:the|my|your|our|a|an)?\s*(?:new\s+)?(?:password|passcode|pin|pw|login)\b",
    group=1,
    check=lambda m: _secret_like(m.group(1)),
    flags=re.IGNORECASE,
)
_is_my_password = _pattern(
    r"(?<![\w'’])([^\s\"'”’,;]+?)[\"'”’]?\s+(?:is|was|will\s+be)\s+(?:my|the|our)\s+(?:new\s+)?"
    r"(?:password|passcode|pin)\b",
    group=1,
    check=lambda m: _secret_like(m.group(1)) and not m.group(1).lower().startswith("what"),
    flags=re.IGNORECASE,
)
_use_as_zh = _pattern(
    rf"(?:用|拿|把)\s*([A-Za-z0-9!@#$%^&*._\-]+|[{_ZH_NUMERALS}]{{4,}})\s*"
    r"(?:当|當|做|作|作为|作為|来当|來當|设成|設成|设为|設為)(?:成|为|為)?(?:了)?\s*(?:新的?|我的)?\s*(?:密码|密碼|口令)",
    group=1,
)


def _use_as_password(text: str) -> Iterator[Span]:
    """The value before the word: "use hunter2 as the password", "hunter2 is my password",
    "用 hunter2 当密码"."""
    yield from _use_as_en(text)
    yield from _is_my_password(text)
    yield from _use_as_zh(text)


_SENTENCE = re.compile(r"[^.!?;。！？；\n]+(?:[.!?](?!\s|$)[^.!?;。！？；\n]*)*[?？]?")
_PASSWORD_TOPIC = re.compile(
    r"(?i:\b(?:passwords?|passcodes?|pass\s*words?|pwd|passwd|pswd?|log\s*-?in|creds?|credentials)\b)|密码|密碼|口令"
)
_PASSWORD_LIKE = re.compile(r"(?<![A-Za-z0-9!#$%^&*_+=@.-])[A-Za-z0-9!#$%^&*_+=@.-]{5,}(?![A-Za-z0-9!#$%^&*_+=@.-])")
# Not a password: an e-mail address, a host name, or the topic's own word ("1Password").
_NOT_PASSWORD_LIKE = re.compile(r"[\w.+-]*@[\w-]+(?:\.[\w-]+)+|[\w.-]+\.[a-z]{2,}|\d+pass(?:words?)?", re.IGNORECASE)


def _password_like_token(text: str) -> Iterator[Span]:
    """In a sentence about a password, a word that can only be one: letters with digits or
    symbols ("the password's just my dog's name plus 99, Biscuit99"). Not an email or a
    web address, and not digits alone (a year, a price)."""
    asked = False  # the sentence before asked about a password: "my Gmail password? Sunflower#7"
    for sentence in _SENTENCE.finditer(text):
        topic = bool(_PASSWORD_TOPIC.search(sentence.group()))
        if not (topic or asked):
            continue
        asked = topic and sentence.group().endswith(("?", "？"))
        for m in _PASSWORD_LIKE.finditer(sentence.group()):
            word = m.group().strip(".-")
            has_letter = any(ch.isalpha() for ch in word)
            has_other = any(ch.isdigit() or ch in "!#$%^&*_+=@" for ch in word)  # "case-sensitive" is a word
            if has_letter and has_other and not _NOT_PASSWORD_LIKE.fullmatch(word):
                start = sentence.start() + m.start() + m.group().index(word)
                yield start, start + len(word)


# ----------------------------------------------------------------- codes
_NOT_SECRET_CODES = frozenset(
    """zip post postal area country dialing dialling calling promo promotional discount coupon referral invite
    confirmation booking reservation reference tracking flight product item course class dress colour color
    source error status tax bar qr morse genetic airport airline language station stock sku hs sic naics
    ticket order voucher""".split()
)
_code_word = re.compile(
    r"\b(?P<k>codes?|pins?(?:\s+(?:codes?|numbers?))?|passcodes?|cvv2?|cvc2?|csc|otp|puk(?:\s+code)?"
    r"|one[- ]time\s+(?:code|password|pin)|key\s*safe|lock\s*box|key\s*box)\b",
    re.IGNORECASE,
)
_qualifier = re.compile(r"([A-Za-z][\w-]*)\s+$")
_code_tails = [re.compile(rf"(?:\s+{_EN_GAP}){{{g}}}{_EN_VERB}({_DIGITS})(?!\w)", re.IGNORECASE) for g in range(5)]
_code_bare = re.compile(rf"\s*[:?,]?\s*({_DIGITS})(?!\w)")
_code_more = re.compile(rf"\s*(?:,|;|&|\band\b|\bor\b)\s*({_DIGITS})(?!\w)", re.IGNORECASE)
# A code said with no verb is a secret only after these ("my locker code 4545", "PIN 4711").
_BARE_CODE_QUALIFIERS = frozenset(
    """door gate alarm garage locker lock safe access entry unlock security verification pin sms login
    backup recovery keypad""".split()
)


def _code_after_keyword(text: str) -> Iterator[Span]:
    """Digits after a code's keyword: "my bank PIN is 4711", "the code is 4711", "the code
    for the building is 4 0 9 1", "I set the new PIN to 8 2 4 6", "CVV 392". Not a zip,
    area, promo or booking code: those are for remembering."""
    for k in _code_word.finditer(text):
        q = _qualifier.search(text, max(0, k.start() - 40), k.start())
        qualifier = q.group(1).lower() if q else ""
        keyword = k.group("k").lower()
        if keyword.startswith("code") and qualifier in _NOT_SECRET_CODES:
            continue
        found = next((m for tail in _code_tails if (m := tail.match(text, k.end())) and _enough_digits(m.group(1))),
                     None)  # fmt: skip
        if found is None:
            # No verb: upper-case PIN ("pin 300 photos" is the verb), CVV and the like, or a
            # code with a qualifier that makes it a secret.
            strong = (
                k.group("k").startswith("PIN")
                or keyword.startswith(("cvv", "cvc", "csc", "puk", "otp", "one", "passcode", "key", "lock"))
                or (keyword.startswith("code") and qualifier in _BARE_CODE_QUALIFIERS)
            )
            m = _code_bare.match(text, k.end())
            found = m if strong and m and _enough_digits(m.group(1)) else None
        while found is not None:  # and the codes said after it: "backup codes: 5521-0098, 7713-4420"
            yield found.span(1)
            found = _code_more.match(text, found.end(1))
            if found and not _enough_digits(found.group(1)):
                break


# "the safe combination is 12-34-56", "my locker combo: 17 23 05"
_combination = _after_keyword(r"\b(?:combination|combo)s?\b", _DIGITS + r"(?!\w)",
                              check=lambda v: _enough_digits(v))  # fmt: skip

# ----------------------------------------------------------------- security answers
_security_answer_en = _pattern(
    r"\b(?:(?:security|secret)\s+(?:question\s+)?answers?|answers?\s+to\s+(?:my|the|your)\s+(?:security|secret)\s+"
    r"questions?)(?:\s+[\w'’]+){0,2}?(?:\s+(?:is|was|are|were)\b|['’]s\b|\s*[:=])\s*[\"'“‘]?([^.;!?\"”’\n,]+?)[\"'”’]?"
    r"(?=\s*(?:[.;!?\n,]|$))",
    group=1,
    flags=re.IGNORECASE,
)
_security_answer_zh = _pattern(
    r"(?:密保|安全问题|安全問題)[^\s，。！？,.!?]{0,6}?答案\s*(?:是|为|為|:|：|就是)\s*([^\s，。！？；,.!?;]{1,20})",
    group=1,
)


def _security_answer(text: str) -> Iterator[Span]:
    yield from _security_answer_en(text)
    yield from _security_answer_zh(text)


# ----------------------------------------------------------------- accounts
_account_en = _after_keyword(
    r"\b(?:(?:bank|checking|savings|current)\s+)?(?:account|acct)\s*(?:number|no\.?|#)|\brouting\s+number"
    r"|\bsort\s+code",
    _DIGITS + r"(?!\w)",
    verb=rf"(?:{_EN_VERB}|\s+)",
    gap=3,
    check=lambda v: _enough_digits(v, 6),
)
_account_zh = _pattern(
    r"(?:银行|銀行|开户行|開戶行|储蓄|儲蓄|工资|工資|对公|對公)[^\s，。！？,.!?\d]{0,4}?(?:账号|帳號|账户|帳戶)"
    rf"[^\s，。！？,.!?\d]{{0,4}}?{_ZH_VERB}?\s*({_DIGITS})(?![\d])",
    group=1,
    check=lambda m: _enough_digits(m.group(1), 8),
)


# "account 55779911", "my checking account is 2291 8830 4417", "acct 998877665", "the
# account? 40081277": the number straight after the word, or after "is" or a colon.
_account_plain = _pattern(
    rf"\b(?:account|acct)\b(?:\s*[?:#]\s*|\s+(?:is|was)\s+|['’]s\s+|\s+)({_DIGITS})(?![\w-])",
    group=1,
    check=lambda m: _enough_digits(m.group(1), 6),
    flags=re.IGNORECASE,
)
# "routing 011000015", "the ABA routing is 322271627": nine digits after the word.
_routing = _after_keyword(r"\b(?:routing|aba|rtn)\b", r"\d{3}[ -]?\d{3}[ -]?\d{3}(?![\d-])",
                          verb=rf"(?:{_EN_VERB}|\s+)", gap=2)  # fmt: skip
# 账号/账户 with no bank named before it: a number as long as a bank's (12 digits or more).
_account_zh_long = _pattern(
    rf"(?:账号|帳號|账户|帳戶)[^\s，。！？,.!?\d]{{0,4}}?{_ZH_VERB}?\s*({_DIGITS})(?!\d)",
    group=1,
    check=lambda m: _enough_digits(m.group(1), 12),
)


def _account_after_keyword(text: str) -> Iterator[Span]:
    """A bank account or routing number after its keyword (6 digits or more)."""
    yield from _account_en(text)
    yield from _account_zh(text)
    yield from _account_plain(text)
    yield from _routing(text)
    yield from _account_zh_long(text)


# ----------------------------------------------------------------- documents
# "passport no. 912803456", "my driver's licence number is D1234-56789-01234", 护照号码 G12345678.
_id_document_en = _after_keyword(
    r"\b(?:passport|(?:driver['’]?s?|driving)\s+licen[cs]e)(?:\s+(?:number|no\.?|#))?",
    r"[A-Za-z]{0,2}\d[\dA-Za-z-]{5,20}(?![\w-])|\d{2,4}(?: \d{2,4}){1,4}(?![\w-])",  # or read out in groups
    verb=rf"(?:{_EN_VERB}|\s+)",
    gap=0,
    check=lambda v: _enough_digits(v, 5),
)
_id_document_zh = _pattern(
    rf"(?:护照|護照|驾照|駕照|驾驶证|駕駛證)(?:号码|號碼|号|號)?[^\s，。！？,.!?\d]{{0,3}}?{_ZH_VERB}?\s*"
    r"([A-Za-z]{0,2}\d{7,12})(?![\dA-Za-z])",
    group=1,
)


def _id_document(text: str) -> Iterator[Span]:
    yield from _id_document_en(text)
    yield from _id_document_zh(text)


# ----------------------------------------------------------------- credentials
# The password of a URL: "postgres://admin:S3cretPa55@db.internal:5432/app" (the user and
# the host stay; the last "@" before the path ends the password, as a browser reads it).
_url_password = _pattern(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s/?#@:]*:([^\s/]+)@[^\s/?#@]+", group=1)
# A login and its password said together: "user admin pass Admin@2020", "creds are bob /
# Harbor#12", "username: root password: toor1234".
_credentials = _pattern(
    r"\b(?:user(?:\s*name)?|login|user\s*id|creds?|credentials)\b(?:\s+(?:is|are)\b|\s*[:=])?\s*[^\s/,;]{1,64}"
    r"(?:\s*/\s*|[,;]?\s+(?:and\s+)?(?:the\s+|my\s+)?(?:pass(?:word)?|pw|pwd|pswd?)\b(?:\s+is\b|\s*[:=])?\s*)"
    r"([^\s,;\"'”’]+?)(?=[\"'”’]?(?:[\s,;]|[.!?](?:\s|$)|$))",
    group=1,
    check=lambda m: _secret_like(m.group(1)),
    flags=re.IGNORECASE,
)


# ----------------------------------------------------------------- Chinese secret words
# "银行卡密码是839201", "验证码：4 7 1 1", "门禁密码为八三九二"; simplified and traditional
# keywords; "is", or "changed / set to" (密码改成了 abc123).
_ZH_SECRET_WORD = (
    r"(?:密码|密碼|口令|验证码|驗證碼|校验码|校驗碼|安全码|安全碼|PIN码?|PIN碼|CVV|取件码|取件碼|提取码|提取碼"
    r"|激活码|激活碼|授权码|授權碼|动态码|動態碼)"
)
_ZH_VALUE = rf"[A-Za-z0-9!@#$%^&*._\-]+(?:\s+[A-Za-z0-9!@#$%^&*._\-]+)*|[{_ZH_NUMERALS}]{{3,}}"
_ZH_UNIT = re.compile(r"\s*[年月日号號点點元块塊位个個分次岁歲%]")
_DATE = re.compile(r"\d{4}[-/.]\d{1,2}[-/.]\d{1,2}")


def _not_a_quantity(m: re.Match[str]) -> bool:
    """The value is not a date, an amount or a count ("密码过期时间是 2024年5月1日", "有 8 位")."""
    return not _ZH_UNIT.match(m.string, m.end(1)) and not _DATE.fullmatch(m.group(1))


_zh_password_after_keyword = _pattern(
    _ZH_SECRET_WORD + rf"[^\s，。！？,.!?]{{0,6}}?{_ZH_VERB}\s*({_ZH_VALUE})",
    group=1,
    check=_not_a_quantity,
    flags=re.IGNORECASE,
)
# The value straight after the word, with no "is" (银行卡密码839201, 验证码 836 219): digits
# in it, four or more, so "密码有8位" is left alone.
_zh_password_bare = _pattern(
    _ZH_SECRET_WORD
    + r"\s*((?=[A-Za-z0-9!@#$%^&*._\-]*\d)[A-Za-z0-9!@#$%^&*._\-]{4,}(?:\s+\d+)*|\d{1,4}(?:[ -]\d{1,4})+"
    + rf"|[{_ZH_NUMERALS}]{{4,}})",
    group=1,
    check=lambda m: _enough_digits(m.group(1), 4) or m.group(1)[0] in _ZH_NUMERALS,
    flags=re.IGNORECASE,
)

# "信用卡背面的安全码 7 2 6", "CVV：991": the three or four digits on a card's back.
_zh_card_code = _pattern(
    rf"(?:安全码|安全碼|校验码|校驗碼|(?i:cvv2?|cvc2?))[^\s，。！？,.!?\d]{{0,4}}?\s*{_ZH_VERB}?\s*(\d(?:\s?\d){{2,3}})(?!\d)",
    group=1,
)
# A description between the word and the value: "支付密码是六个数字 902318", "密码是生日后六位
# 880315". Four digits or more, or letters with digits; not a date, an amount or a count.
_zh_password_in_clause = _pattern(
    _ZH_SECRET_WORD + r"[^。！？；\n\dA-Za-z]{1,12}?"
    r"((?=[A-Za-z0-9!@#$%^&*._\-]*\d)(?=[A-Za-z0-9!@#$%^&*._\-]*[A-Za-z])[A-Za-z0-9!@#$%^&*._\-]{4,}|\d(?:[ -]?\d){3,})"
    r"(?![A-Za-z0-9:：./-])",
    group=1,
    check=_not_a_quantity,
    flags=re.IGNORECASE,
)

# "门禁的码是 3 3 9 1": a code (码) of a door, a lock or a safe, digits after it.
_zh_lock_code = _pattern(
    r"(?:门禁|門禁|门锁|門鎖|密码锁|密碼鎖|开锁|開鎖|保险箱|保險箱|保险柜|保險櫃|车库|車庫|大门|大門)"
    rf"[^\s，。！？,.!?\d]{{0,4}}?(?:码|碼|号码|號碼|组合|組合){_ZH_VERB}?\s*({_DIGITS})(?![\d])",
    group=1,
    check=lambda m: _enough_digits(m.group(1), 3),
)


# ----------------------------------------------------------------- the rules, in order
def _needs(regex: str, flags: int = re.IGNORECASE) -> re.Pattern[str]:
    return re.compile(regex, flags)


_DIGITS_3 = _needs(r"\d\D{0,3}\d\D{0,3}\d")
_ZH_NEEDS = _needs(r"[密码碼]|口令|(?i:cvv)", 0)
_PASSWORD_NEEDS = _needs(r"pass|\bpw|pwd|psw|login|creds?\b|credentials|密码|密碼|口令")
RULES: tuple[Rule, ...] = (
    Rule("url_password", "password", _url_password, _needs(r"://", 0)),
    Rule("card_shape", "card_number", _card_shape, _needs(r"\d{4}|\d[ .-]\d")),
    Rule("card_after_keyword", "card_number", _card_after_keyword, _needs(r"card|visa|amex|discover|卡")),
    Rule("iban", "iban", _iban, _needs(r"[A-Za-z]{2}\d{2}")),
    Rule("cn_id", "id_number", _pattern(_CN_ID.pattern, check=_cn_id_valid), _needs(r"\d{6}")),
    Rule("cn_id15", "id_number", _pattern(_CN_ID15), _needs(r"\d{6}")),
    Rule(
        "cn_id_after_keyword",
        "id_number",
        _pattern(_CN_ID_KEYWORD, group=1, check=_cn_id_after_keyword),
        _needs(r"身份|\bid\b|identity"),
    ),  # fmt: skip
    Rule(
        "id_document",
        "id_number",
        _id_document,
        _needs(r"passport|licen[cs]e|护照|護照|驾照|駕照|驾驶证|駕駛證"),
    ),  # fmt: skip
    Rule("ssn_after_keyword", "ssn", _pattern(_SSN_WORD, group=1, flags=re.IGNORECASE), _needs(r"ssn|social")),
    Rule("ssn_shape", "ssn", _pattern(_SSN), _needs(r"\d{3}[ -]\d{2}[ -]\d{4}")),
    Rule("pem_private_key", "key", _pattern(_PEM), _needs(r"-----BEGIN", 0)),
    Rule("jwt", "key", _pattern(_JWT), _needs(r"eyJ", 0)),
    Rule("key_shape", "key", _key_shape, _needs(r"[A-Za-z0-9+=_/-]{16}")),
    Rule("key_after_keyword", "key", _key_after_keyword, _needs(r"key|token|secret|密钥|密鑰|秘钥|秘鑰|令牌")),
    Rule("passphrase", "password", _passphrase, _needs(r"phrase|secret\s+word")),
    Rule("password_after_keyword", "password", _password_after_keyword, _needs(r"pass|\bpw|pwd|psw|login\s+code")),
    Rule("password_bare", "password", _password_bare, _needs(r"pass|\bpw|pwd|psw|login\s+code")),
    Rule(
        "use_as_password",
        "password",
        _use_as_password,
        _needs(r"password|passcode|\bpin\b|\bpw\b|login|密码|密碼|口令"),
    ),
    Rule("pass_word", "password", _pass_word, _needs(r"\bpass\b")),
    Rule("credentials", "password", _credentials, _needs(r"user|login|creds?\b|credentials")),
    Rule("security_answer", "answer", _security_answer, _needs(r"answer|答案")),
    Rule(
        "code_after_keyword",
        "code",
        _code_after_keyword,
        _needs(r"\b(?:codes?|pins?|passcodes?|cvv|cvc|csc|otp|puk|one[- ]time|key\s*safe|lock\s*box|key\s*box)\b"),
    ),  # fmt: skip
    Rule("combination", "code", _combination, _needs(r"combo|combination")),
    Rule(
        "account_after_keyword",
        "account_number",
        _account_after_keyword,
        _needs(r"account|acct|routing|\baba\b|\brtn\b|sort\s+code|账号|帳號|账户|帳戶"),
    ),  # fmt: skip
    Rule("zh_password_after_keyword", "password", _zh_password_after_keyword, _ZH_NEEDS),
    Rule("zh_password_bare", "password", _zh_password_bare, _ZH_NEEDS),
    Rule("zh_lock_code", "code", _zh_lock_code, _needs(r"[码碼]|組合|组合", 0)),
    Rule("zh_card_code", "code", _zh_card_code, _needs(r"安全|校验|校驗|cvv|cvc")),
    Rule("zh_password_in_clause", "password", _zh_password_in_clause, _ZH_NEEDS),
    Rule("password_like_token", "password", _password_like_token, _PASSWORD_NEEDS),
)


def _merged_spans(rule: Rule, text: str) -> list[list[int]]:
    """The spans `rule` finds in `text` outside the marks already there, overlapping ones
    merged, in order: what `apply` replaces and `find_spans` maps back."""
    if rule.needs is not None and not rule.needs.search(text):
        return []
    spans = sorted({s for s in rule.find(text) if s[1] > s[0] and not _inside_mark(text, *s)})
    merged: list[list[int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return merged


def apply(text: str, rules: Iterable[Rule] = RULES) -> tuple[str, list[str]]:
    """`text` with every span the rules find replaced by `MARK`, in rule order (each rule
    sees the marks of those before it), and the kinds found."""
    found: list[str] = []
    for rule in rules:
        merged = _merged_spans(rule, text)
        if not merged:
            continue
        for start, end in reversed(merged):
            text = text[:start] + MARK + text[end:]
        found += [rule.kind] * len(merged)
    return text, found


def find_spans(text: str, rules: Iterable[Rule] = RULES) -> tuple[list[Span], list[str]]:
    """What `apply` would replace, as spans of `text` itself (not of the text with the
    marks of earlier rules in it), and the kinds found: for a digit form of the text
    whose spans are mapped back to what the user said."""
    found: list[str] = []
    marks: list[list[int]] = []  # [start, end] in the working text, [start, end] in `text`

    def original(pos: int) -> int:
        shift = 0
        for cur_start, cur_end, start, end in marks:
            if cur_end <= pos:
                shift += (end - start) - (cur_end - cur_start)
        return pos + shift

    work = text
    for rule in rules:
        merged = _merged_spans(rule, work)
        if not merged:
            continue
        for start, end in reversed(merged):
            orig = [original(start), original(end)]
            delta = len(MARK) - (end - start)
            for mark in marks:
                if mark[0] >= end:
                    mark[0] += delta
                    mark[1] += delta
            marks.append([start, start + len(MARK), *orig])
            work = work[:start] + MARK + work[end:]
        found += [rule.kind] * len(merged)
    return sorted((m[2], m[3]) for m in marks), found
