"""k-fold cross-validation of the pre-filter's rule set (``python -m bench.gate.run --cv K``).

Why rule *selection* is what gets tuned
--------------------------------------
The pre-filter has no numeric threshold: it is a set of rules, each an EXTRACT cue
named by its reason tag (``first_person_statement``, ``answer_to_question``, ...).
What can be fitted to a development file is which rules are in the set (and, when
they were written, their word classes). So the cross-validation tunes exactly that:

* Items are split into K folds **by conversation or user** (never by turn: turns of
  one dialogue share a speaker and a topic), with a fixed seed.
* For each fold, on the other K-1 folds, backward elimination over the *tunable*
  rules: start from all of them, and drop, one at a time, the rule whose removal
  raises the skip rate most while the recall of durable turns stays at or above
  ``target`` (.96: the product's .95 floor plus a point of margin, chosen before
  looking at any fold); stop when no removal keeps the recall there.
* The rule set chosen on the K-1 folds is measured on the held-out fold; so is the
  product's full rule set, side by side. Held-out predictions of all folds are
  pooled for the 95% interval (a cluster bootstrap over conversations).

Rules that are product behaviour with tests of their own are never dropped (forced
writes, questions asking to be remembered, corrections and changes: the dev files
hold almost no corrections, so they cannot say whether those help); their held-out
cost is reported instead (``ablation``: what each rule adds in recall and costs in
skip rate, per held-out fold). A rule earns its place when it adds recall on the
held-out folds; one that CV drops in most folds is a candidate for removal.

An item's decision under any rule subset is computed once: ``prefilter`` is asked
again with each rule it fired switched off (``off=``) until it skips, which gives the
set of rules that fire for it; a subset passes the item when any of them is in it.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from bench.common import stats
from bench.common.evaldata import GateFile, GateItem
from memory.language.prefilter import REASONS, GateAction, fired_rules

#: Product behaviour with tests of its own: never dropped by the selection.
FIXED_RULES: tuple[str, ...] = ("explicit_remember", "remember_request", "correction", "change", "change_of_known_fact")
#: EXTRACT rules the selection may drop.
TUNABLE_RULES: tuple[str, ...] = tuple(r for r in REASONS[GateAction.EXTRACT] if r not in FIXED_RULES)
DEFAULT_TARGET = 0.96
SEED = 20261126

_GROUP_PATTERNS = (
    re.compile(r"^(msc-\w+)-s\d+-(d\d+)-t\d+$"),  # one MSC dialogue over its sessions
    re.compile(r"^(memdaily)-(u\d+)_"),  # one MemDaily user
    re.compile(r"^(mb)-([^-]+)-"),  # one MemoryBank user
)


def group_of(item: GateItem) -> str:
    """The conversation or user an item belongs to (an explicit ``group`` key wins)."""
    if isinstance(item.extra.get("group"), str):
        return item.extra["group"]
    for rx in _GROUP_PATTERNS:
        m = rx.match(item.id)
        if m:
            return "-".join(m.groups())
    return item.id


@dataclass(frozen=True)
class Fired:
    """Per item: durable label, the rules that fire (bitmask over `rules`), its group."""

    rules: tuple[str, ...]
    masks: np.ndarray
    durable: np.ndarray
    groups: tuple[str, ...]

    def passed(self, enabled: Sequence[str]) -> np.ndarray:
        bits = 0
        for r in enabled:
            bits |= 1 << self.rules.index(r)
        return (self.masks & bits) != 0


def fire_all(gate: GateFile) -> Fired:
    rules = tuple(REASONS[GateAction.FORCE]) + tuple(REASONS[GateAction.EXTRACT])
    masks = []
    for item in gate.items:
        m = 0
        for r in fired_rules(item.text, item.context):
            m |= 1 << rules.index(r)
        masks.append(m)
    return Fired(
        rules,
        np.array(masks, dtype=np.int64),
        np.array([it.durable for it in gate.items], dtype=bool),
        tuple(group_of(it) for it in gate.items),
    )


def _rates(passed: np.ndarray, durable: np.ndarray) -> tuple[float, float]:
    pos, neg = durable.sum(), (~durable).sum()
    recall = float((passed & durable).sum() / pos) if pos else float("nan")
    skip = float((~passed & ~durable).sum() / neg) if neg else float("nan")
    return recall, skip


def select_rules(f: Fired, idx: np.ndarray, target: float) -> list[str]:
    """Backward elimination on the items `idx`: drop tunable rules while recall >= target."""
    enabled = [r for r in f.rules]
    durable = f.durable[idx]
    while True:
        best: tuple[float, str] | None = None
        for r in enabled:
            if r not in TUNABLE_RULES:
                continue
            trial = [x for x in enabled if x != r]
            recall, skip = _rates(f.passed(trial)[idx], durable)
            if recall >= target and (best is None or skip > best[0]):
                best = (skip, r)
        if best is None:
            return enabled
        enabled.remove(best[1])


def folds_by_group(groups: Sequence[str], k: int, seed: int = SEED) -> list[np.ndarray]:
    """K folds of item indices, whole groups to a fold, groups shuffled with `seed`."""
    names = sorted(set(groups))
    random.Random(seed).shuffle(names)
    fold_of = {g: i % k for i, g in enumerate(names)}
    return [np.array([i for i, g in enumerate(groups) if fold_of[g] == j]) for j in range(k)]


@dataclass
class FoldResult:
    fold: int
    items: int
    durable: int
    dropped: list[str]
    train_recall: float
    train_skip: float
    tuned_recall: float
    tuned_skip: float
    full_recall: float
    full_skip: float


@dataclass
class CVReport:
    k: int
    target: float
    folds: list[FoldResult]
    tuned: dict[str, object]  # pooled held-out recall/skip and their intervals
    full: dict[str, object]
    dropped_in: dict[str, int]  # rule -> number of folds whose selection dropped it
    ablation: dict[str, dict[str, object]] = field(default_factory=dict)  # rule -> held-out effect


def _pooled(passed: np.ndarray, f: Fired) -> dict[str, object]:
    d = f.durable
    groups = list(f.groups)
    pos = [i for i in range(len(d)) if d[i]]
    neg = [i for i in range(len(d)) if not d[i]]
    recall, skip = _rates(passed, d)

    def ci(ix: list[int], values: np.ndarray) -> list[float] | None:
        if not ix:
            return None
        gs = [groups[i] for i in ix]
        vals = [float(values[i]) for i in ix]
        lo, hi = stats.mean_interval(vals, groups=gs) if len(set(gs)) > 1 else stats.mean_interval(vals)
        return [round(lo, 4), round(hi, 4)]

    return {
        "recall": round(recall, 4),
        "skip_rate": round(skip, 4),
        "recall_ci95": ci(pos, passed),
        "skip_rate_ci95": ci(neg, ~passed),
    }


def cross_validate(gate: GateFile, k: int = 5, target: float = DEFAULT_TARGET, seed: int = SEED) -> CVReport:
    f = fire_all(gate)
    folds = folds_by_group(f.groups, k, seed)
    everything = list(f.rules)
    full_pass = f.passed(everything)
    tuned_pass = np.zeros(len(f.durable), dtype=bool)
    results: list[FoldResult] = []
    dropped_in = {r: 0 for r in TUNABLE_RULES}
    for j, test in enumerate(folds):
        train = np.concatenate([folds[i] for i in range(k) if i != j])
        enabled = select_rules(f, train, target)
        for r in set(everything) - set(enabled):
            dropped_in[r] += 1
        tr, ts = _rates(f.passed(enabled)[train], f.durable[train])
        held = f.passed(enabled)[test]
        tuned_pass[test] = held
        hr, hs = _rates(held, f.durable[test])
        fr, fs = _rates(full_pass[test], f.durable[test])
        results.append(
            FoldResult(
                j + 1,
                len(test),
                int(f.durable[test].sum()),
                sorted(set(everything) - set(enabled)),
                tr,
                ts,
                hr,
                hs,
                fr,
                fs,
            )
        )
    ablation: dict[str, dict[str, object]] = {}
    for r in REASONS[GateAction.EXTRACT]:
        without = f.passed([x for x in everything if x != r])
        per_fold = [(_rates(full_pass[t], f.durable[t]), _rates(without[t], f.durable[t])) for t in folds]
        gains = [a[0] - b[0] for a, b in per_fold]
        costs = [b[1] - a[1] for a, b in per_fold]
        ablation[r] = {
            "fires": int(((f.masks >> f.rules.index(r)) & 1).sum()),
            "recall_gain_per_fold": [round(x, 4) for x in gains],
            "skip_cost_per_fold": [round(x, 4) for x in costs],
            "helps_in_folds": sum(g > 0 for g in gains),
        }
    return CVReport(k, target, results, _pooled(tuned_pass, f), _pooled(full_pass, f), dropped_in, ablation)


def _span(ci: object) -> str:
    return f"[{ci[0]:.3f}-{ci[1]:.3f}]" if isinstance(ci, list) else "[-]"


def format_cv(gate: GateFile, rep: CVReport) -> str:
    lines = [
        f"{gate.name}: {rep.k}-fold CV by conversation/user; tuned = rule set chosen on the other folds "
        f"(backward elimination, train recall >= {rep.target:.2f}); full = the product's rule set",
        f"  {'fold':>4} {'items':>5} {'dur':>4} {'train rec':>9} {'train skip':>10} {'tuned rec':>9} "
        f"{'tuned skip':>10} {'full rec':>8} {'full skip':>9}  dropped by tuning",
    ]
    for r in rep.folds:
        lines.append(
            f"  {r.fold:>4} {r.items:>5} {r.durable:>4} {r.train_recall:>9.3f} {r.train_skip:>10.3f} "
            f"{r.tuned_recall:>9.3f} {r.tuned_skip:>10.3f} {r.full_recall:>8.3f} {r.full_skip:>9.3f}  "
            f"{', '.join(r.dropped) or '-'}"
        )
    for name, p in (("tuned", rep.tuned), ("full", rep.full)):
        lines.append(
            f"  held-out, pooled ({name}): recall {p['recall']:.3f} {_span(p['recall_ci95'])}  "
            f"skip {p['skip_rate']:.3f} {_span(p['skip_rate_ci95'])}"
        )
    lines.append(f"  {'rule':<24} {'fires':>5} {'helps in folds':>14}  recall gain / skip cost per held-out fold")
    for rule, a in rep.ablation.items():
        gains = " ".join(f"{x:+.3f}" for x in a["recall_gain_per_fold"])
        costs = " ".join(f"{x:+.3f}" for x in a["skip_cost_per_fold"])
        lines.append(f"  {rule:<24} {a['fires']:>5} {a['helps_in_folds']:>9}/{rep.k}     {gains}  /  {costs}")
    return "\n".join(lines)
