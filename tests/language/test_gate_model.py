"""The pre-filter's learned stage: shipped with the code, bounded in what it may decide."""

from __future__ import annotations

import json
import math

import pytest

from memory.language import gate_model
from memory.language.gate_model import GateModel, features, gate, shipped
from memory.language.prefilter import GateAction, prefilter


def test_the_model_ships_with_the_code_and_is_small() -> None:
    model = shipped()
    assert model is not None, f"{gate_model.MODEL_PATH} is missing: python -m bench.gate.gate_model --write"
    assert 0.0 < model.threshold < 1.0
    assert 10 <= len(model.weights) <= 500  # cues of the language, not a vocabulary
    assert not any(name.startswith(("w:", "b:")) for name in model.weights)


def test_the_shipped_model_tells_a_disclosure_from_chit_chat() -> None:
    model = shipped()
    assert model is not None
    fact = model.score(
        "I work as a nurse at the city hospital.", ["assistant: What do you do?"], "first_person_statement"
    )
    chat = model.score("Haha that's so funny!", ["assistant: I told a joke."], "reaction")
    assert fact > model.threshold > chat
    assert gate("I work as a nurse at the city hospital.").action is GateAction.EXTRACT
    assert gate("Haha that's so funny!").action is GateAction.SKIP


@pytest.mark.parametrize(
    ("text", "context"),
    [
        ("Remember that my locker code is 4411.", []),  # an explicit request: forced
        ("Correction: the meeting moved to 3pm.", ["user: My meeting is at 2pm."]),  # a correction
        ("actually, it's 3pm", ["user: My dentist appointment is at 2pm tomorrow."]),
        ("我昨天去了医院", []),  # Chinese: the rules alone
        ("比赛改到下个月了", ["user: 我下周有一场篮球比赛。"]),
    ],
)
def test_what_the_rules_decide_for_good_the_model_never_overrides(text: str, context: list[str]) -> None:
    rules = prefilter(text, context)
    veto_all = GateModel({}, bias=-30.0, threshold=0.99)  # would skip everything it may judge
    pass_all = GateModel({}, bias=30.0, threshold=0.01)
    assert veto_all.decide(text, context) == rules
    assert pass_all.decide(text, context) == rules


def test_the_model_decides_the_english_turns_the_rules_only_guess_at() -> None:
    text, context = "I have two dogs and a cat.", ["assistant: Any pets?"]
    assert prefilter(text, context).action is GateAction.EXTRACT
    assert GateModel({}, bias=-30.0, threshold=0.5).decide(text, context).action is GateAction.SKIP
    skipped = "What time is it?"
    assert prefilter(skipped).action is GateAction.SKIP
    rescued = GateModel({}, bias=30.0, threshold=0.5).decide(skipped)
    assert (rescued.action, rescued.reason) == (GateAction.EXTRACT, "model")


def test_the_model_passes_a_turn_only_when_its_probability_reaches_the_threshold() -> None:
    # A model that gives every turn it may judge the probability 0.6: its threshold decides.
    text, context = "I have two dogs and a cat.", ["assistant: Any pets?"]
    bias = math.log(0.6 / 0.4)
    assert GateModel({}, bias=bias, threshold=0.61).decide(text, context).action is GateAction.SKIP
    assert GateModel({}, bias=bias, threshold=0.59).decide(text, context).action is GateAction.EXTRACT
    asked = "What time is it?"  # the rules skip it; the model may pass it, by its threshold alone
    assert GateModel({}, bias=bias, threshold=0.61).decide(asked).action is GateAction.SKIP
    assert GateModel({}, bias=bias, threshold=0.59).decide(asked).action is GateAction.EXTRACT


def test_features_are_the_rules_cues_and_a_model_round_trips_through_its_file() -> None:
    names = features("I love hiking, do you?", ["assistant: What do you do on weekends?"], "first_person_statement")
    assert "r:first_person_statement" in names and "d:first_person_statement" in names
    assert "statement:first_person" in names and "question:you" in names and "asks" in names
    model = GateModel({"asks": -0.5, "r:first_person_statement": 1.25}, bias=-1.0, threshold=0.3)
    again = GateModel.from_json(model.to_json(trained_on="test"))
    assert again == model
    assert json.loads(model.to_json(trained_on="test"))["trained_on"] == "test"


def test_without_its_file_the_pre_filter_is_the_rules(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    monkeypatch.setattr(gate_model, "MODEL_PATH", tmp_path / "absent.json")
    gate_model.shipped.cache_clear()
    try:
        assert shipped() is None
        assert gate("What time is it?") == prefilter("What time is it?")
    finally:
        monkeypatch.undo()
        gate_model.shipped.cache_clear()
