"""Leading frames: a stance ("I hope", 我会试试) is dropped, an opinion ("I think",
我觉得) is kept.

A frame says nothing durable itself; only its complement is tested, so "I hope you win"
is skipped and "I hope my son wins" is not.
"""

from __future__ import annotations

import re

from memory.language.prefilter.text import alt, words

_STANCE_LEAD_EN = (
    r"^(?:(?:yes|yeah|yep|no|oh|well|and|but|so|ok|okay|haha|lol|wow)[\s,]+)*"
    r"(?:i|i'm|im|i am|i do|i'd|i would|i can|i could|i just|i really|i totally|i also|i definitely|i'll|i will"
    r"|i honestly|i personally|i still)\s+"
    r"(?:really |just |totally |so |very |completely |definitely |also |too |truly |certainly |sincerely |do |can"
    r" |honestly |personally |still )*"
)
# "I hope / I bet / I'm sorry / I'll try / we could": the frame says nothing durable.
_STANCE_EN = re.compile(
    _STANCE_LEAD_EN +
    # clause-taking verbs and adjectives: whatever follows is their complement
    r"(?:(?:guess|bet|hope|suppose|wonder|wondered|imagine|assume|figure|figured|doubt|sure|glad|happy|sorry"
    r"|not sure|unsure|excited for you|proud of you|impressed|jealous|can imagine|can tell|can't imagine"
    r"|cannot imagine|would love to|'d love to|hear|heard|don't know|dont know|do not know|didn't know"
    r"|had no idea|have no idea|dunno|must say|have to say)\b"
    r"(?:\s+(?:to hear|about that|for you|of you|to|about|how|what|if|whether))?"
    # verbs that are a frame only when nothing or a pronoun follows ("I see" vs "I see a doctor")
    r"|(?:know|knew|see|understand|mean|agree|appreciate|admire|respect|trust|love|like|feel)"
    r"(?:\s+(?:that|this|it|you|so|too|with you|what you mean|how|what|why|right))?"
    r"(?=\s*$|\s+(?:you|your|it|that|this|he|she|they)\b)"
    # taking up a suggestion: "I'll try / check it out / look into it / think about it"
    r"|(?:try|check|look into|look it up|look for|think about|consider|keep that in mind|let you know"
    r"|have to try|have to check|have to look|give it a try|give it a shot|see)\b)"
    # offers and proposals: "I'd be happy to", "we could", "maybe we should", "if I may"
    r"|^(?:i|i'd|i would) (?:be (?:happy|glad) to|like to (?:hear|know|chat|talk|see)"
    r"|love to (?:hear|know|see|chat|talk))\b"
    r"|^(?:maybe |perhaps |then |so )?we (?:could|should|can|might|would|'d)\b|^if i (?:may|might|can)\b"
)
_UPTAKE_ZH = words("uptake_zh")
_STANCE_ZH = re.compile(
    r"^我(?:也|还|真的|确实|就|只|很|非常)?"
    r"(?:(?:猜|相信|希望|同意|赞同|估计|怀疑|祝|佩服|感激|不知道|不确定|不清楚|没想到|很高兴|很开心|很抱歉|很遗憾)"
    r"|(?:明白|知道|懂|理解)(?:了|啦)?(?=$|你|您|这|那)"
    rf"|(?:一定|肯定)?会(?:去|好好|认真|试着|努力|再|多|继续)*(?:{alt(_UPTAKE_ZH)}))"
)
# "I think dogs are great" states a preference: the complement is an opinion unless it
# is about the listener or is a reaction.
_OPINION_EN = re.compile(
    _STANCE_LEAD_EN + r"(?:think|thought|believe|feel like|feel that|would say|'d say|reckon|find)\b(?:\s+that)?"
)
_OPINION_ZH = re.compile(r"^我(?:也|还|真的|确实|一直|个人)?(?:觉得|认为|感觉|发现)")


# What may be left of a frame without adding anything: "I hope so", "我会试试的".
_EMPTY_REST = re.compile(r"^(?:so|too|not|that|it|this|then|though|anyway|either|[的了吧啊呀哦呢嘛啦]+)?$")
_FRAMES = (("opinion", _OPINION_EN), ("opinion", _OPINION_ZH), ("stance", _STANCE_EN), ("stance", _STANCE_ZH))


def strip_frame(c: str) -> tuple[str, str | None]:
    """Drop a leading opinion or stance frame; return the complement and the frame kind."""
    for kind, rx in _FRAMES:
        m = rx.match(c)
        if m and m.end() > 0:
            rest = c[m.end() :].strip(" ,!.")
            return ("" if _EMPTY_REST.match(rest) else rest), kind
    return c, None
