"""Training the pre-filter's learned stage: it learns, and its threshold keeps the recall asked."""

from __future__ import annotations

import numpy as np

from bench.common.evaldata import GateItem
from bench.gate.gate_model import (
    Example,
    cross_validate,
    examples,
    fit,
    threshold_at_skip,
    threshold_for,
    threshold_with_margin,
    train_model,
)

DURABLE = ["I work as a nurse.", "My sister lives in Oslo.", "I have two cats.", "We moved to Lyon last year.",
           "I'm allergic to peanuts.", "My favourite colour is green."]  # fmt: skip
TRANSIENT = ["Haha, nice!", "What do you think?", "Okay, thanks.", "That sounds fun.", "Really? Wow.",
             "How about you?"]  # fmt: skip


def items() -> list[GateItem]:
    out = []
    for d in range(12):  # twelve conversations, each with durable and transient turns
        for t, text in enumerate(DURABLE[d % 3 :: 3] + TRANSIENT[d % 3 :: 3]):
            durable = text in DURABLE
            out.append(GateItem(f"msc-valid-s1-d{d}-t{t}", text, durable, context=("assistant: Tell me more?",)))
    return out


def test_threshold_keeps_the_share_of_durable_items_asked() -> None:
    scores = np.array([0.9, 0.8, 0.7, 0.6, 0.1, 0.05])
    durable = np.array([True, True, True, True, False, False])
    assert threshold_for(scores, durable, 1.0) == 0.6
    assert threshold_for(scores, durable, 0.75) == 0.7


def test_the_threshold_at_a_skip_rate_is_the_lowest_that_skips_that_share() -> None:
    scores = np.array([0.9, 0.8, 0.1, 0.2, 0.3, 0.4])
    durable = np.array([True, True, False, False, False, False])
    assert threshold_at_skip(scores, durable, 0.5) == 0.3  # 0.1 and 0.2 fall below: half the transient turns
    assert threshold_at_skip(scores, durable, 0.75) == 0.4
    tied = np.array([0.9, 0.2, 0.2, 0.2, 0.5])
    assert threshold_at_skip(tied, np.array([True, False, False, False, False]), 0.5) == 0.5  # ties go together


def test_the_margin_moves_the_threshold_up_only_as_far_as_conversations_disagree() -> None:
    durable = np.array([False] * 10 + [True])
    alike = np.array([0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08, 0.09, 0.10, 0.9])
    scores = np.concatenate([alike] * 20)
    groups = [f"c{g}" for g in range(20) for _ in range(11)]
    same = np.concatenate([durable] * 20)
    # Every conversation skips the same share: no margin is needed.
    assert threshold_with_margin(scores, same, groups, floor=0.5) == 0.06
    # Eleven conversations of low-scoring chatter, nine of high: skip .55 at 0.2 in this
    # sample, but another sample of twenty conversations may well hold fewer low ones.
    low, high = [0.1] * 10 + [0.9], [0.2] * 10 + [0.9]
    scores2 = np.array(low * 11 + high * 9)
    groups2 = [f"c{g}" for g in range(20) for _ in range(11)]
    assert threshold_at_skip(scores2, same, 0.5) == 0.2
    assert threshold_with_margin(scores2, same, groups2, floor=0.5) > 0.2


def test_a_model_trained_on_the_cues_separates_disclosures_from_chit_chat() -> None:
    exs = examples(items())
    model = fit(exs, l2=1e-3)
    pos = [model.probability(e.names) for e in exs if e.durable]
    neg = [model.probability(e.names) for e in exs if not e.durable]
    assert min(pos) > max(neg)
    chosen, report = train_model(exs, point="recall965", target=1.0)
    assert all(chosen.probability(e.names) >= chosen.threshold for e in exs if e.durable)
    assert report["l2"] > 0


def test_cross_validation_trains_without_the_fold_it_scores() -> None:
    exs = examples(items())
    cv = cross_validate(exs, exs, k=3, target=1.0)
    assert cv["k"] == 3 and set(cv["points"]) == {"margin", "skip50", "recall965"}
    for point in cv["points"].values():
        assert len(point["folds"]) == 3
        assert sum(f["items"] for f in point["folds"]) == len(exs)
        assert point["recall_ci95"][0] <= point["recall"] <= point["recall_ci95"][1]
    assert isinstance(exs[0], Example) and exs[0].group == "msc-valid-d0"
