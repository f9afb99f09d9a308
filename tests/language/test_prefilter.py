"""Gatekeeper pre-filter: behaviour, robustness, the benchmark's metrics and loader.

Everything here runs without /work/shared except ``test_quality_gate_on_realistic_dev``,
which is skipped when the eval data is absent and is the product's quality gate when
it is present.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import memory.language.prefilter as prefilter_module
from bench.common.evaldata import EvalDataError, default_eval_dir, load_gate, load_retrieval
from bench.gate.run import baseline, evaluate, gate_metrics
from bench.gate.run import main as gate_main
from memory.language import hanzi
from memory.language.prefilter import MAX_CHARS, REASONS, GateAction, GateDecision, prefilter
from tests.language.regex_probe import probed, with_submodules

SKIP, EXTRACT, FORCE = GateAction.SKIP, GateAction.EXTRACT, GateAction.FORCE


# ----------------------------------------------------------------- behaviour


@pytest.mark.parametrize(
    "text",
    [
        # acknowledgements, thanks, fillers
        "ok thanks",
        "OK THANKS!!",
        "Okay, thank you very much.",
        "thanks a lot",
        "cool",
        "haha",
        "um",
        "mm hmm",
        "好的",
        "谢谢",
        "嗯嗯",
        "好的，谢谢！",
        "谢谢你的建议，朋友。",
        "没问题",
        "ＯＫ，ｔｈａｎｋｓ！",
        # greetings
        "hi",
        "Hello!",
        "Good morning!",
        "how are you?",
        "你好",
        "你好！",
        "早上好，朋友。",
        "晚安",
        # pure questions, no self-disclosure
        "What's the weather like?",
        "What's my sister's name?",
        "what is my name",
        "Where do you live?",
        "Have you been to Paris?",
        "Can you recommend a good book?",
        "你觉得呢？",
        "今天天气怎么样？",
        "你喜欢什么颜色？",
        "你还记得我妹妹叫什么吗？",
        "Do you remember my sister's name?",
        # reactions and stance-only remarks
        "That's great!",
        "Sounds good",
        "Wow, that sounds amazing!",
        "I'm so sorry to hear that.",
        "I hope so",
        "I bet that was fun",
        "I'll try that",
        "这听起来不错",
        "我明白了",
        "我会试试的",
        "好的，我会考虑的",
        # requests that contain "me" but say nothing about the user
        "Tell me a joke",
        "Let me know",
        # empty and punctuation only
        "",
        "   ",
        "...",
        "？？",
        "!!!",
    ],
)
def test_skips_transient_turns(text: str) -> None:
    assert prefilter(text).action is SKIP


@pytest.mark.parametrize(
    "text",
    [
        "My sister's name is Anna",
        "I moved to Berlin",
        "I live in Paris",
        "I'm vegetarian",
        "I work as a nurse at the city hospital",
        "I have two kids",
        "I'm allergic to cats",
        "I love hiking in the mountains",
        "My birthday is on May 3rd",
        "We got a puppy last week",
        "I'll be moving to Texas next month",
        "I know nothing about cars",
        "我妹妹叫小雪",
        "我妹妹叫小雪。",
        "我住在上海",
        "我是老师",
        "我喜欢吃火锅",
        "我下周要去北京出差",
        "我妈妈下个月生日",
        "外婆的生日是十月一日。",
        "老婆怀孕了",
        "我觉得红色最好看",
        # Chinese drops the subject: substantive statements still go to the LLM
        "刚搬到北京",
        "明天早上九点开会",
        # ...also when it opens like a reaction: a taste (很喜欢打篮球), a time (这周末搬家), a habit
        "很喜欢打篮球",
        "挺喜欢爬山的",
        "太喜欢吃火锅了",
        "这周末搬家",
        "这个月底要去美国出差",
        "其实不吃香菜",
        "一般周末都去爬山",
        "通常七点下班",
        # traditional characters
        "我妹妹叫小雪",
        "我住在臺北",
        "我對花生過敏",
        "很喜歡看電影",
        # subject-less English speech
        "Just got back from a week in Rome",
        "Been working as a plumber for ages",
        # generic evaluation = the speaker's taste
        "Dogs are so much fun",
    ],
)
def test_extracts_possible_facts(text: str) -> None:
    assert prefilter(text).action is EXTRACT


@pytest.mark.parametrize(
    "text",
    [
        "请记住我喜欢蓝色",
        "帮我记住明天开会",
        "记住，我不吃辣",
        "别忘了我对花生过敏",
        "请你记一下：我的生日是五月三日",
        "remember that my dog is called Rex",
        "Remember, I'm vegan",
        "Please remember my birthday is May 3rd",
        "Don't forget I'm allergic to peanuts",
        "Keep in mind I'm vegan",
        "note that I prefer morning meetings",
        "Could you remember that I take my coffee black?",
        "OK so please remember: my wife is called Mia",
    ],
)
def test_forces_explicit_remember_requests(text: str) -> None:
    decision = prefilter(text)
    assert decision == GateDecision(FORCE, "explicit_remember")


@pytest.mark.parametrize(
    "text",
    [
        "I remember my first car",
        "Remember when we talked about Paris?",
        "Do you remember my sister's name?",
        "你还记得我吗",
        "我记不住这些单词",
        # questions that start like an order: forcing them stored the question itself as a fact
        "Remember my sister's name?",
        "Remember that time we went skiing?",
        "你记得我叫什么",
        "记得我妹妹叫什么",
        "记住了没有",
        "你记住了没",
    ],
)
def test_recall_and_reminiscing_are_not_forced(text: str) -> None:
    assert prefilter(text).action is not FORCE


@pytest.mark.parametrize(
    "text",
    [
        "别帮我记下来，我的密码是1234",
        "不要帮我记住这个",
        "不用帮我记住",
        "Don't write this down, my password is 1234",
        "You don't need to remember this: my PIN is 4711",
        "No need to note that",
    ],
)
def test_asking_not_to_be_remembered_is_never_forced(text: str) -> None:
    # FORCE keeps the turn verbatim even when extraction finds nothing (password and all).
    assert prefilter(text).action is not FORCE


@pytest.mark.parametrize(
    "text",
    [
        "I just moved to Berlin, any tips?",
        "I'm a software engineer, what do you do?",
        "I collect old stamps what about you?",  # run-on, no comma
        "Hi I am a retired pilot how about you?",
        "我刚搬到柏林，有什么建议吗？",
    ],
)
def test_question_that_also_discloses_is_not_skipped(text: str) -> None:
    assert prefilter(text).action is EXTRACT


@pytest.mark.parametrize(
    "text",
    [
        "Um, well, I live in Paris.",
        "UM, WELL, MY SISTER'S NAME IS ANNA",
        "so like, i moved to berlin",
        "I\u2019m vegetarian",
        "我妹妹叫小雪！",
        "嗯，那个，我住在上海。",
        "\u3000我是老师\u3000",
    ],
)
def test_case_fillers_curly_quotes_and_full_width_punctuation(text: str) -> None:
    assert prefilter(text).action is EXTRACT


@pytest.mark.parametrize(
    ("text", "context", "reason"),
    [
        ("Seventeen, but I feel older", ["How old are you?"], None),  # first person anyway
        ("Seventeen", ["How old are you?"], "answer_to_question"),
        ("Paris", ["Where do you live?"], "answer_to_question"),
        ("Yes.", ["Do you have any kids?"], "answer_to_question"),
        ("上海", ["你住在哪里？"], "answer_to_question"),
        ("有", ["你有孩子吗？"], "answer_to_question"),
        ("She is doing great these days", ["Your daughter sounds lovely."], "about_relation"),
        ("Same here!", ["I love jazz."], "agreement"),
        # Corrections of what the assistant just said: the name or city it had is wrong.
        ("It's Jon, actually", ["Nice to see you again, John!"], "correction"),
        ("Jon, not John", ["Nice to see you again, John!"], "correction"),
        ("Wrong name, it's Jon", ["Nice to see you again, John!"], "correction"),
        ("Berlin now, actually", ["Hope Paris is treating you well!"], "correction"),
    ],
)
def test_context_turns_short_answers_into_candidates(text: str, context: list[str], reason: str | None) -> None:
    decision = prefilter(text, context)
    assert decision.action is EXTRACT
    if reason:
        assert decision.reason == reason
    # without the question an English fragment carries nothing (Chinese statements
    # default to EXTRACT because Chinese drops the subject)
    if reason in {"answer_to_question", "agreement", "correction"} and text.isascii():
        assert prefilter(text).action is SKIP


def test_unpunctuated_transcripts() -> None:
    assert prefilter("do you like the farm i grew up there").action is EXTRACT
    assert prefilter("paris", ["nice where do you live"]).action is EXTRACT
    assert prefilter("what is the weather like today").action is SKIP
    assert prefilter("ok thanks bye").action is SKIP


def test_context_does_not_rescue_pleasantries() -> None:
    assert prefilter("ok thanks", ["Do you have any pets?"]).action is SKIP
    assert prefilter("That sounds lovely!", ["What do you do for fun?"]).action is SKIP
    # "not" about something the assistant did not say is no correction
    assert prefilter("Not funny.", ["Here is a joke for you."]).action is SKIP


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("ok thanks", "ack"),
        ("你好", "greeting"),
        ("What's the weather like?", "pure_question"),
        ("My sister's name is Anna", "first_person_statement"),
        ("remember that my dog is called Rex", "explicit_remember"),
        ("", "empty"),
        ("I'm so sorry to hear that", "stance"),
        ("That's great!", "reaction"),
    ],
)
def test_reason_tags(text: str, reason: str) -> None:
    assert prefilter(text).reason == reason


def test_every_reason_is_declared_for_its_action() -> None:
    samples = [
        "ok thanks",
        "hi",
        "why?",
        "I live here",
        "Remember: I'm vegan",
        "",
        "那真是个好建议",
        "刚搬到北京",
        "Dogs are fun",
        "Mom is visiting",
        "her name is Anna",
        "It's cold here",
        "Been busy",
    ]
    for text in samples:
        d = prefilter(text, ["Do you like it?"])
        assert d.reason in REASONS[d.action], (text, d)


def test_bounded_whatever_the_input(monkeypatch: pytest.MonkeyPatch) -> None:
    # Pathological input stays cheap: the rules see the first MAX_CHARS characters of the
    # message and of the turn before it, the normalisation twice that; never the rest.
    # (Speed per call: `python -m bench.gate.rule_cost` and `bench.gate.run`, not a stopwatch here.)
    with probed(monkeypatch, *with_submodules(prefilter_module), hanzi) as seen:
        prefilter("his name " * 5000 + "?", ["what " * 5000])
    assert seen, "no rule was probed"
    assert max(n for name, n in seen if name != "memory.language.prefilter.text._SPACES") <= MAX_CHARS, seen
    assert max(n for _, n in seen) <= 2 * MAX_CHARS


# ------------------------------------------------------- benchmark + loader


def _write(path: Path, data: object) -> Path:
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


def test_gate_metrics_on_tiny_file(tmp_path: Path) -> None:
    # 3 durable, 4 not durable; prefilter's decision on each is unambiguous.
    items = [
        ("a", "My sister's name is Anna", True),  # pass -> TP
        ("b", "我妹妹叫小雪", True),  # pass -> TP
        ("c", "What's my sister's name?", True),  # skip -> FN (a label the rule misses)
        ("d", "ok thanks", False),  # skip -> TN
        ("e", "你好", False),  # skip -> TN
        ("f", "What's the weather like?", False),  # skip -> TN
        ("g", "remember that I hate olives", False),  # pass (FORCE) -> FP
    ]
    path = _write(
        tmp_path / "tiny.json",
        {
            "name": "tiny",
            "language": "mixed",
            "items": [{"id": i, "text": t, "durable": d, "fact": None, "context": []} for i, t, d in items],
        },
    )
    gate = load_gate(path)
    m = evaluate(gate)["prefilter"].metrics
    assert (m.tp, m.fp, m.fn, m.tn, m.forced) == (2, 1, 1, 3, 1)
    assert m.precision == pytest.approx(2 / 3)
    assert m.recall == pytest.approx(2 / 3)
    assert m.f1 == pytest.approx(2 / 3)
    assert m.skip_rate == pytest.approx(3 / 4)
    low, high = m.skip_rate_ci95  # 4 non-durable items: a wide interval around 3/4
    assert low < 3 / 4 < high and high - low > 0.4
    # the baseline runs on the same file: keywords "my", 我的... and "remember"
    b = evaluate(gate)["baseline"].metrics
    assert (b.tp, b.fp, b.fn, b.tn) == (2, 1, 1, 3)


def test_gate_metrics_edge_cases() -> None:
    m = gate_metrics([True, False], [False, False])
    assert m.precision is None and m.recall == 0.0 and m.f1 is None and m.skip_rate == 1.0
    assert m.recall_ci95 == (0.0, 0.0) and m.skip_rate_ci95 == (1.0, 1.0)
    m = gate_metrics([False, False], [True, False])
    assert m.recall is None and m.precision == 0.0 and m.skip_rate == 0.5
    assert m.recall_ci95 is None and m.skip_rate_ci95 is not None
    with pytest.raises(ValueError):
        gate_metrics([True], [])


def test_gate_cli_prints_json_last(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(
        tmp_path / "cli.json",
        {
            "name": "cli",
            "language": "en",
            "items": [
                {"id": "1", "text": "I live in Paris", "durable": True},
                {"id": "2", "text": "ok thanks", "durable": False},
            ],
        },
    )
    assert gate_main(["--data", str(path), "--by-reason"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    figures = json.loads(last)["files"]["cli"]
    assert figures["prefilter"]["recall"] == 1.0 and figures["prefilter"]["skip_rate"] == 1.0
    assert figures["prefilter"]["by_reason"]["ack"]["not_durable"] == 1
    assert figures["prefilter"]["recall_ci95"] == [1.0, 1.0]  # one durable item, passed
    assert "p95_us" in figures["baseline"]


@pytest.mark.parametrize(
    ("item", "missing"),
    [
        ({"id": "x", "text": "hi"}, "durable"),
        ({"id": "x", "durable": False}, "text"),
        ({"text": "hi", "durable": False}, "id"),
    ],
)
def test_malformed_gate_file_names_file_and_key(tmp_path: Path, item: dict, missing: str) -> None:
    path = _write(tmp_path / "bad.json", {"name": "bad", "language": "en", "items": [item]})
    with pytest.raises(EvalDataError) as err:
        load_gate(path)
    message = str(err.value)
    assert str(path) in message and f"missing required key '{missing}'" in message and "items[0]" in message


def test_malformed_gate_file_type_and_json_errors(tmp_path: Path) -> None:
    path = _write(tmp_path / "t.json", {"items": [{"id": "x", "text": "hi", "durable": "yes"}]})
    with pytest.raises(EvalDataError, match=r"key 'durable' must be bool, got str"):
        load_gate(path)
    with pytest.raises(EvalDataError, match=r"missing required key 'items'"):
        load_gate(_write(tmp_path / "n.json", {"name": "n"}))
    (tmp_path / "broken.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(EvalDataError, match=r"broken\.json: not valid JSON"):
        load_gate(tmp_path / "broken.json")
    with pytest.raises(EvalDataError, match="file not found"):
        load_gate(tmp_path / "absent.json")
    assert gate_main(["--data", str(path)]) == 2


def test_retrieval_loader_checks_relevant_ids(tmp_path: Path) -> None:
    good = {
        "name": "r",
        "language": "en",
        "stores": [{"store_id": "u1", "memories": [{"id": "m1", "text": "I like tea", "timestamp": None}]}],
        "queries": [
            {"id": "q1", "store_id": "u1", "query": "What do I drink?", "relevant": ["m1"], "category": "pref"}
        ],
    }
    rf = load_retrieval(_write(tmp_path / "r.json", good))
    assert rf.store("u1").memories[0].text == "I like tea" and rf.queries[0].relevant == ("m1",)
    bad = json.loads(json.dumps(good))
    bad["queries"][0]["relevant"] = ["m9"]
    with pytest.raises(EvalDataError, match=r"queries\[0\] \(id 'q1'\): relevant ids not in store 'u1'"):
        load_retrieval(_write(tmp_path / "bad_r.json", bad))


def test_baseline_reproduces_readme_rule() -> None:
    assert baseline("I’m a nurse").action is EXTRACT  # curly apostrophe counts
    assert baseline("Remembering is hard").action is SKIP  # whole words only
    assert baseline("我的猫").action is EXTRACT and baseline("你好").action is SKIP


# ---------------------------------------------------------- quality gate

_EVAL = default_eval_dir()


@pytest.mark.skipif(not (_EVAL / "msc_gate.realistic.dev.json").exists(), reason="shared eval data not present")
def test_quality_gate_on_realistic_dev() -> None:
    """The product's quality gate: keep >= 95% of durable turns, skip >= half of the rest."""
    m = evaluate(load_gate(_EVAL / "msc_gate.realistic.dev.json"), {"prefilter": prefilter})["prefilter"].metrics
    assert m.recall is not None and m.recall >= 0.95, m
    assert m.skip_rate is not None and m.skip_rate >= 0.50, m


