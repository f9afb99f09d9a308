"""Secrets named by what they are for, not by their shape: the answer to a security
question, a security word, a recovery phrase, a one-time code with no keyword before it,
a door or keypad code, a tax number, a travel document's number.

Like `secret_rules.py` each finds only the value's span and is narrowed by a word that
says what the value is for; they read the digit form of a turn too (`spoken.py`), so a
code said as words ("four four seven one") is found as digits. A recovery phrase is
also found by its shape: eight words or more in a row from the BIP-39 word list (the
`mnemonic` package ships it, English and Chinese).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cache

from memory.language.lexical import STOP_EN
from memory.language.secret_rules import _EN_VERB, _ZH_VERB, Rule, Span, _after_keyword, _pattern

# A clause's value after "is": up to four words, to a full stop, a semicolon or "and".
_EN_ANSWER = r"[\"'“‘]?([^\s.;!?\"”’,][^.;!?\"”’\n,]{0,40}?)[\"'”’]?(?=\s*(?:[.;!?\n,]|\s(?:and|but|so)\s|$))"
_ZH_ANSWER = r"[\"'“‘「]?([^\s，。！？；,.!?;\"”’」]{1,20})"

# ----------------------------------------------------------------- security answers and words
# "my security word is Marmalade", "memorable word: tiptoe", "the secret word's pineapple".
_security_word = _pattern(
    r"\b(?:security|memorable|secret|safe|code)\s+(?:word|phrase|info(?:rmation)?|answer)s?"
    rf"(?:\s+(?:for|on|with|at)\s+(?:my|the|our)\s+[\w'’]+(?:\s+[\w'’]+)?)?{_EN_VERB}{_EN_ANSWER}",
    group=1,
    flags=re.IGNORECASE,
)
# "security question, first pet: I put Mr Whiskers", "for the security question I used
# Rex", "the answer I gave for my first school was St Mary's".
_security_question = _pattern(
    r"\b(?:security|secret|verification|memorable)\s+questions?\b[^.;!?\n]{0,80}?"
    r"(?:\banswer(?:ed)?\s*(?:is|was|:|=|with)?|\bI\s+(?:put|used|wrote|typed|set|gave|chose|picked|said)"
    r"(?:\s+(?:down|in))?|\bit['’]?s|\bis|:)\s*"
    rf"{_EN_ANSWER}",
    group=1,
    flags=re.IGNORECASE,
)
# "the secret question is my favourite teacher and the answer is Mr Patel": the answer, not the question.
_question_then_answer = _pattern(
    r"\b(?:security|secret|verification|memorable)\s+questions?\b[^.;!?\n]{0,80}?\banswer(?:'s|\s+(?:is|was)|\s*:)\s*"
    rf"{_EN_ANSWER}",
    group=1,
    flags=re.IGNORECASE,
)
_answer_gave = _pattern(
    r"\b(?:the\s+)?answer\s+I\s+(?:gave|put|used|set|chose)\s+(?:for|to|on)\s+[^.;!?\n]{1,60}?"
    rf"\b(?:is|was|:)\s*{_EN_ANSWER}",
    group=1,
    flags=re.IGNORECASE,
)
# "first pet was Muffin, that's what I put for the security question": the answer first.
_answer_before_question = _pattern(
    r"\b(?:was|is|called|named)\s+([^,.;!?\n]{1,30}?)\s*[,—–-]+\s*(?:that['’]?s|which\s+is|it['’]?s)\s+"
    r"(?:(?:what|the\s+answer)\s+I\s+(?:put|used|gave|set|chose|wrote|picked)[^.;!?\n]{0,30}?|for\s+(?:my|the)\s+"
    r"|(?:(?:one\s+of|among)\s+)?(?:my|the)\s+)"
    r"\b(?:security|secret|verification|memorable)\s+(?:questions?|answers?)",
    group=1,
    flags=re.IGNORECASE,
)
# "I told the bank my favourite food is lasagne for the security question": the answer just before.
_answer_for_question = _pattern(
    r"\b(?:is|was|as|said|put|used)\s+([^,.;!?\n]{1,30}?)\s+(?:for|on|as)\s+(?:my|the|a|that|each|one)\s+"
    r"(?:(?:bank|card|account)['’]?s?\s+)?(?:security|secret|verification|memorable)\s+(?:questions?|answers?)\b",
    group=1,
    flags=re.IGNORECASE,
)
# "the answer to what was your childhood nickname is Peanut": the question said, then its answer.
_answer_to_question = _pattern(
    r"\banswer\s+(?:to|for)\s+[\"'“]?(?:what|which|who|where|when|name\s+of|your|my\s+(?:first|mother|father|favou?rite"
    r"|childhood|oldest|eldest))\b[^.;!?\n]{3,60}?\b(?:is|was|:)\s*" + _EN_ANSWER,
    group=1,
    flags=re.IGNORECASE,
)
# "mother's maiden name is Okonkwo for the credit union": a maiden name said with what it opens.
_maiden_for = _pattern(
    r"\bmaiden\s+name\s+(?:is|was|:)\s*([A-Z][\w'’-]+(?:\s+[A-Z][\w'’-]+)?)(?=[^.;!?\n]{0,40}\b(?:bank|credit\s+union"
    r"|account|security|verification|card|login|password)\b)",
    group=1,
)
# "the name of my first school, which is my security answer, is Oakfield": the purpose said in between.
_answer_between = _pattern(
    r"[,—–-]\s*(?:(?:which|that)\s+(?:is|was|['’]s)\s+)?(?:(?:one\s+of|among)\s+)?(?:my|the)\s+"
    r"(?:(?:bank|card|account)['’]?s?\s+)?(?:security|secret|verification|memorable|bank)\s+(?:answers?|questions?)"
    rf"\s*[,—–-]\s*(?:is|was|it['’]?s|:)\s*{_EN_ANSWER}",
    group=1,
    flags=re.IGNORECASE,
)
# "my mum's maiden name, which the bank asks for, is Kowalski": what it opens said in between.
_maiden_between = _pattern(
    r"\bmaiden\s+name\s*[,—–-]\s*[^,.;!?\n]{0,40}?\b(?:bank|credit\s+union|account|security|verification|card"
    rf"|login|password)\b[^,.;!?\n]{{0,20}}[,—–-]\s*(?:is|was|it['’]?s|:)\s*{_EN_ANSWER}",
    group=1,
    flags=re.IGNORECASE,
)
# "my mother's maiden name for the bank is Kowalski": only with what it verifies.
_maiden_name = _pattern(
    r"\bmaiden\s+name\s+(?:for|on|with|at)\s+(?:my|the|our)\s+(?:bank|account|card|security|verification|login)"
    rf"[\w'’ ]{{0,20}}?{_EN_VERB}{_EN_ANSWER}",
    group=1,
    flags=re.IGNORECASE,
)
# 密保问题填的是小白, 安全问题我写的是 旺财, 暗号是天王盖地虎, 安全词：蓝莓.
_security_zh_answer = _pattern(
    rf"(?:密保|安全问题|安全問題|验证问题|驗證問題)[^。！？；.!?;\n]{{0,24}}?"
    rf"(?:答案|回答|我?填的|我?写的|我?寫的|我?设的|我?設的|我?答的|我?用的)(?:{_ZH_VERB}|：|:)?\s*{_ZH_ANSWER}",
    group=1,
)
# 我第一个宠物叫小白，就是那个密保问题的答案: the answer first.
_security_zh_before = _pattern(
    r"(?:叫|是|叫做|名字是)\s*([^\s，。！？；,.!?;]{1,12}?)\s*[，,]\s*(?:这|這|那|就|也)?[^。！？；]{0,6}?"
    r"(?:密保|安全问题|安全問題|验证问题|驗證問題)",
    group=1,
)
_security_zh = _pattern(
    r"(?:密保|安全问题|安全問題|验证问题|驗證問題|暗号|暗號|安全词|安全詞|接头暗号|口令)"
    r"[^，。！？；,.!?;]{0,12}?(?:答案|回答|填的|写的|寫的|设的|設的|填了|写了|寫了|答的)?"
    rf"(?:{_ZH_VERB}|填|写|寫)\s*{_ZH_ANSWER}",
    group=1,
)


def _security(text: str) -> Iterator[Span]:
    for find in (_security_word, _question_then_answer, _answer_for_question, _answer_between, _maiden_between,
                 _security_question, _answer_gave, _answer_before_question, _maiden_name, _answer_to_question,
                 _maiden_for, _security_zh, _security_zh_answer, _security_zh_before):  # fmt: skip
        yield from find(text)


# ----------------------------------------------------------------- recovery phrases
@cache
def _bip39() -> tuple[frozenset[str], frozenset[str]]:
    from mnemonic import Mnemonic

    return frozenset(Mnemonic("english").wordlist), frozenset(Mnemonic("chinese_simplified").wordlist)


_RECOVERY_WORD = (
    r"(?:(?:seed|recovery|backup|mnemonic|wallet|secret)\s+(?:phrase|words?|sentence|seed)s?|mnemonic"
    r"|助记词|助記詞|恢复短语|恢復短語|恢复词|恢復詞|种子短语|種子短語)"
)
_recovery_after_word = _pattern(
    rf"(?i:{_RECOVERY_WORD})(?:[\w'’ ]{{0,30}}?(?:{_EN_VERB}|{_ZH_VERB}|\s*[:：]))\s*"
    r"[\"'“‘]?((?:[A-Za-z]+|[\u4e00-\u9fff])(?:[\s,，、]+(?:[A-Za-z]+|[\u4e00-\u9fff])){3,})",
    group=1,
)
PHRASE_WORDS = 12  # the shortest recovery phrase BIP-39 defines


def _recovery_shape(text: str) -> Iterator[Span]:
    """Twelve words or more in a row from the BIP-39 list ("abandon ability able ..."):
    plain speech runs out of such words in four or five. A count over the text's words
    (a trailing comma allowed); positions are looked up only for a run that qualifies."""
    tokens = text.lower().split()
    if len(tokens) < PHRASE_WORDS:
        return
    english, _ = _bip39()
    runs: list[tuple[int, int]] = []
    start = count = 0
    for i, token in enumerate(tokens):
        if token.rstrip(",.!?;") in english and (count == 0 or not tokens[i - 1].endswith((".", "!", "?", ";"))):
            if count == 0:
                start = i
            count += 1
            continue
        if count >= PHRASE_WORDS:
            runs.append((start, start + count))
        count = 1 if token.rstrip(",.!?;") in english else 0  # a sentence's end starts a new run
        start = i
    if count >= PHRASE_WORDS:
        runs.append((start, start + count))
    if not runs:
        return
    spans = [m.span() for m in re.finditer(r"\S+", text)]
    for first, end in runs:
        lo, hi = spans[first][0], spans[end - 1][1]
        if _random_words(text[lo:hi].lower()):
            yield lo, hi - (1 if text[hi - 1] in ",.!?;" else 0)


def _random_words(run: str) -> bool:
    """Drawn from the list at random, not speech: at most four different function words
    ("about", "again", "all" are on the list; a sentence has one every other word, and
    "the", "a", "to", "of", "and", "I" are not on it). Different ones: a random draw may
    repeat a word ("hello" five times), speech varies them."""
    return len({w for w in re.findall(r"[a-z]+", run) if w in STOP_EN}) <= 4


def _recovery(text: str) -> Iterator[Span]:
    yield from _recovery_after_word(text)
    yield from _recovery_shape(text)


# ----------------------------------------------------------------- one-time and door codes
# A number that is not a quantity, a time, a price, a year or a phone number.
_CODE_NUMBER = re.compile(r"(?<![A-Za-z0-9_$£€¥#.,:/-])(\d(?:-?\d){3,7})(?![A-Za-z0-9_%$£€¥:/-]|[.,]\d)")
_AFTER_NUMBER_UNIT = re.compile(
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
            if _AFTER_NUMBER_UNIT.match(part, m.end()) or _BEFORE_NUMBER.search(part, 0, m.start()):
                continue
            yield clause.start() + m.start(1), clause.start() + m.end(1)


def _one_time_code(text: str) -> Iterator[Span]:
    """ "they texted me 482913 to log in", "短信发来的是 583920": four to eight digits in a
    clause about a code sent to log in, not a quantity, a year or a phone number."""
    yield from _bare_numbers(text, _OTP_CUE, None)


def _door_code(text: str) -> Iterator[Span]:
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


def _card_back(text: str) -> Iterator[Span]:
    yield from _card_back_en(text)
    yield from _card_back_zh(text)


# "my BSB is 062-000", "transit number 12345": a bank's branch code said with its account.
_bank_code = _after_keyword(
    r"\b(?:bsb|transit|institution|branch)(?:\s+(?:number|no\.?|code|#))?",
    r"\d{3}[ -]?\d{2,3}(?:[ -]?\d{1,4})?(?![\w-])",
    verb=rf"(?:{_EN_VERB}|\s+)",
    gap=1,
    check=lambda v: sum(ch.isdigit() for ch in v) >= 5,
)

# "pin 4471", "my pin, 4471": a lower-case PIN with four to six digits and nothing after
# them that makes "pin" a verb ("pin 300 photos").
_pin_bare = _pattern(
    r"\bpin(?:\s+(?:number|code|no\.?))?\s*[:,-]?\s*(\d{4,6})(?=\s*(?:[.,;!?]|$|\b(?:and|thanks|thank|please|ok)\b))",
    group=1,
    flags=re.IGNORECASE,
)

# ----------------------------------------------------------------- tax numbers
_TAX_VALUE = r"[A-Za-z]{0,3}[ -]?\d(?:[ -]?[\dA-Za-z]){4,14}"
_tax_en = _after_keyword(
    r"\b(?:tax\s+(?:file\s+|identification\s+|id\s+|reference\s+|payer\s+)?(?:number|no\.?|id|code|#)"
    r"|(?:tin|ein|itin|utr|tfn|nino|sin|pps|ird|abn)(?:\s+(?:number|no\.?))?"
    r"|national\s+insurance(?:\s+(?:number|no\.?))?|ni\s+number|social\s+insurance(?:\s+number)?"
    r"|employer\s+(?:identification|id)\s+(?:number|no\.?)|taxpayer\s+(?:id|number))(?![A-Za-z])",
    _TAX_VALUE + r"(?![A-Za-z0-9_-])",
    verb=rf"(?:{_EN_VERB}|\s*{_ZH_VERB}\s*|\s+)",
    gap=3,
    check=lambda v: sum(ch.isdigit() for ch in v) >= 6,
)
_tax_zh = _pattern(
    r"(?:税号|稅號|纳税人识别号|納稅人識別號|税务登记号|稅務登記號|统一社会信用代码|統一社會信用代碼|个税|個稅)"
    rf"[^\s，。！？,.!?\d]{{0,4}}?{_ZH_VERB}?\s*([0-9A-Za-z](?:[ -]?[0-9A-Za-z]){{7,19}})(?![0-9A-Za-z])",
    group=1,
    check=lambda m: sum(ch.isdigit() for ch in m.group(1)) >= 6,
)


_FIVE_DIGITS = re.compile(r"\d(?:\D{0,3}\d){4}")


def _tax_number(text: str) -> Iterator[Span]:
    if not _FIVE_DIGITS.search(text):
        return
    yield from _tax_en(text)
    yield from _tax_zh(text)


# ----------------------------------------------------------------- travel documents
_TRAVEL_VALUE = r"[A-Za-z]{0,3}[ -]?\d[\dA-Za-z -]{4,16}?(?=[\s,.;!?]|$)"
_travel_en = _after_keyword(
    r"\b(?:visa|travel\s+(?:permit|document|card)|green\s+card|residence\s+(?:permit|card)|brp|permanent\s+resident"
    r"|known\s+travell?er|ktn|global\s+entry|nexus|sentri|passid|redress|esta|eta|work\s+permit|study\s+permit)"
    r"(?:\s+(?:card\s+)?(?:number|no\.?|#|id|application|control))?",
    _TRAVEL_VALUE,
    verb=rf"(?:{_EN_VERB}|\s+)",
    gap=2,
    check=lambda v: sum(ch.isdigit() for ch in v) >= 5,
)
_travel_zh = _pattern(
    r"(?:港澳通行证|港澳通行證|往来港澳通行证|往來港澳通行證|台湾通行证|臺灣通行證|台灣通行證|大陆居民往来台湾通行证|台胞证|台胞證"
    r"|回乡证|回鄉證|通行证|通行證|签证|簽證|居留证|居留證|居留许可|居留許可|绿卡|綠卡|旅行证|旅行證)"
    rf"(?:号码|號碼|号|號|编号|編號)?[^\s，。！？,.!?\d]{{0,3}}?{_ZH_VERB}?\s*"
    r"([A-Za-z]{0,2}\s?\d(?:[ -]?\d){5,11})(?![\dA-Za-z])",
    group=1,
)


def _travel_document(text: str) -> Iterator[Span]:
    if not _FIVE_DIGITS.search(text):
        return
    yield from _travel_en(text)
    yield from _travel_zh(text)


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


def _clause_digits(text: str) -> Iterator[Span]:
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
                if _AFTER_NUMBER_UNIT.match(part, m.end()) or _BEFORE_NUMBER.search(part, 0, m.start()):
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


def _card_expiry(text: str) -> Iterator[Span]:
    """The expiry date said with a card or its code ("CVV 420, expires 0230"): with them it
    is what a thief needs; alone (a passport's, the milk's) it is left as it is."""
    if not _CARD_CONTEXT.search(text):
        return
    yield from _expiry_en(text)
    yield from _expiry_zh(text)


# ----------------------------------------------------------------- codes with letters
# "backup code 8F3K-92QX", "recovery code: A1B2-C3D4".
_code_letters = _pattern(
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


def _spelled_password(text: str) -> Iterator[Span]:
    """A password spelled out ("lowercase d, r, a, g, o, n, then one two three", "a b c 幺二三
    感叹号"): the rest of the sentence, when it is said letter by letter."""
    for m in _spelled_value.finditer(text):
        value = m.group(1)
        if _SPELLING.search(value) and re.search(r"(?<![A-Za-z])[A-Za-z](?![A-Za-z])|\d", value):
            yield m.span(1)


# 身份证号 320102198705160021 (a check digit misheard), 身份证后六位 03261X: digits after the word.
_id_zh_loose = _pattern(
    r"(?:身份证|身份證)(?:号码|號碼|号|號)?[^\s，。！？,.!?\d]{0,6}?(?:是|为|為|:|：)?\s*"
    r"(\d(?:[ -]?\d){3,16}[ -]?[\dXx])(?![\dXx])",
    group=1,
    check=lambda m: not _AFTER_NUMBER_UNIT.match(m.string, m.end(1)),
)
_passport_zh_spaced = _pattern(
    rf"(?:护照|護照)(?:号码|號碼|号|號)?[^\s，。！？,.!?\d]{{0,3}}?{_ZH_VERB}?\s*([A-Za-z]{{1,2}}\s\d{{6,10}})(?![\dA-Za-z])",
    group=1,
)


def _id_zh(text: str) -> Iterator[Span]:
    yield from _id_zh_loose(text)
    yield from _passport_zh_spaced(text)


def _needs(regex: str, flags: int = re.IGNORECASE) -> re.Pattern[str]:
    return re.compile(regex, flags)


PURPOSE_RULES: tuple[Rule, ...] = (
    Rule(
        "security_purpose",
        "answer",
        _security,
        _needs(r"word|phrase|info|answer|question|maiden|密保|安全|验证|驗證|暗号|暗號|口令"),
    ),
    Rule("recovery_phrase", "recovery_phrase", _recovery, None),
    Rule("one_time_code", "code", _one_time_code, _needs(r"\d(?:-?\d){3}")),
    Rule("door_code", "code", _door_code, _needs(r"\d(?:-?\d){3}")),
    Rule("pin_bare", "code", _pin_bare, _needs(r"\bpin\b")),
    Rule("clause_digits", "code", _clause_digits, _needs(r"\d(?:[ -]?\d){2}")),
    Rule("card_expiry", "card_expiry", _card_expiry, _needs(r"exp|valid|good|有效期|过期|過期|到期")),
    Rule("code_letters", "code", _code_letters, _needs(r"codes?\b")),
    Rule("spelled_password", "password", _spelled_password, _needs(r"pass|pw|wi-?fi|密码|密碼|口令")),
    Rule("id_zh_loose", "id_number", _id_zh, _needs(r"身份|护照|護照", 0)),
    Rule("card_back_code", "code", _card_back, _needs(r"back|背面|后面|後面|反面")),
    Rule("bank_code", "account_number", _bank_code, _needs(r"bsb|transit|institution|branch")),
    Rule(
        "tax_number",
        "tax_number",
        _tax_number,
        _needs(
            r"tax|(?<![A-Za-z])(?:tin|ein|itin|utr|tfn|nino|sin|pps|ird|abn|ni)(?![A-Za-z])|insurance|employer|税|稅|信用代"
        ),
    ),
    Rule(
        "travel_document",
        "id_number",
        _travel_document,
        _needs(
            r"visa|travel|green|residen|brp|ktn|entry|nexus|sentri|passid|redress|esta|\beta\b|permit|证|證|绿卡|綠卡"
        ),
    ),
)
