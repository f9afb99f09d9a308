"""Formulas that say nothing on their own: fillers, terms of address, acknowledgements,
thanks, greetings and interjections.

They are the bulk of voice traffic; recognising them positively is what lets the
pre-filter SKIP without risking a durable fact.
"""

from __future__ import annotations

import re

from memory.language.prefilter.text import alt, normalise, words

# Leading discourse fillers: dropped from every clause before any other test.
_FILLERS_EN = words("fillers_en")
_FILLERS_ZH = words("fillers_zh")
FILLER_RE = re.compile(rf"^(?:(?:{alt(_FILLERS_EN)})\b[\s,]*|(?:{alt(_FILLERS_ZH)})[\s,]*)+")

# Terms of address ("thanks, friend", 谢谢你朋友) are not a relation of the user. English
# ones come after a comma, so they are whole clauses (in _ACK_EN); Chinese ones are
# stripped from the end of a clause.
VOCATIVES_ZH = ("朋友", "老朋友", "好朋友", "ai伴侣", "伙伴", "亲爱的")
VOCATIVE_ZH = re.compile(rf"(?<![a-z0-9])(?:{alt(VOCATIVES_ZH)})$")

# Whole-clause acknowledgements, agreement tokens, farewells: SKIP on their own. The
# *_EMPTY ones also say nothing as a memory, whatever came before (`is_acknowledgement`).
_ACK_EN_EMPTY = words("ack_en_empty")
_ACK_EN = (*_ACK_EN_EMPTY, *words("ack_en"))
_ACK_ZH_EMPTY = words("ack_zh_empty")
_ACK_ZH = (*_ACK_ZH_EMPTY, *words("ack_zh"))
_ACK_RE = re.compile(rf"^(?:(?:{alt(_ACK_EN + _ACK_ZH)})(?![a-z'])[\s,!.]*)+$")
# Words that say nothing on their own, whatever was said before them: a turn made only
# of these is no memory (`is_acknowledgement`). Not "nice" (a city), "buddy" (a dog), nor
# what can be an answer or an opinion ("not bad", 不错). Traditional forms are folded first.
_CONTENT_FREE = (
    *_ACK_EN_EMPTY,
    *_ACK_ZH_EMPTY,
    "hi",
    "hello",
    "hey",
    "你好",
    "您好",
    "谢了",
    "好滴",
    "好哒",
    "嗯哼",
    "哦哦",
    "噢噢",
)
# Chinese words run together ("好的好的", "对对对"): only a Latin letter or digit may not follow.
_CONTENT_FREE_RE = re.compile(rf"^(?:(?:{alt(_CONTENT_FREE)})(?![a-z0-9'])[啦呀啊呢哈哒滴嘛哦]*[\s,!.?~。！？，…]*)+$")
# Thanks formulas, whatever follows ("thanks for the tip", 谢谢你的建议).
_THANKS = re.compile(
    r"^(?:thanks|thank you|thank u|thx|ty|many thanks|much appreciated|i appreciate it|appreciate it)\b"
    r"|^(?:再次|非常|真的|太|十分)?(?:谢谢|感谢|多谢|谢啦)"
)
_GREETING_EN = re.compile(
    r"^(?:hi|hello|hey|hiya|howdy|yo|greetings|good (?:morning|afternoon|evening|day)|morning|evening"
    r"|hi there|hello there|hey there|what's up|whats up|sup|how are you(?: doing)?(?: today| this \w+)?"
    r"|how's it going|hows it going|how is it going|how have you been|how are things|nice to (?:meet|see) you"
    r"|(?:it'?s )?(?:nice|good|great) (?:to )?(?:talk|talking|chat|chatting) (?:to|with) you(?: again| too)?"
    r"|long time no see|welcome back)(?: \w+)?$"
)
_GREETING_ZH = re.compile(
    r"^(?:你好|您好|你们好|大家好|嗨|哈喽|哈啰|早|早啊|早安|早上好|上午好|中午好|下午好|晚上好|晚安|好久不见"
    r"|最近怎么样|最近好吗|你好吗|在吗|在不在|再见|拜拜|回头见|下次见)(?:啊|呀|哦|呢|吗)?$"
)


INTERJECTION_EN = (
    r"(?:oh|wow|aw|aww|awe|haha|hahaha|lol|ah|yes|yeah|yea|yep|yup|no|nope|nah|well|omg|oh my|gosh|man|dang|damn|ha"
    r"|ok|okay"
    r"|good|great|fine|not bad|pretty good|fantastic|awesome|cool|nice|really|hmm|sure|right"
    r"|of course|definitely|most definitely|absolutely|exactly|totally|true|indeed|haha yeah)"
)
# Interjections / one-word answers in front of a clause ("Fantastic, just got home").
LEAD_INTERJECTION = re.compile(rf"^(?:{INTERJECTION_EN}\b[\s,!.]*)+")


def is_greeting(c: str) -> bool:
    return bool(_GREETING_EN.match(c) or _GREETING_ZH.match(c))


def is_ack(c: str) -> bool:
    return bool(_ACK_RE.match(c) or _THANKS.match(c)) or is_greeting(c)


def is_acknowledgement(text: str) -> bool:
    """Is the whole text only words that say nothing on their own ("ok", "thanks!",
    "haha", "yeah, sure", 好的, 嗯嗯)? Stricter than the pre-filter's acknowledgements:
    a word that can be a name, a place or an answer ("Nice.", "Buddy.", "Ty's birthday",
    谢谢你记得我对花生过敏) is content, and so is any script without such a list."""
    t = normalise(text)
    if not any(ch.isalnum() for ch in t):
        return True
    return bool(_CONTENT_FREE_RE.match(t))
