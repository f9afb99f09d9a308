"""Train and cross-validate the pre-filter's learned stage (memory/language/gate_model.py).

    uv run python -m bench.gate_model --cv 5            # cross-validated figures, nothing written
    uv run python -m bench.gate_model --write           # train on the development part, write the model

Data: the MSC gate files' development conversations (bench/data/holdout.json holds a
third of them apart, never used here; `--part holdout` on bench.gate measures them once).
Both files are pooled for training (the realistic mix and the balanced one share
conversations; an item in both counts once); figures are on the realistic file.

Everything that is chosen is chosen on training conversations only, nested inside the
cross-validation: the L2 strength (from three values, by the skip rate reached at the
recall target in an inner 4-fold split) and the threshold (the highest that keeps the
inner out-of-fold recall of the realistic file's items at `--target`, .965: the issue's
.96 plus half a point). Folds are by conversation (bench/gate_cv.py), so turns of one
dialogue never sit on both sides.

Logistic regression by full-batch gradient descent (Adam) in numpy: about forty lines
for a convex problem of a few thousand features, rather than scikit-learn and SciPy
as dependencies of the project for training alone.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.evaldata import GateItem, default_eval_dir, load_gate
from bench.gate_cv import folds_by_group, group_of
from bench.holdout import select_gate
from memory.language.gate_model import KEPT_REASONS, MODEL_PATH, GateModel, features
from memory.language.prefilter import GateAction, prefilter

TRAIN_FILES = ("msc_gate.realistic.dev.json", "msc_gate.balanced.dev.json")
REPORT_FILE = "msc_gate.realistic.dev.json"
TARGET = 0.965
L2_GRID = (1e-3, 3e-3, 1e-2)
MIN_COUNT = 2
SEED = 20261127


@dataclass(frozen=True)
class Example:
    id: str
    group: str
    names: tuple[str, ...]
    durable: bool
    fixed: bool | None = None  # the rules' decision where the model has no say (KEPT_REASONS, FORCE)
    realistic: bool = False  # in the realistic mix (thresholds are set on its items)


def examples(items: Sequence[GateItem], realistic: bool = False) -> list[Example]:
    out = []
    for it in items:
        rules = prefilter(it.text, it.context)
        fixed = None
        if rules.action is GateAction.FORCE or rules.reason in KEPT_REASONS:
            fixed = rules.action is not GateAction.SKIP
        names = tuple(features(it.text, it.context, rules.reason))
        out.append(Example(it.id, group_of(it), names, it.durable, fixed, realistic))
    return out


def decided(model: GateModel, ex: Example) -> bool:
    """Does the product pass this item (`GateModel.decide`)?"""
    return ex.fixed if ex.fixed is not None else model.probability(ex.names) >= model.threshold


def fit(train: Sequence[Example], l2: float, iterations: int = 300) -> GateModel:
    """L2-regularised logistic regression on the features seen `MIN_COUNT` times."""
    counts = Counter(n for ex in train for n in ex.names)
    vocab = sorted(n for n, c in counts.items() if c >= MIN_COUNT)
    index = {n: i for i, n in enumerate(vocab)}
    # Binary features, sparse: the (row, column) of each feature present.
    pairs = [(row, index[n]) for row, ex in enumerate(train) for n in ex.names if n in index]
    rows = np.array([r for r, _ in pairs], dtype=np.int64)
    cols = np.array([c for _, c in pairs], dtype=np.int64)
    d, n = len(vocab), len(train)
    y = np.array([ex.durable for ex in train], dtype=np.float64)
    w = np.zeros(d)
    b = float(np.log((y.mean() + 1e-6) / (1 - y.mean() + 1e-6)))
    m_w, v_w, m_b, v_b = np.zeros(d), np.zeros(d), 0.0, 0.0
    lr, beta1, beta2, eps = 0.05, 0.9, 0.999, 1e-8
    for t in range(1, iterations + 1):
        z = np.bincount(rows, weights=w[cols], minlength=n) + b
        g = 1.0 / (1.0 + np.exp(-z)) - y
        grad_w = np.bincount(cols, weights=g[rows], minlength=d) / n + l2 * w
        grad_b = float(g.mean())
        m_w = beta1 * m_w + (1 - beta1) * grad_w
        v_w = beta2 * v_w + (1 - beta2) * grad_w * grad_w
        m_b = beta1 * m_b + (1 - beta1) * grad_b
        v_b = beta2 * v_b + (1 - beta2) * grad_b * grad_b
        w -= lr * (m_w / (1 - beta1**t)) / (np.sqrt(v_w / (1 - beta2**t)) + eps)
        b -= lr * (m_b / (1 - beta1**t)) / (np.sqrt(v_b / (1 - beta2**t)) + eps)
    return GateModel({name: float(w[i]) for name, i in index.items()}, float(b), 0.5)


def threshold_for(scores: np.ndarray, durable: np.ndarray, target: float) -> float:
    """The highest threshold at which the share of durable items scoring at or above it is >= target."""
    pos = np.sort(scores[durable])
    if not len(pos):
        return 0.5
    k = int(np.floor((1 - target) * len(pos)))  # this many durable items may fall below
    return float(pos[k]) if k < len(pos) else float(pos[-1])


def skip_at(scores: np.ndarray, durable: np.ndarray, t: float) -> float:
    neg = scores[~durable]
    return float((neg < t).mean()) if len(neg) else float("nan")


def out_of_fold(train: Sequence[Example], l2: float, k: int = 4) -> np.ndarray:
    groups = [ex.group for ex in train]
    scores = np.zeros(len(train))
    for fold in folds_by_group(groups, k, SEED + 1):
        held = set(fold.tolist())
        model = fit([ex for i, ex in enumerate(train) if i not in held], l2)
        for i in fold:
            ex = train[i]
            scores[i] = model.probability(ex.names) if ex.fixed is None else (np.inf if ex.fixed else -np.inf)
    return scores


def train_model(train: Sequence[Example], target: float = TARGET) -> tuple[GateModel, dict[str, float]]:
    """Choose L2 and the threshold on inner folds of `train`, then fit on all of it."""
    # Set on the realistic mix's items (the traffic the product sees); trained on both files.
    mix = np.array([ex.realistic for ex in train]) if any(ex.realistic for ex in train) else np.ones(len(train), bool)
    durable = np.array([ex.durable for ex in train])[mix]
    best: tuple[float, float, float] | None = None  # (inner skip, l2, threshold)
    for l2 in L2_GRID:
        scores = out_of_fold(train, l2)[mix]
        t = threshold_for(scores, durable, target)
        skip = skip_at(scores, durable, t)
        if best is None or skip > best[0]:
            best = (skip, l2, t)
    assert best is not None
    skip, l2, t = best
    model = fit(train, l2)
    return GateModel(model.weights, model.bias, t), {"l2": l2, "inner_skip": round(skip, 4), "threshold": t}


def dev_items(eval_dir: Path, part: str = "dev") -> tuple[list[Example], list[Example]]:
    """(training pool from both files, the realistic file's items), of one part (`dev`:
    the model is trained there; `all` only once the held-out part has been opened)."""
    pool: dict[str, Example] = {}
    report: list[Example] = []
    for name in TRAIN_FILES:
        gate = select_gate(load_gate(eval_dir / name), part)
        exs = examples(gate.items, realistic=name == REPORT_FILE)
        for ex in exs:
            pool.setdefault(ex.id, ex)
        if name == REPORT_FILE:
            report = exs
    return list(pool.values()), report


def cross_validate(pool: Sequence[Example], report: Sequence[Example], k: int, target: float) -> dict:
    """Per fold of the report file's conversations: train on the pool's other
    conversations, decide the fold's items; pooled held-out recall/skip with intervals."""
    from bench import stats

    folds = folds_by_group([ex.group for ex in report], k)
    passed = np.zeros(len(report), dtype=bool)
    rows = []
    for j, fold in enumerate(folds):
        test_groups = {report[i].group for i in fold}
        train = [ex for ex in pool if ex.group not in test_groups]
        model, chosen = train_model(train, target)
        for i in fold:
            passed[i] = decided(model, report[i])
        d = np.array([report[i].durable for i in fold])
        p = passed[fold]
        recall, skip = round(float(p[d].mean()), 4), round(float((~p[~d]).mean()), 4)
        rows.append({"fold": j + 1, "items": len(fold), "durable": int(d.sum()), "recall": recall, "skip": skip,
                     **chosen})  # fmt: skip
        print(f"  fold {j + 1}: recall {rows[-1]['recall']:.3f} skip {rows[-1]['skip']:.3f} {chosen}", file=sys.stderr)
    durable = np.array([ex.durable for ex in report])
    groups = [ex.group for ex in report]
    pos = [i for i in range(len(report)) if durable[i]]
    neg = [i for i in range(len(report)) if not durable[i]]
    r_ci = stats.mean_interval([float(passed[i]) for i in pos], groups=[groups[i] for i in pos])
    s_ci = stats.mean_interval([float(not passed[i]) for i in neg], groups=[groups[i] for i in neg])
    return {
        "k": k,
        "target": target,
        "folds": rows,
        "recall": round(float(passed[durable].mean()), 4),
        "skip_rate": round(float((~passed[~durable]).mean()), 4),
        "recall_ci95": [round(x, 4) for x in r_ci],
        "skip_rate_ci95": [round(x, 4) for x in s_ci],
    }


