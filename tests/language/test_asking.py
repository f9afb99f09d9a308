"""Does a user turn only ask? (memory/language/asking.py: what retrieval ranks below what
states something.) English and Chinese, with and without punctuation."""

from __future__ import annotations

import pytest

from memory.language.asking import only_asks, tells_nothing

ONLY_ASKS = [
    "What's my sister's name?",
    "what's my sister called again",
    "Do you remember what my dog is called?",
    "What's my sister's name? And what should I avoid eating?",
    "When did Caroline go to the LGBTQ support group?",
    "Sorry, I forgot: when did Melanie paint a sunrise?",
    "ok thanks. what time is it?",
    "我妹妹叫什么名字来着",
    "你还记得我妹妹叫什么吗",
    "我想问一下，我参观的医院是专门治疗什么的医院？",
    # a part that only points at what is asked about is part of the question
    "那个身高是155cm的人，联系电话是什么？",
    "对于我拥有的手机，以下哪个是最可能的描述？",
    '那个主要内容是"阅读分享会，探讨写作技巧，互相荐书。"的活动，持续时间是什么？',
    "那个邮箱地址是li.zixuan@example.gov.cn的人，他是做什么工作的呀？",
]
TELLS = [
    "My sister is called Anna, and I'm allergic to peanuts.",
    # a statement beside the question
    "I just moved to Berlin, any tips?",
    "my dog is sick, what should I do?",
    "I got a perfect score on my math test today! How should I celebrate?",
    "这家医院怎么样啊？我刚才路过那儿。",
    # a request for something to be done about the user's own
    "Can you find a vet for my dog Max?",
    "你能帮我的狗旺财找个兽医吗？",
    # the user's own, by name
    "Is my sister Anna coming on Friday?",
    # wh-words used as indefinites in statements
    "小米12拍照也特别给力，挺适合我工作之余拍拍照什么的。",
    "人民公园空气特别清新。就是要是能多放几个休息的座椅就更完美了。",
    # nothing asked at all
    "ok",
    "",
]


@pytest.mark.parametrize("text", ONLY_ASKS)
def test_a_turn_that_only_asks_is_told_apart(text: str) -> None:
    assert only_asks(text)


@pytest.mark.parametrize("text", TELLS)
def test_a_turn_that_tells_something_is_not_only_asking(text: str) -> None:
    assert not only_asks(text)


@pytest.mark.parametrize(
    ("text", "flagged"),
    [
        ("Hey Mel! Good to see you! How have you been?", True),
        ("Wow, that agency looks great! What made you pick it?", True),
        ("Melanie: Wow, that's cool, Caroline! What happened that was so awesome?", True),  # a speaker's name first
        *[(text, True) for text in ONLY_ASKS],
        # no question, whatever the pre-filter finds in it: a memory about someone is kept
        ("Bart's pet dog, an Alaskan, had a fever, making Bart very anxious.", False),
        ("Your store looks great - your customers will be so comfy.", False),
        ("Hey Caroline! I'm swamped with the kids & work. What's up with you?", False),  # tells: kids, work
        *[(text, False) for text in TELLS],
    ],
)
def test_what_the_store_flags_asks_and_tells_nothing(text: str, flagged: bool) -> None:
    assert tells_nothing(text) is flagged
