"""What a statement can say without saying anything about the user: a reaction to
the listener, words addressed to the listener, Chinese advice, general knowledge and
passing requests or states.

These keep the Chinese default (a statement without 我 goes to extraction) from sending
chit-chat to the LLM.
"""

from __future__ import annotations

import re

from memory.language.prefilter.formulas import INTERJECTION_EN
from memory.language.prefilter.self_reference import first_person
from memory.language.prefilter.text import CJK

YOU_EN = re.compile(r"\b(?:you|your|yours|yourself|u|ya|y'all)\b")
YOU_ZH = re.compile(r"[你您]")


# A demonstrative subject points at what the listener just said ("That sounds great").
_REACTION_EN = re.compile(
    rf"^(?:{INTERJECTION_EN}[\s,!.]*)*"
    r"(?:(?:that|this|those|these|that's|thats|this is|that is|sounds|seems|looks|what a|how|so|too|such)\b"
    r"|(?:it|it's|its|it is|they|they're|he|she|he's|she's)"
    r" (?:sounds?|seems?|looks?|must|would|'d|will|'ll|could|might)\b"
    r"|(?:must|would|will) be\b)"
    r"|^(?:wow|congrats|congratulations|good for you|lucky you|bless|yikes|ouch|ugh|oh no|oh dear|oh man|no way"
    r"|awesome|cool|nice|great|amazing|wonderful|fantastic|brilliant|excellent|perfect|lovely|sweet|neat"
    r"|yum|yummy|delicious|ha|haha|lol|sure thing|good idea|great idea|nice idea|good to hear|glad to hear"
    r"|sorry to hear|same|true|agreed)[\s!.]*$"
)
_REACTION_ZH = re.compile(
    r"^(?:它|这些|那些|这样|那样|听起来|看起来|感觉(?:很|挺|真|不错)|真是|真的|太|好|哇|天哪|确实|的确"
    r"|果然|非常|很|挺|多么|不错|厉害|有道理|说得|说的|是的|没错|对啊|当然)"
    # ...but not the user's own taste, an answer with 我 dropped ("很喜欢打篮球")...
    r"(?!(?:是|也|还|都|不)?(?:喜欢|爱|讨厌|怕|想|不喜欢|不爱|习惯))"
    # ...and 这/那 point back at what was said, unless a time follows ("这周末搬家", "这个月底").
    r"|^(?:这|那)个?(?![周礼星月年天次回学季阵]|个(?:周|礼拜|星期|月|学期|季度))"
)
# Chinese advice to the listener and general-knowledge phrasing ("X是一种...").
ADVICE_ZH = re.compile(
    r"^(?:你|您|建议|可以|不妨|记得|不要|别|试试|尝试|加油|祝|希望你|相信你|如果你|一般来说|通常来说|研究|根据|此外|另外"
    r"|同时|总之|首先|其次|最后|人们|很多人|每个人)"
)
GENERIC_ZH = re.compile(r"是一(?:种|件|项|门|类|道|部)|是一个(?:非常|很)")
# Said to a voice agent and gone by tomorrow: a request to do something now (把灯关了,
# 打开收音机, 说点有意思的), a courtesy (谢了, 晚安啦, 稍等), how the body or the weather
# feels now (有点冷, 眼睛有点干, 外面阴沉沉的), tonight's or last night's plans and
# troubles (今晚想吃麻辣烫, 昨晚没睡好), and a bare reply of a few characters (对就是它).
_REQUEST_ZH = re.compile(
    r"^(?:请|麻烦|把|帮忙|打开|关掉?|关上|开一下|放首?|播放?|来点|来首|来个|说点|讲个|讲点|唱首|加个|加一?下|查一?下|搜一?下"
    r"|设个|定个|调到|调高|调低|声音|音量|下一首|上一首|暂停|继续|再来)"
)
_COURTESY_ZH = re.compile(
    r"^(?:谢了|谢谢|多谢|晚安|早安|午安|拜拜|再见|稍等|等一下|等等|好的|行吧|算了|没事|下次|改天)"
)
_NOW_STATE_ZH = re.compile(
    r"有点(?:冷|热|累|困|饿|渴|干|疼|痛|晕|烦|闷)|好(?:冷|热|累|困|饿)|阴沉沉|下雨了|下雪了|又晚点|堵车|^(?:今晚|今天|昨晚|昨天"
    r"|刚才|刚刚|这会儿|一会儿|待会儿?|等会儿?|外面)"
)
_HAN_CHAR = re.compile(r"[\u3400-\u9fff]")


def passing_zh(clause: str) -> bool:
    """A Chinese statement with no 我 that holds nothing lasting (see above); a change or
    a correction was read before this."""
    hanzi = len(_HAN_CHAR.findall(clause))
    if "我" in clause or hanzi > 10:
        return False
    return bool(
        hanzi <= 4 or _REQUEST_ZH.match(clause) or _COURTESY_ZH.match(clause) or _NOW_STATE_ZH.search(clause)
        or re.search(r"再说吧$", clause)
    )  # fmt: skip


def is_reaction(c: str) -> bool:
    return bool(_REACTION_EN.match(c) or (CJK.search(c) and _REACTION_ZH.match(c)))


def about_listener(c: str) -> bool:
    return bool((YOU_EN.search(c) or YOU_ZH.search(c)) and not first_person(c))
