"""Issue 53: the pre-filter's margin on speech it was not written from. A Chinese turn
with no 我 that holds nothing lasting (a request to do something now, a courtesy, how the
body or the weather feels, a reply of a few characters) is skipped; a short repair of
what the assistant just echoed ("no York", 不是北京，上海) reaches extraction."""

from __future__ import annotations

import pytest

from memory.language.gate_model import gate
from memory.language.prefilter import GateAction


@pytest.mark.parametrize(
    "text",
    [
        "把灯关了",
        "打开收音机",
        "谢了",
        "晚安啦",
        "稍等",
        "有点冷",
        "眼睛有点干",
        "外面阴沉沉的",
        "昨晚没睡好",
        "对就是它",
    ],
)
def test_chinese_turns_that_hold_nothing_lasting_are_skipped(text: str) -> None:
    assert gate(text, ()).action is GateAction.SKIP, text


@pytest.mark.parametrize(
    "text",
    ["张丽华在江苏南京工作。", "王志强喜欢听音乐会。", "婚期推到明年了", "是复旦不是同济", "我在杭州上班"],
)
def test_chinese_facts_without_a_first_person_word_still_pass(text: str) -> None:
    assert gate(text, ()).action is not GateAction.SKIP, text


@pytest.mark.parametrize(
    ("text", "prev"),
    [
        ("no york", "so you're in yeovil"),
        ("oh wait he's seven now he had his birthday", "six and into dinosaurs brilliant"),
        ("no sorry it's katie with a k", "oh no poor catie"),
        ("不是北京，上海", "北京冷吧"),
    ],
)
def test_a_short_repair_of_the_echo_reaches_extraction(text: str, prev: str) -> None:
    assert gate(text, ("earlier", prev)).action is not GateAction.SKIP, text


@pytest.mark.parametrize(("text", "prev"), [("no thanks", "want me to read it again"), ("nope", "anything else")])
def test_a_plain_no_is_no_repair(text: str, prev: str) -> None:
    assert gate(text, (prev,)).action is GateAction.SKIP, text
