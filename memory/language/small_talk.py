"""Small talk: a turn no memory bears on ("ok thanks", "how's the weather today?", 嗯, 好的,
再见), English and Chinese.

A reply to small talk is given no recalled memories (`MemoryService.wants_recall`): what a
look-up would find for it is whatever the user's store holds nearest to "hello", and
in a store of conversations that is the user's own chit-chat, scoring as high as a real
answer (bench/retrieval/block.py measured LoCoMo's small talk at the scores of its answers, so no
relevance cut can drop it). Read in order:

1. a message that asks for memory (`needs_memory`: "what's my name?", 你还记得吗) is never
   small talk, except the phatic forms below that only look like it ("can you hear me?");
2. a phatic form on its own: the weather, the time, "can you hear me", "tell me a joke",
   "are you there", the assistant's own name, "and you?", goodbyes, "go on", "hold on"
   (`_PHATIC_EN`, `_PHATIC_ZH`, the whole message, short);
3. what GATED's pre-filter reads as a greeting, an acknowledgement or a bare reaction
   ("hello there", "sounds good", "haha that's funny", 早上好, 没问题);
4. a message with no keyword to look up (`lexical.keywords`, the words naming the user
   left out: "really?", "what about you?").
"""

from __future__ import annotations

import re

from memory.language import lexical
from memory.language.prefilter import GateAction, is_acknowledgement, normalise, prefilter
from memory.language.recall_intent import needs_memory

# Longest message read as small talk: past it, a message says something.
MAX_CHARS = 60
# What the pre-filter calls a turn that says nothing to remember or look up.
_SKIP_REASONS = frozenset({"empty", "greeting", "ack", "reaction"})
_NEUTRAL = frozenset({lexical.USER_EN, lexical.USER_ZH})

_LEAD_EN = r"(?:(?:ok|okay|so|well|hey|hi|um|uh|oh|and|alright|anyway|by the way|sorry|please)[\s,]+)*"
_TAIL_EN = r"(?:[\s,]+(?:then|now|for now|today|please|there|again|right now|for me|buddy|mate|friend))*"
_PHATIC_EN = re.compile(
    rf"^{_LEAD_EN}(?:"
    r"(?:how's|hows|how is|what's|whats|what is) the weather(?: like)?(?: today| outside| out there| now)?"
    r"|(?:is it|will it) (?:going to )?(?:rain|be sunny|be cold|be hot|snow)(?: today| tomorrow)?"
    r"|nice weather(?: today)?|(?:it's|its) (?:so )?(?:hot|cold|sunny|rainy) (?:today|outside)"
    r"|what time is it|what's the time|whats the time|what day is (?:it|today)|what's the date(?: today)?"
    r"|(?:can|could|do) you (?:still )?hear me(?: okay| ok| alright| well| now| clearly)?"
    r"|(?:are )?you (?:still )?(?:there|listening|awake|with me)|hello\?|huh|hmm+|eh|pardon|come again|say that again"
    r"|(?:tell|give) me a joke|(?:tell|give) me something (?:funny|fun)|(?:sing|play) (?:me )?a song"
    r"|(?:tell me )?(?:a|another) joke|make me laugh"
    r"|what(?:'s| is) your name|who are you|what are you|are you (?:a robot|an ai|human|real)"
    r"|(?:and|how about|what about) you|you\?|how are you(?: doing)?(?: today)?|how's your day(?: going)?"
    r"|(?:ok |okay )?(?:bye|goodbye|bye bye|see you|see ya|talk (?:to you )?(?:later|soon|tomorrow)"
    r"|let's talk (?:later|tomorrow|soon)|good ?night|take care|have a (?:nice|good|great) (?:day|night|evening)"
    r"|catch you later|gotta go|i have to go|i need to go|i'll be back|i'm back|i am back)"
    r"|go on|continue|keep going|tell me more|and then|never ?mind|forget it|hold on|wait"
    r"|(?:(?:wait|hold on|just|give me|gimme) )?(?:a|one) (?:sec|second|minute|moment)"
    r"|sorry(?: about that| for that)?|my bad|excuse me|no worries"
    r"|(?:that's|thats|that is) (?:all|it)(?: for now)?|nothing(?: else)?|not much|same|me too"
    rf"){_TAIL_EN}[\s.!?~]*$"
)
_PHATIC_ZH = re.compile(
    r"^(?:那个|嗯|好|哎|诶|对了|话说|请问|那)?[，,\s]*(?:"
    r"(?:今天|明天|现在|外面)?(?:的)?天气(?:怎么样|如何|好吗|好不好|不错|真好|很好|挺好|好热|好冷)"
    r"|(?:今天|明天)?会下雨吗|(?:今天)?好热|(?:今天)?好冷"
    r"|(?:现在)?几点(?:了|钟)?|今天(?:是)?(?:星期几|周几|几号|几月几号)|现在什么时间"
    r"|(?:你)?(?:能|可以)?听(?:得)?(?:到|见|清)(?:我(?:说话)?)?(?:吗|嘛|么)?|你还在吗|你在吗|在吗|在不在"
    r"|(?:给我)?(?:讲|说)(?:个|一个)(?:笑话|故事)(?:吧|呗)?|唱(?:首|一首)歌(?:吧)?|逗我(?:开心|笑)(?:吧)?"
    r"|你(?:叫|是)(?:什么名字|谁|什么)|你是(?:机器人|真人|人工智能|ai|人)吗|你(?:能|会|可以)(?:干|做)(?:什么|啥)|你有什么功能"
    r"|喂+|(?:等|等我|稍等)(?:一下|一会儿?|片刻)|(?:晚点|待会儿?|等会儿?|改天)(?:再)?(?:聊|见|说)"
    r"|你呢|那你呢|你怎么样|你还好吗|你今天怎么样"
    r"|再见|拜拜|拜|回头(?:见|聊)|下次(?:见|聊)|明天(?:见|聊)|晚安|先这样|我先走了|我要走了|我得走了|我回来了"
    r"|继续|接着说|然后呢|还有呢|算了|没事|没什么|等一下|等等|稍等|不好意思|对不起|抱歉"
    r")(?:吧|呀|啊|哦|呢|啦)?[\s。！？!?~…]*$"
)


def is_small_talk(text: str) -> bool:
    """Does no memory bear on this message? See the module's docstring for the rule."""
    if not text.strip():
        return True
    if len(text) > MAX_CHARS:
        return False
    if is_acknowledgement(text):
        return True
    t = normalise(text)
    if _PHATIC_EN.match(t) or _PHATIC_ZH.match(t):
        return True
    if needs_memory(text):
        return False
    decision = prefilter(text)
    if decision.action is GateAction.SKIP and decision.reason in _SKIP_REASONS:
        return True
    return not [w for w in lexical.keywords(text) if w not in _NEUTRAL]


__all__ = ["MAX_CHARS", "is_small_talk"]
