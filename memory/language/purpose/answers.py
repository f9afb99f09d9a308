"""Answers to security questions and security words, found by the question or word that names them.

The value is free text (a pet's name, a school), so only the words around it say it is
a secret; each pattern needs such a word in the same clause.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from memory.language.secret_rules import _EN_VERB, _ZH_VERB, Span, _pattern

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


def security_answers(text: str) -> Iterator[Span]:
    for find in (_security_word, _question_then_answer, _answer_for_question, _answer_between, _maiden_between,
                 _security_question, _answer_gave, _answer_before_question, _maiden_name, _answer_to_question,
                 _maiden_for, _security_zh, _security_zh_answer, _security_zh_before):  # fmt: skip
        yield from find(text)
