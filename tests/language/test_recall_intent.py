"""GATED retrieval trigger: which user messages need long-term memory."""

from __future__ import annotations

import pytest

import memory.language.prefilter as prefilter_module
import memory.language.recall_intent as recall_module
from memory.language import hanzi
from memory.language.prefilter import MAX_CHARS
from memory.language.recall_intent import RECALL_REASONS, needs_memory, recall_reason
from tests.language.regex_probe import probed, with_submodules


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("What's my sister's name?", "personal_question"),
        ("Do you remember what I told you?", "recall_request"),
        ("what do you know about me", "about_me"),
        ("who am I", "about_me"),
        ("what's my favourite colour", "personal_question"),
        ("remember when we went hiking?", "recall_request"),
        ("Remind me what my wife's birthday is", "recall_request"),
        ("Did I tell you about my new job?", "recall_request"),
        ("where do i live", "personal_question"),
        ("How old am I?", "personal_question"),
        ("WHAT IS MY NAME", "about_me"),
        ("我妹妹叫什么名字？", "personal_question"),
        ("你还记得我吗", "recall_request"),
        ("你知道我喜欢什么吗", "about_me"),
        ("我叫什么", "about_me"),
        ("我喜欢的颜色是什么", "personal_question"),
        ("我上次跟你说的那家餐厅叫什么？", "recall_request"),
        ("你了解我吗？", "about_me"),
        # spoken: 啥 for 什么, and questions opened by a filler with no "?"
        ("我养的狗叫啥", "personal_question"),
        ("我爱吃啥", "personal_question"),
        ("so where do I live", "personal_question"),
        ("okay what am I allergic to", "personal_question"),
    ],
)
def test_identity_relationship_preference_and_recall_questions(text: str, reason: str) -> None:
    assert needs_memory(text)
    assert recall_reason(text) == reason


@pytest.mark.parametrize(
    "text",
    [
        "What's the weather like?",
        "ok thanks",
        "Tell me a joke",
        "Tell me about the Eiffel Tower",
        "Can I ask you something?",
        "How are you?",
        "I'm tired",
        "Hi there",
        "remind me to buy milk",
        "你好",
        "今天天气怎么样",
        "今天天气怎么样？",
        "谢谢",
        "帮我查一下天气",
        "你能帮我查一下天气吗？",
        "",
        "   ",
    ],
)
def test_messages_that_do_not_need_memory(text: str) -> None:
    assert not needs_memory(text)
    assert recall_reason(text) is None


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        # Chinese drops 我的 before kin terms; 来着 is "what was it again"; a person or an
        # event pointed at (那个, 这家) or counted among the people the user knows.
        ("妈妈是做什么工作的？", "relation_question"),
        ("上司的邮箱地址是多少？", "relation_question"),
        ("女儿叫什么来着", "recall_request"),
        ("那个当厨师的人有多高？", "relation_question"),
        ("有几个人在北京工作？", "relation_question"),
        ("When is mom's birthday?", "relation_question"),
        ("What's Anna's phone number?", "relation_question"),
        ("what was the vet's name again?", "recall_request"),
        # What the user may eat or drink, and advice, depend on what memory holds.
        ("Can I eat peanut butter?", "personal_question"),
        ("我能吃虾吗？", "personal_question"),
        ("Any restaurant you would recommend?", "advice_request"),
        ("有什么好吃的推荐吗？", "advice_request"),
        # Chinese asks by A-not-A or a tag, and asks for advice without a question.
        ("我能不能吃海鲜", "personal_question"),
        ("我可以喝牛奶不", "personal_question"),
        ("我吃芒果没问题吧", "personal_question"),
        ("给我推荐一部电影吧", "advice_request"),
        ("Recommend me a good book", "advice_request"),
        # traditional characters, as users in Taiwan and Hong Kong (and some STT) write
        ("我女兒叫什麼名字", "personal_question"),
        ("媽媽是做什麼工作的？", "relation_question"),
        ("你還記得我嗎", "recall_request"),
    ],
)
def test_questions_about_the_users_people_diet_and_choices(text: str, reason: str) -> None:
    # These got no memory in GATED: 60 of 60 MemDaily questions naming a relative
    # without 我, and "Can I eat peanut butter?" from a user with a peanut allergy.
    assert recall_reason(text) == reason


