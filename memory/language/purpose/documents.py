"""Identity numbers named by their document: tax numbers, travel documents, Chinese
identity cards and passports said loosely.

Their shapes vary by country, so the keyword before the value is what finds them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from memory.language.purpose.codes import AFTER_NUMBER_UNIT
from memory.language.secret_rules import _EN_VERB, _ZH_VERB, Span, _after_keyword, _pattern

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


def tax_number(text: str) -> Iterator[Span]:
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


def travel_document(text: str) -> Iterator[Span]:
    if not _FIVE_DIGITS.search(text):
        return
    yield from _travel_en(text)
    yield from _travel_zh(text)


# 身份证号 320102198705160021 (a check digit misheard), 身份证后六位 03261X: digits after the word.
_id_zh_loose = _pattern(
    r"(?:身份证|身份證)(?:号码|號碼|号|號)?[^\s，。！？,.!?\d]{0,6}?(?:是|为|為|:|：)?\s*"
    r"(\d(?:[ -]?\d){3,16}[ -]?[\dXx])(?![\dXx])",
    group=1,
    check=lambda m: not AFTER_NUMBER_UNIT.match(m.string, m.end(1)),
)
_passport_zh_spaced = _pattern(
    rf"(?:护照|護照)(?:号码|號碼|号|號)?[^\s，。！？,.!?\d]{{0,3}}?{_ZH_VERB}?\s*([A-Za-z]{{1,2}}\s\d{{6,10}})(?![\dA-Za-z])",
    group=1,
)


def id_zh(text: str) -> Iterator[Span]:
    yield from _id_zh_loose(text)
    yield from _passport_zh_spaced(text)
