"""Secrets named by what they are for, not by their shape: the answer to a security
question, a security word, a recovery phrase, a one-time code with no keyword before it,
a door or keypad code, a tax number, a travel document's number.

Like `secret_rules.py` each finds only the value's span and is narrowed by a word that
says what the value is for; they read the digit form of a turn too (`spoken.py`), so a
code said as words ("four four seven one") is found as digits. A recovery phrase is
also found by its shape: twelve words or more in a row from the BIP-39 word list (the
`mnemonic` package ships it, English and Chinese).

The finders live in memory/language/purpose/, one module per kind of secret; this
module is their table, in the order they run.
"""

from __future__ import annotations

import re

from memory.language.purpose.answers import security_answers
from memory.language.purpose.codes import (
    bank_code,
    card_back,
    card_expiry,
    clause_digits,
    code_letters,
    door_code,
    one_time_code,
    pin_bare,
    spelled_password,
)
from memory.language.purpose.documents import id_zh, tax_number, travel_document
from memory.language.purpose.recovery import recovery_phrases
from memory.language.secret_rules import Rule


def _needs(regex: str, flags: int = re.IGNORECASE) -> re.Pattern[str]:
    return re.compile(regex, flags)


PURPOSE_RULES: tuple[Rule, ...] = (
    Rule(
        "security_purpose",
        "answer",
        security_answers,
        _needs(r"word|phrase|info|answer|question|maiden|密保|安全|验证|驗證|暗号|暗號|口令"),
    ),
    Rule("recovery_phrase", "recovery_phrase", recovery_phrases, None),
    Rule("one_time_code", "code", one_time_code, _needs(r"\d(?:-?\d){3}")),
    Rule("door_code", "code", door_code, _needs(r"\d(?:-?\d){3}")),
    Rule("pin_bare", "code", pin_bare, _needs(r"\bpin\b")),
    Rule("clause_digits", "code", clause_digits, _needs(r"\d(?:[ -]?\d){2}")),
    Rule("card_expiry", "card_expiry", card_expiry, _needs(r"exp|valid|good|有效期|过期|過期|到期")),
    Rule("code_letters", "code", code_letters, _needs(r"codes?\b")),
    Rule("spelled_password", "password", spelled_password, _needs(r"pass|pw|wi-?fi|密码|密碼|口令")),
    Rule("id_zh_loose", "id_number", id_zh, _needs(r"身份|护照|護照", 0)),
    Rule("card_back_code", "code", card_back, _needs(r"back|背面|后面|後面|反面")),
    Rule("bank_code", "account_number", bank_code, _needs(r"bsb|transit|institution|branch")),
    Rule(
        "tax_number",
        "tax_number",
        tax_number,
        _needs(
            r"tax|(?<![A-Za-z])(?:tin|ein|itin|utr|tfn|nino|sin|pps|ird|abn|ni)(?![A-Za-z])|insurance|employer|税|稅|信用代"
        ),
    ),
    Rule(
        "travel_document",
        "id_number",
        travel_document,
        _needs(
            r"visa|travel|green|residen|brp|ktn|entry|nexus|sentri|passid|redress|esta|\beta\b|permit|证|證|绿卡|綠卡"
        ),
    ),
)
