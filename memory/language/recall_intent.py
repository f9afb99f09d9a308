"""Does this user message need long-term memory? (GATED retrieval runs only then.)

Why: in GATED mode retrieval is not run for every turn. Most turns ("ok thanks",
"tell me a joke", "what's the weather like?") are answered just as well without the
user's memories, and skipping the search saves an embedding plus a database round
trip and keeps irrelevant memories out of the prompt. This check is pure regexes
(no model, no network, a few microseconds) so it can run on interim transcripts.

A false positive costs one search; a false negative makes the agent forget something
the user expects it to know. So the rules lean towards True for anything about the
user, and are False only for messages with no reference to the user or to the past.

Rules, in order (``recall_reason`` returns the tag of the first that fires):

``recall_request``
    Asks the assistant to recall: "do you remember ...", "remember when ...",
    "did I tell you ...", "what did I say ...", "last time we ...", "remind me ...",
    "what was the vet's name again?", 你还记得 / 记不记得 / 我跟你说过 / 上次 /
    之前说的 / ...来着.
``about_me``
    Asks what the assistant knows about the user: "what do you know about me",
    "who am I", "what's my name", "do you know me", 你了解我 / 你知道我 / 我是谁 / 我叫什么.
``personal_question``
    A question (by "?" or by interrogative form, since transcripts often lack "?")
    that refers to the user: "what's my sister's name", "where do I live",
    "what's my favourite colour", 我妹妹叫什么名字, 我喜欢的颜色是什么. First-person
    words inside request formulas do not count ("tell me a joke", "can I ask you
    something", 帮我查一下天气吗). Advice about the user's own choices does count
    ("what should I eat tonight?", "can I eat peanut butter?", 我能吃虾吗:
    preferences and allergies matter).
``advice_request``
    A question asking for a recommendation ("anything you'd recommend?", 有什么推荐):
    the answer depends on the user's tastes, which memory holds.
``relation_question``
    A question about someone or something in the user's life, named without "my":
    a relation ("when is mom's birthday", 妈妈是做什么工作的, Chinese drops 我的 before
    kin terms), someone's contact details or birthday ("what's Anna's number?",
    上司的邮箱地址是多少), or someone or something pointed at or counted (那个当厨师的人,
    这家医院, 有几个人在北京工作). Not when the question is about the listener ("how
    are your kids?", 你妈妈好吗).
``own_reference``
    A statement about the user's own people or things ("my sister is visiting next
    week", 我妹妹下周来, 我的车坏了): the reply benefits from what is already known
    about them, and the write path benefits from seeing the old fact before a new one
    supersedes it. Plain first-person statements without a possessive ("I'm tired",
    "I like sushi") are not enough: they are about the moment, not about memory.
"""

from __future__ import annotations

import re

from memory.language.prefilter import normalise
from memory.language.prefilter.self_reference import KIN_EN, KIN_ZH

__all__ = ["needs_memory", "recall_reason", "RECALL_REASONS"]

RECALL_REASONS = (
    "recall_request",
    "about_me",
    "personal_question",
    "advice_request",
    "relation_question",
    "own_reference",
)

