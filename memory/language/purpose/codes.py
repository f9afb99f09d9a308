"""Codes named by what they open: one-time and door codes, a card's back code and
expiry, a bank's branch code, a bare PIN, codes with letters, passwords spelt out.

A number alone is not a secret (quantities, times, prices); the word that says what it
is for, in the same clause, is what makes it one.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from memory.language.secret_rules import _EN_VERB, _ZH_VERB, Span, _after_keyword, _pattern

# ----------------------------------------------------------------- one-time and door codes
# A number that is not a quantity, a time, a price, a year or a phone number.
_CODE_NUMBER = re.compile(r"(?<![A-Za-z0-9_$£€¥#.,:/-])(\d(?:-?\d){3,7})(?![A-Za-z0-9_%$£€¥:/-]|[.,]\d)")
AFTER_NUMBER_UNIT = re.compile(
    r"\s*(?:minutes?|mins?|seconds?|secs?|hours?|hrs?|days?|weeks?|months?|years?|dollars?|pounds?|euros?|yuan"
    r"|bucks|quid|percent|people|times|miles?|km|kilometres?|kilometers?|meters?|metres?|feet|steps|calories"
    r"|points?|pages?|words?|followers?|views?|likes?|votes?|students?|users?|items?|rooms?"
    r"|分钟|分鐘|秒|小时|小時|天|元|块|塊|块钱|個|个|位|次|年|月|日|号|號|点|點|岁|歲|人|米|公里)",
    re.IGNORECASE,
)
_BEFORE_NUMBER = re.compile(
    r"(?:\b(?:since|from|until|till|by|before|after|year|number|no\.?|room|flat|apt|apartment|suite|unit"
    r"|bus|route|flight|platform|gate|order|ticket|invoice|extension|ext\.?|page|model|version|call|phone|dial"
    r"|about|around|over|under|costs?|paid|pay|spent|earn(?:ed)?|price|only|just\s+over|nearly|almost)"
    r"|手机|手機|電話|电话|订单|訂單|房间|房間|航班|尾号|尾號|快递|快遞|单号|單號)(?:号|號)?\s*$",
    re.IGNORECASE,
)
_OTP_CUE = re.compile(
    r"\b(?:text(?:ed)?\s+me|texted|sms|sent\s+(?:me|to\s+my\s+phone)|got\s+(?:a|the|this)\s+(?:text|code|message)"
    r"|verification|verify|2fa|two[- ]factor|two[- ]step|authenticator|one[- ]time|otp|log(?:ging)?\s*-?in"
    r"|sign(?:ing)?\s*-?in|confirm(?:ation)?\s+code|security\s+code|auth\s+code|expires?\s+in"
    r"|popped\s+up|came\s+(?:through|in)|just\s+(?:got|came|arrived|received)|the\s+code)\b"
    r"|短信|验证|驗證|动态|動態|登录|登錄|登陆|校验|校驗|刚收到|剛收到|发来|發來|收到的|"
    r"(?<![号號页頁尺邮郵编編条條维維])码(?!数|數|头|頭)",
    re.IGNORECASE,
)
_DOOR_CUE = re.compile(
    r"\b(?:keypad|key\s*pad|buzzer|intercom|lock\s*box|key\s*safe|keysafe|alarm|garage|padlock|door|gate"
    r"|punch\s+in|key\s+in|tap\s+in|to\s+get\s+in|let\s+(?:yourself|him|her|them)\s+in|disarm)\b"
    r"|门禁|門禁|开门|開門|进门|進門|大门|大門|门锁|門鎖|密码锁|密碼鎖|保险箱|保險箱|保险柜|保險櫃|车库|車庫",
    re.IGNORECASE,
)
# Not a gate at an airport or a house's door number.
_NOT_DOOR = re.compile(
    r"\b(?:gate\s+[A-Z]?\d+|door\s+(?:number|no\.?)|next\s+door|door\s+to\s+door|\d+\s+doors?)\b", re.IGNORECASE
)
_SAID_IS = re.compile(
    r"(?:\b(?:is|was|it['’]?s|are|ends\s+(?:in|with)|uh|um|er|erm),?|[:=]|是|为|為)\s*$", re.IGNORECASE
)
_CLAUSE = re.compile(r"[^.!?;。！？；\n]+")


def _bare_numbers(text: str, cue: re.Pattern[str], not_cue: re.Pattern[str] | None) -> Iterator[Span]:
    for clause in _CLAUSE.finditer(text):
        part = clause.group()
        if not cue.search(part) or (not_cue is not None and not_cue.search(part)):
            continue
        for m in _CODE_NUMBER.finditer(part):
            digits = m.group(1).replace("-", "")
            if len(digits) < 4:
                continue
            if len(digits) == 4 and digits[:2] in ("19", "20") and not _SAID_IS.search(part, 0, m.start()):
                continue  # a year, unless it is what something "is" ("the keypad is 1975")
            if AFTER_NUMBER_UNIT.match(part, m.end()) or _BEFORE_NUMBER.search(part, 0, m.start()):
                continue
            yield clause.start() + m.start(1), clause.start() + m.end(1)


def one_time_code(text: str) -> Iterator[Span]:
    """ "they texted me 482913 to log in", "短信发来的是 583920": four to eight digits in a
    clause about a code sent to log in, not a quantity, a year or a phone number."""
    yield from _bare_numbers(text, _OTP_CUE, None)


def door_code(text: str) -> Iterator[Span]:
    """ "to get in, punch in 4471 on the keypad", "the alarm is 2580", "进门按 4471": a
    number in a clause about a door, a keypad or an alarm."""
    yield from _bare_numbers(text, _DOOR_CUE, _NOT_DOOR)


# "the three digits on the back are 417", "背面三位数是 417": a card's security code by
# where it is printed.
_card_back_en = _pattern(
    r"\b(?:(?:three|four|3|4)[ -]digits?(?:\s+(?:code|number))?\s+on\s+the\s+back(?:\s+of\s+(?:my|the)\s+card)?"
    r"|(?:code|number|digits)\s+on\s+the\s+back(?:\s+of\s+(?:my|the)\s+card)?|back\s+of\s+(?:my|the)\s+card)"
    r"(?:\s+(?:is|are|was|were|says|reads|has)\b|\s*[:=,])\s*(\d{3,4})(?!\d)",
    group=1,
    flags=re.IGNORECASE,
)
_card_back_zh = _pattern(
    rf"(?:背面|后面|後面|反面)[^\s，。！？,.!?\d]{{0,6}}?(?:三|四|3|4)?位(?:数字?|數字?|码|碼)?{_ZH_VERB}?\s*(\d(?:\s?\d){{2,3}})(?!\d)",
    group=1,
)


def card_back(text: str) -> Iterator[Span]:
    yield from _card_back_en(text)
    yield from _card_back_zh(text)


# "my BSB is 062-000", "transit number 12345": a bank's branch code said with its account.
bank_code = _after_keyword(
    r"\b(?:bsb|transit|institution|branch)(?:\s+(?:number|no\.?|code|#))?",
    r"\d{3}[ -]?\d{2,3}(?:[ -]?\d{1,4})?(?![\w-])",
    verb=rf"(?:{_EN_VERB}|\s+)",
    gap=1,
    check=lambda v: sum(ch.isdigit() for ch in v) >= 5,
)

# "pin 4471", "my pin, 4471": a lower-case PIN with four to six digits and nothing after
# them that makes "pin" a verb ("pin 300 photos").
pin_bare = _pattern(
    r"\bpin(?:\s+(?:number|code|no\.?))?\s*[:,-]?\s*(\d{4,6})(?=\s*(?:[.,;!?]|$|\b(?:and|thanks|thank|please|ok)\b))",
    group=1,
    flags=re.IGNORECASE,
)


# ----------------------------------------------------------------- a secret's word and digits in one clause
# "my pin? it's, like, 0019", "the bank account, the full number is 4455 6677 8899", "the
# mastercard, uh, 5522-4188-0303-7612": the word names the secret, the digits come a few
# words later (fillers, a question and its answer); how many digits each needs.
_CLAUSE_KEYS: tuple[tuple[re.Pattern[str], int, int], ...] = (
    (re.compile(r"\b(?:cvv2?|cvc2?|csc)\b|(?<![A-Za-z])(?:CVV|CVC)", re.IGNORECASE), 3, 4),
    (re.compile(r"\bpin\b|(?<![A-Za-z])PIN", re.IGNORECASE), 4, 8),
    (
        re.compile(
            r"\b(?:passcode|password|pass\s*code|(?:security|login|log-in|verification|access|backup|recovery|auth"
            r"|confirmation|one[- ]time|sms|2fa)\s+codes?|otp|2fa)\b"
            r"|密码|密碼|验证码|驗證碼|安全码|安全碼|动态码|動態碼|口令|取件码|取件碼|校验码|校驗碼",
            re.IGNORECASE,
        ),
        4,
        12,
    ),
    (
        re.compile(r"\b(?:card|visa|master\s*card|amex|discover)\b|信用卡|银行卡|銀行卡|卡号|卡號", re.IGNORECASE),
        12,
        19,
    ),
    (re.compile(r"\b(?:account|acct)\b|账号|帳號|账户|帳戶", re.IGNORECASE), 8, 20),
    (re.compile(r"\b(?:ssn|social\s+security)\b|社安号|社安號|社会安全号|社會安全號", re.IGNORECASE), 9, 9),
    # "my passport number, um, it's 881204573": a passport's digits a few words after its name.
    (re.compile(r"\bpassport\b|护照|護照", re.IGNORECASE), 8, 10),
    # "the last four of my social are 6789": the part of an SSN that opens accounts by phone.
    (
        re.compile(
            r"\blast\s+(?:four|4)(?:\s+digits)?\s+(?:of|on|from|in)\s+(?:my|the|his|her)\s+(?:ssn|social)\b"
            r"|\b(?:ssn|social(?:\s+security)?(?:\s+number)?)\s+ends\s+(?:in|with)\b",
            re.IGNORECASE,
        ),
        4,
        4,
    ),  # fmt: skip
)
_DATE_SHAPE = re.compile(r"(?:19|20)\d\d[ -]\d{1,2}[ -]\d{1,2}|\d{1,2}[ -]\d{1,2}[ -](?:19|20)?\d\d")
_RUN_DIGITS = re.compile(r"(?<![A-Za-z0-9_$£€¥#.,:/-])(\d(?:[ -]?\d){2,22})(?![A-Za-z0-9_%$£€¥:/-]|[.,]\d)")
_SENTENCE = re.compile(r"[^.!?;。！？；\n]+[.!?;。！？；\n]*")


def clause_digits(text: str) -> Iterator[Span]:
    asked = ""  # the sentence before, when it asked ("my pin? it's 0019")
    for sentence in _SENTENCE.finditer(text):
        part = sentence.group()
        scope = asked + part
        for key, low, high in _CLAUSE_KEYS:
            if not key.search(scope):
                continue
            for m in _RUN_DIGITS.finditer(part):
                n = sum(ch.isdigit() for ch in m.group(1))
                if not low <= n <= high:
                    continue
                if AFTER_NUMBER_UNIT.match(part, m.end()) or _BEFORE_NUMBER.search(part, 0, m.start()):
                    continue
                if n == 4 and m.group(1)[:2] in ("19", "20") and not _SAID_IS.search(part, 0, m.start()):
                    continue
                if _DATE_SHAPE.fullmatch(m.group(1)):
                    continue
                yield sentence.start() + m.start(1), sentence.start() + m.end(1)
        asked = part if part.rstrip().endswith(("?", "？")) else ""


# ----------------------------------------------------------------- a card's expiry date
_CARD_CONTEXT = re.compile(
    r"\b(?:card|visa|master\s*card|amex|discover|cvv|cvc|csc|security\s+code)\b|信用卡|银行卡|銀行卡|卡号|卡號|安全码|安全碼"
    r"|(?<![A-Za-z])(?:CVV|CVC)",
    re.IGNORECASE,
)
_expiry_en = _pattern(
    r"\b(?:exp(?:\.|iry|iration|ires?)?|valid\s+(?:thru|through|until|till)|good\s+(?:thru|through))"
    r"(?:\s+(?:date|on|in|at))?(?:\s+(?:is|was))?\s*[:=]?\s*"
    r"((?:\d\s\d\s*/\s*\d\s\d|\d{1,2}\s*[/-]\s*\d{2,4}|\d{3,4}|(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?\s+\d{2,4}))"
    r"(?![\d/])",
    group=1,
    flags=re.IGNORECASE,
)
_expiry_zh = _pattern(
    r"(?:有效期|有效期限|过期|過期|到期)(?:到|至|是|为|為|:|：)?\s*([^\s，。！？；,.!?;]{2,12})", group=1
)


def card_expiry(text: str) -> Iterator[Span]:
    """The expiry date said with a card or its code ("CVV 420, expires 0230"): with them it
    is what a thief needs; alone (a passport's, the milk's) it is left as it is."""
    if not _CARD_CONTEXT.search(text):
        return
    yield from _expiry_en(text)
    yield from _expiry_zh(text)


# ----------------------------------------------------------------- codes with letters
# "backup code 8F3K-92QX", "recovery code: A1B2-C3D4".
code_letters = _pattern(
    r"\b(?:backup|recovery|verification|login|log-in|2fa|security|access|auth(?:entication)?|one[- ]time|reset)"
    r"\s+codes?(?:\s+(?:is|are|was|were)\b|\s*[:=])?\s*"
    r"((?=[A-Za-z0-9-]*\d)(?=[A-Za-z0-9-]*[A-Za-z])[A-Za-z0-9]{2,8}(?:-[A-Za-z0-9]{2,8}){0,3})(?![\w-])",
    group=1,
    flags=re.IGNORECASE,
)

# ----------------------------------------------------------------- passwords spelled out
_SPELLING = re.compile(
    r"\b(?:lower\s*-?case|upper\s*-?case|capital|caps|small\s+letter|then|dash|underscore|at\s+sign|exclamation"
    r"|hash(?:tag)?|dot|star|asterisk|dollar\s+sign|spelled|spelt|letters?)\b|大写|大寫|小写|小寫|感叹号|感嘆號|下划线|下劃線"
    r"|然后|然後|字母",
    re.IGNORECASE,
)
_spelled_value = re.compile(
    r"(?i:\b(?:passwords?|passcodes?|pass\s*words?|pw|pwd|wi-?fi\s+(?:key|code))\b|密码|密碼|口令)"
    r"[^.;!?。！？；\n]{0,20}?(?:\b(?:is|was|are|'s)\b|[:=：]|是|为|為|spelled|spelt)?\s*"
    r"([^.;!?。！？；\n]+)"
)


def spelled_password(text: str) -> Iterator[Span]:
    """A password spelled out ("lowercase d, r, a, g, o, n, then one two three", "a b c 幺二三
    感叹号"): the rest of the sentence, when it is said letter by letter."""
    for m in _spelled_value.finditer(text):
        value = m.group(1)
        if _SPELLING.search(value) and re.search(r"(?<![A-Za-z])[A-Za-z](?![A-Za-z])|\d", value):
            yield m.span(1)
