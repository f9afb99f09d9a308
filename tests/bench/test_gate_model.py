"""Training the pre-filter's learned stage: it learns, and its threshold keeps the recall asked."""

from __future__ import annotations

import numpy as np

from bench.evaldata import GateItem
from bench.gate_model import Example, cross_validate, examples, fit, threshold_for, train_model

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


def test_a_model_trained_on_the_cues_separates_disclosures_from_chit_chat() -> None:
    exs = examples(items())
    model = fit(exs, l2=1e-3)
    pos = [model.probability(e.names) for e in exs if e.durable]
    neg = [model.probability(e.names) for e in exs if not e.durable]
    assert min(pos) > max(neg)
    chosen, report = train_model(exs, target=1.0)
    assert all(chosen.probability(e.names) >= chosen.threshold for e in exs if e.durable)
    assert report["l2"] > 0


def test_cross_validation_trains_without_the_fold_it_scores() -> None:
    exs = examples(items())
    cv = cross_validate(exs, exs, k=3, target=1.0)
    assert cv["k"] == 3 and len(cv["folds"]) == 3
    assert sum(f["items"] for f in cv["folds"]) == len(exs)
    assert cv["recall_ci95"][0] <= cv["recall"] <= cv["recall_ci95"][1]
    assert isinstance(exs[0], Example) and exs[0].group == "msc-valid-d0"