@pytest.mark.parametrize(
    ("text", "says_nothing"),
    [
        ("好的好的", True),
        ("对对对", True),
        ("嗯嗯好", True),
        ("谢谢啦", True),
        ("謝謝", True),
        ("ok, thanks!", True),
        ("好看", False),
        ("对面", False),
        ("好的朋友", False),
        ("对不起", False),
        ("好的，我女儿叫小美", False),
        ("谢谢你记得我对花生过敏", False),
        ("Buddy.", False),
        ("Nice.", False),
        ("Ty's birthday is June 3.", False),
    ],
)
def test_what_says_nothing_on_its_own(text: str, says_nothing: bool) -> None:
    # Chinese acknowledgements run together (好的好的, 对对对) came back as memories.
    from memory.language.prefilter import is_acknowledgement

    assert is_acknowledgement(text) is says_nothing


@pytest.mark.parametrize(
    "text",
    [
        "Can you remember I'm allergic to peanuts?",
        "Could you remember my sister's name is Anna?",
        "Would you keep in mind I'm vegetarian?",
        "Can you note down that my birthday is May 3rd?",
        "你能记住我对花生过敏吗",
        "你可以记一下我的生日是五月三号吗？",
        "你会记住我喜欢蓝色吗",
        "記得我對花生過敏好嗎",
    ],
)
def test_a_request_to_remember_asked_as_a_question_reaches_extraction(text: str) -> None:
    # These were skipped as pure questions: the fact in them never reached the model.
    # Not FORCE: the same words also ask for a recall, and FORCE would store the question.
    assert prefilter(text) == GateDecision(EXTRACT, "remember_request")


@pytest.mark.parametrize(
    "text", ["Can you remember what my name is?", "你能记住我叫什么吗", "你还记得我妹妹叫什么吗？"]
)
def test_a_recall_asked_like_a_request_to_remember_is_still_skipped(text: str) -> None:
    assert prefilter(text).action is SKIP
