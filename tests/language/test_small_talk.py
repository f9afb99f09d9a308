"""Small talk gets no look-up (memory/language/small_talk.py, issue 51): English and
Chinese lines no memory bears on, and messages that look alike but ask for memory."""

from __future__ import annotations

import pytest

from memory.language.small_talk import MAX_CHARS, is_small_talk

SMALL_TALK = (
    "ok thanks", "How's the weather today?", "hello there", "Good morning!", "haha that's funny", "sounds good",
    "bye for now", "Can you hear me?", "let's talk later", "nice, go on", "What time is it?", "tell me a joke",
    "really?", "what about you?", "hold on", "never mind",
    "好的", "嗯", "谢谢", "再见", "今天天气怎么样？", "你好", "哈哈哈", "没问题", "早上好", "听得到吗？", "讲个笑话吧",
    "现在几点了？", "你呢？", "等一下", "晚安",
)  # fmt: skip
NOT_SMALL_TALK = (
    "What's my name?", "What's my sister's name?", "Do you remember my birthday?", "I play the cello.",
    "What's the weather like in Paris, where my sister lives?", "I'm tired today", "Where do I work?",
    "When did Caroline go to the LGBTQ support group?", "By the way, what should I wear?",
    "你还记得吗？", "我妹妹叫什么？", "我今天好累", "金融科技精英论坛的主要内容是什么？", "对了，我要穿什么好呢？",
)  # fmt: skip


@pytest.mark.parametrize("line", SMALL_TALK)
def test_small_talk_is_told(line: str) -> None:
    assert is_small_talk(line)


@pytest.mark.parametrize("line", NOT_SMALL_TALK)
def test_what_asks_for_memory_or_says_something_is_not_small_talk(line: str) -> None:
    assert not is_small_talk(line)


def test_a_long_message_is_never_small_talk() -> None:
    phatic = "ok thanks"
    assert is_small_talk(phatic + " " * (MAX_CHARS - len(phatic)))  # at the bound: read
    assert not is_small_talk("so, " * 16 + "how's the weather today?")  # past it: says something