# Explicit requests to recall. "remember that/this ..." (an order to store) is not one.
_RECALL_EN = re.compile(
    r"\b(?:do|did|can|could|will|would|don't|didn't) (?:you|u) (?:still |even )?(?:remember|recall|recollect|forget)\b"
    r"|\byou (?:still )?(?:remember|recall)\b|\b(?:you )?(?:forgot|forgotten) (?:about )?(?:me|my|what i|that i)\b"
    r"|^(?:hey |so |and |oh )?(?:remember|recall)"
    r" (?:when|the time|that time|what|how|where|who|why|my|me|our|us|i|we)\b"
    r"|\b(?:did|have|had) i (?:ever |already )?(?:tell|told|mention|mentioned|say|said|ask|asked)\b"
    r"|\bwhat (?:did|have) i (?:tell|told|say|said|mention|mentioned|ask|asked)\b"
    r"|\b(?:last time|the other day|earlier|before|yesterday|last week) (?:we|i|you)"
    r" (?:talked|spoke|chatted|said|told|discussed|mentioned)\b"
    r"|\bas i (?:said|mentioned|told you)\b|\bi (?:told|mentioned to|said to) you\b"
    r"|\bremind me\b(?! to\b)|\btell me (?:again )?(?:what|who|where|when|how|which) (?:i|my|we|our|me)\b"
    r"|\btell me (?:again )?about (?:my|our)\b"
    # "what was the vet's name again?" (not "what made you start again?", not about "you")
    r"|\b(?:what|who|where|when|which)(?:'s| is| was| are| were)\b(?![^.!?]*\byou\b)[^.!?]*\bagain\s*(?:\?|$)"
)
_RECALL_ZH = re.compile(
    r"还记得|记不记得|你记得|我记得|记得[^,.!?]*[吗呢?]|记起来|想起来|忘了吗|忘记了吗|你忘了|你忘记|上次|上回|之前(?:我|咱们|我们)?(?:说|提|聊|讲|告诉)"
    r"|我(?:跟|和|对|给)你(?:说|讲|提|聊)过|我(?:告诉|提醒)过你|提醒我(?:一下)?(?:我|什么)"
    r"|来着"  # "what was it again": asks for something known before
)
# What the assistant knows about the user.
_ABOUT_ME_EN = re.compile(
    r"\b(?:what|how much|anything|everything|something) (?:do|did|else do) (?:you|u) (?:know|remember|recall|have"
    r"|store|keep|think)(?: \w+)? (?:about|of|on) (?:me|myself|us)\b"
    r"|\bwho am i\b|\bwho i am\b|\bdo you (?:know|remember|recognize|recognise) me\b|\bwhat(?:'s| is) my name\b"
    r"|\btell me (?:about|what you know about) (?:me|myself)\b|\bdo you know anything about me\b"
    r"|\bwhat do you know\b|\bhow well do you know me\b"
)
_ABOUT_ME_ZH = re.compile(
    r"我是谁|我叫什么|我的名字(?:是|叫)什么|你(?:还|真的)?(?:知道|了解|认识|记得|清楚)我|关于我|你对我(?:了解|知道|记得)"
)

# Question form (mirrors the pre-filter, kept local so this module reads on its own).
# A spoken question often opens with a filler ("so where do I live", "okay what am I
# allergic to") and transcripts often drop the "?".
_LEAD_EN = r"^(?:(?:so|and|okay|ok|um|uh|well|hey|but|oh|also|then|now|right)[\s,]+)*"
_QUESTION_EN = re.compile(
    r"\?|" + _LEAD_EN + r"(?:what|what's|whats|where|where's|when|who|who's|whose|why|how|how's|which)\b"
    r"|" + _LEAD_EN + r"(?:do|does|did|is|are|was|were|am|can|could|would|will|should|have|has)"
    r"(?:n't)? (?:i|my|you|we|our|it|there|the)\b"
)
_QUESTION_ZH = re.compile(  # 啥 is everyday spoken 什么 (我叫啥, 我爱吃啥)
    r"\?|[吗嘛么]$|什么|啥|怎么|怎样|为什么|哪|谁|几[个点时天岁号月年次]|多少|多久|多大|是不是|有没有|是否|呢$"
    r"|能不能|可不可以|会不会|要不要|行不行|[^不]不$|没问题吧"  # A-not-A and tag questions (我能不能吃海鲜)
)
# First person, minus request formulas ("tell me a joke", "can I ask", 帮我查一下).
_FP_EN = re.compile(r"\b(?:i|me|my|mine|myself|we|us|our|ours|i'm|im|i've|i'd|i'll|we're|we've)\b")
_NOT_FP_EN = re.compile(
    r"\b(?:tell|show|give|send|help|let|teach|get|find|play|read|sing|excuse|pardon|make) me\b"
    r"|\b(?:can|could|may|might) i\b(?! (?:eat|drink|have|take|try|wear|bring)\b)|\blet's\b|\blet us\b"
    r"|\b(?:oh )?my (?:god|gosh|goodness|bad|pleasure)\b"
    r"|\bi (?:wonder|was wondering)\b|\bi mean\b"
)
_FP_ZH = re.compile(r"我|咱|俺")
_NOT_FP_ZH = re.compile(
    r"(?:帮|给|告诉|跟|为|替|教|陪)我(?!们?的)(?=[\u3400-\u9fff])|我想问|我(?:能|可以)(?!(?:不能|不可以)?[吃喝用戴穿带])|请问"
)
# What is asked of someone in the user's life: their contact details, birthday, job...
# ("what's Anna's number?", 上司的邮箱地址是多少). Not asked of the assistant ("your").
_PERSONAL_ATTRIBUTE = re.compile(
    r"(?:(?<!your )\b(?!(?:how|what|who|where|when|why|that|it|he|she|there|here|let)'s)\w+'s|\bhis|\bher|\btheir)"
    r" (?:(?!your\b|you\b)\w+ )?(?:phone|number|email|address|birthday|age|job|work"
    r"|name|school|allergy|allergies|anniversary)\b"
    r"|(?<![你您])的?(?:电话|手机号|号码|邮箱|地址|生日|年龄|岁数|身高|职业|职位|工作单位|学历|教育背景|老家|爱好|兴趣爱好)"
    r"(?=[^。!?]*(?:什么|多少|哪|啥|几|吗|呢|\?))"
)
# Asked for a recommendation ("any restaurant you'd recommend?", 有什么推荐的吗): the
# answer depends on the user's tastes and needs, which memory holds.
_ADVICE = re.compile(r"\b(?:recommend|suggest)(?:s|ed|ions?|ations?)?\b|推荐|建议")
# ...also asked for without a question: "recommend me a film", 给我推荐一部电影吧.
_ADVICE_ASKED = re.compile(
    r"(?:^|[.!?,;]\s*)(?:please |so |ok |okay )?(?:(?:can|could|would) you )?(?:recommend|suggest)\b"
    r"|(?:^|[,.!?;])(?:请|麻烦)?你?(?:给我|帮我|给咱)?推荐"
)
_LISTENER = re.compile(r"\b(?:you|your|yours|you're|u|ur)\b|你|您")
# Someone or something already known, pointed at ("那个当厨师的人", "这家医院") or
# counted among the people the user knows (有几个人): not the listener's (你/您).
_KNOWN_ZH = re.compile(r"(?<![你您])(?:那|这)(?:个|位|家|次|款|场)|(?<![你您们])有(?:几|多少)(?:个|位)?(?:人|朋友)")
# Statements about the user's own people or things.
_OWN_EN = re.compile(r"\b(?:my|our)\b (?!(?:god|gosh|goodness|bad|pleasure|word|lord)\b)")
_KIN_ZH = (
    "妈",
    "爸",
    "父",
    "母",
    "老公",
    "老婆",
    "丈夫",
    "妻子",
    "太太",
    "儿子",
    "女儿",
    "孩子",
    "宝宝",
    "哥",
    "姐",
    "弟",
    "妹",
    "爷爷",
    "奶奶",
    "外公",
    "外婆",
    "姥",
    "舅",
    "叔",
    "婶",
    "姨",
    "姑",
    "表",
    "堂",
    "侄",
    "男朋友",
    "女朋友",
    "男友",
    "女友",
    "对象",
    "未婚",
    "室友",
    "邻居",
    "同事",
    "领导",
    "老板",
    "上司",
    "同学",
    "闺蜜",
    "朋友",
    "家",
    "狗",
    "猫",
    "宠物",
)
_OWN_ZH = re.compile(r"我们?的|我们?家|咱们?(?:的|家)|我(?:" + "|".join(map(re.escape, _KIN_ZH)) + ")")


