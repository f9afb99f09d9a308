"""A small learned stage beside the pre-filter's rules: is this English turn durable?

The rules (`memory/language/prefilter/`) were written by people reading the development file, and
they fit it: cross-validated recall .970 there, .930 on the file's unseen half. A
model fitted to the same data and cross-validated by conversation says honestly how
well it does on conversations it has not seen, and it weighs all the cues of a turn
together instead of firing on the first one. So an English turn that the rules pass
to extraction, or skip as having no durable content, is scored by a logistic
regression over:

- what the rules saw: their decision's reason tag, and their reading of each clause
  (`prefilter.cues`: each statement's cue, not only the first one that decided, a
  statement in the first person, a question about the listener, a stance or opinion
  frame, an acknowledgement, what the turn before asked);
- the turn's length, whether it asks something, whether the turn before spoke of "you".

No words: a model over the words of the development file learns its topics (cross-
validated it did no better; docs/gatekeeper.md). Its weights are learned; its inputs are
the grammar the rules are written in.

It passes the turn when the probability reaches the threshold chosen on the training
conversations alone: the lowest whose skip rate keeps a margin above the product's floor
(.50, at the lower end of its 95% interval over conversations), so that as few facts as
that allows are lost on conversations it was not chosen on (bench/gate/gate_model.py).
Weights and threshold live in ``gate_model.json`` beside this module, written by
``python -m bench.gate.gate_model --write`` from the development conversations only
(bench/data/holdout.json keeps a third apart). Nothing is downloaded; scoring is a
few dictionary look-ups (microseconds).

What the model never overrides: explicit requests to remember (FORCE), corrections and
changes of something said before (their behaviour has tests of its own, and the data
holds almost none), and Chinese turns (the model knows English only; the rules keep
recall 1.0 on the Chinese set).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from memory.language.prefilter import GateAction, GateDecision, cues, prefilter

MODEL_PATH = Path(__file__).with_name("gate_model.json")
#: Rule decisions the model never overrides (product behaviour with its own tests).
KEPT_REASONS = frozenset(
    {"explicit_remember", "remember_request", "correction", "change", "change_of_known_fact", "unanchored_change",
     "empty"}
)  # fmt: skip
_CJK = re.compile(r"[\u3400-\u9fff]")
_YOU = re.compile(r"\b(?:you|your|yours|you're|you've|u)\b")


def features(text: str, context: Sequence[str], reason: str) -> list[str]:
    """The names of the features a turn has (each counts once): linguistic cues, no words.

    Word features were tried (the words and word pairs of the turn): cross-validated they
    did no better, and a model that knows which words MSC's durable turns use learns the
    file's topics, not the language (docs/gatekeeper.md)."""
    out = {f"r:{reason}", *cues(text, context)}
    n = len(text.split())
    out.add("len:" + ("1-3" if n <= 3 else "4-7" if n <= 7 else "8-15" if n <= 15 else "16+"))
    if "?" in text:
        out.add("asks")
    prev = context[-1].lower() if context else ""
    if not prev:
        out.add("prev:none")
    elif _YOU.search(prev):
        out.add("prev:you")
    return sorted(out)


@dataclass(frozen=True)
class GateModel:
    """Logistic-regression weights by feature name, and the pass threshold."""

    weights: Mapping[str, float]
    bias: float
    threshold: float

    def probability(self, names: Iterable[str]) -> float:
        z = self.bias + sum(self.weights.get(n, 0.0) for n in names)
        return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))

    def score(self, text: str, context: Sequence[str], reason: str) -> float:
        return self.probability(features(text, context, reason))

    def decide(self, text: str, context: Sequence[str] = (), *, rules: GateDecision | None = None) -> GateDecision:
        """The rules' decision, with the model's say on English turns it may judge."""
        rules = rules or prefilter(text, context)
        if rules.action is GateAction.FORCE or rules.reason in KEPT_REASONS or _CJK.search(text):
            return rules
        p = self.score(text, context, rules.reason)
        if p >= self.threshold:
            return rules if rules.action is GateAction.EXTRACT else GateDecision(GateAction.EXTRACT, "model")
        return rules if rules.action is GateAction.SKIP else GateDecision(GateAction.SKIP, "model")

    def to_json(self, **meta: object) -> str:
        body = {"threshold": round(self.threshold, 6), "bias": round(self.bias, 6), **meta,
                "weights": {k: round(v, 5) for k, v in sorted(self.weights.items()) if abs(v) >= 1e-5}}  # fmt: skip
        return json.dumps(body, ensure_ascii=False, indent=0) + "\n"

    @classmethod
    def from_json(cls, text: str) -> GateModel:
        data = json.loads(text)
        return cls(
            {str(k): float(v) for k, v in data["weights"].items()}, float(data["bias"]), float(data["threshold"])
        )


@lru_cache(maxsize=1)
def shipped() -> GateModel | None:
    """The model that ships with the code, or None when its file is absent (rules alone)."""
    try:
        return GateModel.from_json(MODEL_PATH.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None


def gate(text: str, context: Sequence[str] = ()) -> GateDecision:
    """The product's pre-filter: the rules, then the shipped model where it may judge."""
    model = shipped()
    rules = prefilter(text, context)
    return rules if model is None else model.decide(text, context, rules=rules)


__all__ = ["GateModel", "KEPT_REASONS", "MODEL_PATH", "features", "gate", "shipped"]
