"""Is the user asking about earlier conversations? ("what did we talk about last time?",
"上次我们聊了什么"). Rules, not a model: checked on every user turn, in microseconds,
so replies that do not ask pay nothing (bench/retrieval/archive.py does not need to measure it).
"""

from __future__ import annotations

import re

_EN = re.compile(
    r"\b(?:what|which|remind me)\b.{0,40}\b(?:we|i|you)\b.{0,20}"
    r"\b(?:talk(?:ed)?|chat(?:ted)?|discuss(?:ed)?|spoke|speak|said|say|told|tell|decide[d]?|agree[d]?)\b"
    r"|\b(?:last|previous|earlier|other|our)\s+(?:time|conversation|call|chat|session|talk)s?\b"
    r"|\b(?:we|i)\s+(?:talked|spoke|chatted|discussed)\b.{0,30}\b(?:before|yesterday|last|ago|earlier)\b"
    r"|\bremember\s+(?:what|when)\s+(?:we|i)\b",
    re.IGNORECASE | re.DOTALL,
)
_ZH = re.compile(
    r"上次|上回|上一次|之前|以前|前几天|昨天|那次|上周|上个月"
    r"|(?:我们|咱们|我|你).{0,6}(?:聊过|谈过|说过|讲过|讨论过|聊了|谈了|讨论了)"
)
_ZH_TOPIC = re.compile(r"聊|谈|说|讲|讨论|对话|通话|决定")


def asks_about_past_conversations(text: str) -> bool:
    """True for a question about what was said in earlier conversations, in English or
    Chinese. A Chinese time word ("上次", "之前") counts only with a word for talking."""
    if not text or not text.strip():
        return False
    if _EN.search(text):
        return True
    zh = _ZH.search(text)
    return bool(zh and (_ZH_TOPIC.search(text)))