def recall_reason(text: str) -> str | None:
    """Tag of the first rule that says the message needs long-term memory, else None."""
    t = normalise(text)
    if not t:
        return None
    if _RECALL_EN.search(t) or _RECALL_ZH.search(t):
        return "recall_request"
    if _ABOUT_ME_EN.search(t) or _ABOUT_ME_ZH.search(t):
        return "about_me"
    if _ADVICE_ASKED.search(t):
        return "advice_request"
    en_fp = bool(_FP_EN.search(_NOT_FP_EN.sub(" ", t)))
    zh_fp = bool(_FP_ZH.search(_NOT_FP_ZH.sub("", t)))
    for sentence in _SENTENCES.split(t):
        s = sentence.strip()
        if s and (_QUESTION_EN.search(s) or _QUESTION_ZH.search(s)):
            if _FP_EN.search(_NOT_FP_EN.sub(" ", s)) or _FP_ZH.search(_NOT_FP_ZH.sub("", s)):
                return "personal_question"
            if _ADVICE.search(s):
                return "advice_request"
            if _LISTENER.search(s):
                continue  # asked about the listener's people and things ("how are your kids?")
            if KIN_EN.search(s) or KIN_ZH.search(s) or _PERSONAL_ATTRIBUTE.search(s) or _KNOWN_ZH.search(s):
                return "relation_question"
    if (en_fp and _OWN_EN.search(t)) or (zh_fp and _OWN_ZH.search(t)):
        return "own_reference"
    return None


# Sentence ends, keeping the "?" with its sentence.
_SENTENCES = re.compile(r"(?<=[.!?;])\s*")


def needs_memory(text: str) -> bool:
    """True when GATED retrieval should run for this user message."""
    return recall_reason(text) is not None