@pytest.mark.parametrize(
    "text",
    [
        "How's your job going?",
        "What is your cat's name?",
        "你妈妈好吗？",
        "你觉得这次旅行怎么样？",
        "What made you start running again?",
        "What's the capital of France?",
        "Can I ask you something?",
    ],
)
def test_questions_about_the_listener_or_the_world_do_not(text: str) -> None:
    assert recall_reason(text) is None


@pytest.mark.parametrize(
    "text",
    ["my sister is visiting next week", "Our dog is sick again", "我妹妹下周来", "我的车坏了", "我们家的猫又跑了"],
)
def test_statements_about_the_users_own_people_and_things(text: str) -> None:
    # Documented choice: the reply and the write path both benefit from what is known.
    assert recall_reason(text) == "own_reference"


@pytest.mark.parametrize("text", ["I like sushi", "I'm going for a run", "我今天很累"])
def test_plain_first_person_statements_do_not(text: str) -> None:
    assert not needs_memory(text)


@pytest.mark.parametrize(
    "text",
    ["Um, what's MY SISTER'S name", "what’s my favourite colour", "我妹妹叫什么名字?", "ｗｈｏ ａｍ ｉ？"],
)
def test_robust_to_case_quotes_and_full_width(text: str) -> None:
    assert needs_memory(text)


def test_reasons_are_declared_and_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = ["What's my sister's name?", "ok thanks", "你还记得我吗", "my sister is visiting next week"]
    reasons = {recall_reason(t) for t in texts}
    assert reasons - {None} <= set(RECALL_REASONS)
    # A long message costs what its first MAX_CHARS characters cost (the normalisation
    # reads twice that); per-call speed is `python -m bench.gate.rule_cost`'s, not a stopwatch's.
    with probed(monkeypatch, recall_module, *with_submodules(prefilter_module), hanzi) as seen:
        recall_reason("what is my sister's name " * 2000)
    assert seen, "no rule was probed"
    assert max(n for name, n in seen if name != "memory.language.prefilter.text._SPACES") <= MAX_CHARS, seen
    assert max(n for _, n in seen) <= 2 * MAX_CHARS


def test_the_trigger_benchmark_counts_what_it_says(tmp_path, capsys) -> None:
    import json

    from bench.gate.recall_intent import main as bench_main

    questions = tmp_path / "questions.json"
    questions.write_text(json.dumps({
        "name": "q", "language": "mixed", "stores": [{"store_id": "u", "memories": [{"id": "m", "text": "x"}]}],
        "queries": [{"id": f"q{i}", "store_id": "u", "query": q, "relevant": ["m"], "category": c}
                    for i, (q, c) in enumerate([("What's my sister's name?", "a"), ("妈妈是做什么工作的？", "a"),
                                                ("What's the capital of France?", "b")])],
    }), encoding="utf-8")  # fmt: skip
    turns = tmp_path / "turns.json"
    turns.write_text(json.dumps({
        "name": "t", "language": "en",
        "items": [{"id": f"t{i}", "text": t, "durable": False} for i, t in enumerate(["ok thanks", "How are you?"])],
    }), encoding="utf-8")  # fmt: skip
    assert bench_main(["--data", str(questions), str(turns), "--misses", "5"]) == 0
    out = capsys.readouterr().out
    figures = json.loads(out.strip().splitlines()[-1])["files"]
    assert (figures["q"]["searched"], figures["q"]["measures"]) == (2, "recall")
    assert figures["q"]["by_category"] == {"a": 1.0, "b": 0.0}
    assert (figures["t"]["searched"], figures["t"]["measures"]) == (0, "search rate")
    assert "no search: What's the capital of France?" in out
    assert bench_main(["--data", str(tmp_path / "missing.json")]) == 2
    assert "missing.json" in capsys.readouterr().err