def format_cv(name: str, cv: dict) -> str:
    lines = [
        f"{name}: the learned stage, {cv['k']}-fold CV by conversation (trained on the other folds of both MSC "
        f"files; L2 and threshold chosen inside them for recall {cv['target']})",
        f"  {'fold':>4} {'items':>5} {'dur':>4} {'recall':>7} {'skip':>6} {'l2':>7} {'threshold':>9}",
    ]
    for r in cv["folds"]:
        lines.append(f"  {r['fold']:>4} {r['items']:>5} {r['durable']:>4} {r['recall']:>7.3f} {r['skip']:>6.3f} "
                     f"{r['l2']:>7g} {r['threshold']:>9.4f}")  # fmt: skip
    lo, hi = cv["recall_ci95"]
    s_lo, s_hi = cv["skip_rate_ci95"]
    lines.append(f"  held-out, pooled (rules + model, as GATED runs): recall {cv['recall']:.3f} [{lo:.3f}-{hi:.3f}]  "
                 f"skip {cv['skip_rate']:.3f} [{s_lo:.3f}-{s_hi:.3f}]")  # fmt: skip
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.gate_model", description=__doc__.split("\n\n")[0])
    ap.add_argument("--cv", type=int, default=0, metavar="K", help="K-fold cross-validation by conversation")
    ap.add_argument("--write", action="store_true", help=f"train on the development part and write {MODEL_PATH.name}")
    ap.add_argument("--target", type=float, default=TARGET, help=f"recall the threshold keeps (default {TARGET})")
    args = ap.parse_args(argv)
    pool, report = dev_items(default_eval_dir())
    out: dict[str, object] = {"bench": "gate_model", "train_items": len(pool), "report_items": len(report)}
    if args.cv:
        cv = cross_validate(pool, report, args.cv, args.target)
        print(format_cv("msc_gate.realistic.dev (development part)", cv))
        out["cv"] = cv
    if args.write:
        model, chosen = train_model(pool, args.target)
        MODEL_PATH.write_text(
            model.to_json(
                trained_on="MSC gate files (msc_gate.realistic.dev, msc_gate.balanced.dev), development "
                "conversations of bench/data/holdout.json; python -m bench.gate_model --write",
                items=len(pool),
                l2=chosen["l2"],
                target_recall=args.target,
            ),
            encoding="utf-8",
        )
        print(f"wrote {MODEL_PATH} ({len(model.weights)} weights, threshold {model.threshold:.4f}, l2 {chosen['l2']})")
        out["written"] = chosen
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
