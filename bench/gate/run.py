"""Benchmark the gatekeeper pre-filter on gatekeeper-format eval files.

    uv run python -m bench.gate.run [--data FILE ...] [--by-reason] [--cv K [--cv-target R]]

Runs ``memory.language.prefilter.prefilter`` over every item (text + context) and, in the
same run, the first-person keyword baseline of the eval files' README, and
reports for both: precision, recall and F1 of "passes" (action != SKIP) against
``durable``, skip rate (share of non-durable turns skipped), counts, FORCE count and
p50/p95 time per call in microseconds, with 95% bootstrap intervals of recall and skip
rate over the items (bench/common/stats.py). ``--by-reason`` adds a breakdown by decision
reason, which is where to look before changing a rule. ``--cv K`` adds K-fold
cross-validation by conversation (bench/gate/gate_cv.py: the rule set chosen on K-1 folds,
measured on the held-out one, beside the product's full rule set, and each rule's
held-out recall gain and skip cost) and the learned stage's nested CV at its operating
points (bench/gate/gate_model.py); ``--part holdout`` adds the learned stage on the held-out
conversations (the shipped model, and the same training at each operating point). The readable table goes
first; the LAST line is one JSON object with all figures per file, for scripts/CI.

Default data: the three gate files (bench/data/eval/README.md says where they come from).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.common import stats
from bench.common.evaldata import EvalDataError, GateFile, eval_file, load_gate
from bench.common.holdout import PARTS, select_gate
from bench.gate import gate_model, gate_report
from bench.gate.gate_cv import DEFAULT_TARGET, cross_validate, format_cv
from memory.language.gate_model import gate as gated_prefilter
from memory.language.prefilter import GateAction, GateDecision, prefilter

DEFAULT_FILES = ("msc_gate.balanced.dev.json", "msc_gate.realistic.dev.json", "zh_gate.smoke.dev.json")

Decide = Callable[[str, Sequence[str]], GateDecision]

# ---------------------------------------------------------------------- baseline

# The README's first-person keyword rule. Lower case, straight apostrophes, whole-word
# match for English and substring for Chinese: this reproduces the README figures.
_BASELINE_EN = re.compile(r"\b(?:my|i am|i'm|i have|i like|i love|i work|i live|remember)\b")
_BASELINE_ZH = ("我叫", "我是", "我的", "我喜欢", "我住", "记住", "生日", "约好")


def baseline(text: str, context: Sequence[str] = ()) -> GateDecision:
    """First-person keyword rule: pass (EXTRACT) when any keyword occurs, else SKIP."""
    t = text.lower().replace("\u2019", "'")
    if _BASELINE_EN.search(t) or any(k in t for k in _BASELINE_ZH):
        return GateDecision(GateAction.EXTRACT, "keyword")
    return GateDecision(GateAction.SKIP, "no_keyword")


# ----------------------------------------------------------------------- metrics


@dataclass(frozen=True)
class GateMetrics:
    """Confusion counts and rates for "passes" (positive) against "durable" (truth)."""

    items: int
    durable: int
    not_durable: int
    tp: int
    fp: int
    fn: int
    tn: int
    forced: int
    precision: float | None  # None when nothing passed
    recall: float | None  # None when there is no durable item
    f1: float | None
    skip_rate: float | None  # share of non-durable items skipped; None when there are none
    pass_rate: float | None  # share of all items passed (what the LLM step will see)
    recall_ci95: tuple[float, float] | None = None  # bootstrap over the durable items
    skip_rate_ci95: tuple[float, float] | None = None  # bootstrap over the non-durable items


def gate_metrics(durable: Sequence[bool], passed: Sequence[bool], forced: Sequence[bool] = ()) -> GateMetrics:
    """Precision/recall/F1 of ``passed`` against ``durable``, plus the skip rate."""
    if len(durable) != len(passed):
        raise ValueError(f"durable and passed differ in length ({len(durable)} vs {len(passed)})")
    tp = sum(d and p for d, p in zip(durable, passed, strict=True))
    fp = sum(p and not d for d, p in zip(durable, passed, strict=True))
    fn = sum(d and not p for d, p in zip(durable, passed, strict=True))
    tn = len(durable) - tp - fp - fn
    precision = tp / (tp + fp) if tp + fp else None
    recall = tp / (tp + fn) if tp + fn else None
    if precision is None or recall is None:
        f1 = None
    else:
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return GateMetrics(
        items=len(durable),
        durable=tp + fn,
        not_durable=fp + tn,
        tp=tp,
        fp=fp,
        fn=fn,
        tn=tn,
        forced=sum(bool(f) for f in forced),
        precision=precision,
        recall=recall,
        f1=f1,
        skip_rate=tn / (fp + tn) if fp + tn else None,
        pass_rate=(tp + fp) / len(durable) if durable else None,
        recall_ci95=_interval([p for d, p in zip(durable, passed, strict=True) if d]),
        skip_rate_ci95=_interval([not p for d, p in zip(durable, passed, strict=True) if not d]),
    )


def _interval(indicators: Sequence[bool]) -> tuple[float, float] | None:
    return stats.mean_interval([float(x) for x in indicators]) if indicators else None


def _percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of an already sorted list (0 when empty)."""
    if not sorted_values:
        return 0.0
    k = max(0, min(len(sorted_values) - 1, math.ceil(q * len(sorted_values)) - 1))
    return sorted_values[k]


@dataclass(frozen=True)
class MethodReport:
    metrics: GateMetrics
    p50_us: float
    p95_us: float
    by_reason: dict[str, dict[str, Any]]  # reason -> {"action", "n", "durable", "not_durable"}


def run_method(gate: GateFile, decide: Decide) -> MethodReport:
    """Run ``decide`` over every item of ``gate`` (timing each call) and score it."""
    if gate.items:  # warm-up, so that one-off costs do not land in the first timing
        decide(gate.items[0].text, gate.items[0].context)
    durable: list[bool] = []
    passed: list[bool] = []
    forced: list[bool] = []
    times: list[float] = []
    reasons: Counter[tuple[str, str, bool]] = Counter()
    clock = time.perf_counter_ns
    for item in gate.items:
        t0 = clock()
        decision = decide(item.text, item.context)
        times.append((clock() - t0) / 1000.0)
        durable.append(item.durable)
        passed.append(decision.action is not GateAction.SKIP)
        forced.append(decision.action is GateAction.FORCE)
        reasons[(decision.reason, decision.action.value, item.durable)] += 1
    times.sort()
    by_reason: dict[str, dict[str, Any]] = {}
    for (reason, action, is_durable), n in sorted(reasons.items()):
        row = by_reason.setdefault(reason, {"action": action, "n": 0, "durable": 0, "not_durable": 0})
        row["n"] += n
        row["durable" if is_durable else "not_durable"] += n
    return MethodReport(
        metrics=gate_metrics(durable, passed, forced),
        p50_us=_percentile(times, 0.50),
        p95_us=_percentile(times, 0.95),
        by_reason=by_reason,
    )


# "gate" is what GATED runs: the rules, then the learned stage on English turns
# (memory/language/gate_model.py; trained on the development part, so on that part its
# figures are training figures: the cross-validated ones are under --cv).
METHODS: dict[str, Decide] = {"gate": gated_prefilter, "prefilter": prefilter, "baseline": baseline}


def evaluate(gate: GateFile, methods: dict[str, Decide] | None = None) -> dict[str, MethodReport]:
    """Score every method on one loaded gate file."""
    return {name: run_method(gate, fn) for name, fn in (methods or METHODS).items()}


# ------------------------------------------------------------------------ output


def by_language(gate: GateFile) -> list[GateFile]:
    """A file whose items say their language ("lang": en / zh) split by it; none for a
    file of one language."""
    langs = sorted({str(it.extra.get("lang")) for it in gate.items if it.extra.get("lang")})
    if len(langs) < 2:
        return []
    return [
        dataclasses.replace(
            gate,
            name=f"{gate.name}.{lang}",
            language=lang,
            items=tuple(it for it in gate.items if it.extra.get("lang") == lang),
        )  # fmt: skip
        for lang in langs
    ]


def _fmt(x: float | None) -> str:
    return "  -  " if x is None else f"{x:.3f}"


def _span(ci: tuple[float, float] | None) -> str:
    return "-" if ci is None else f"{ci[0]:.3f}-{ci[1]:.3f}"


def format_table(gate: GateFile, reports: dict[str, MethodReport], by_reason: bool) -> str:
    m0 = next(iter(reports.values())).metrics
    lines = [
        f"{gate.name}  ({gate.language}, {m0.items} items: {m0.durable} durable, {m0.not_durable} not)  {gate.path}",
        f"  {'method':<10} {'prec':>6} {'recall':>6} {'F1':>6} {'skip':>6} {'pass%':>6} "
        f"{'TP':>5} {'FP':>5} {'FN':>5} {'TN':>5} {'FORCE':>5} {'p50us':>7} {'p95us':>7} "
        f"{'recall 95%':>12} {'skip 95%':>12}",
    ]
    for name, r in reports.items():
        m = r.metrics
        lines.append(
            f"  {name:<10} {_fmt(m.precision):>6} {_fmt(m.recall):>6} {_fmt(m.f1):>6} {_fmt(m.skip_rate):>6} "
            f"{_fmt(m.pass_rate):>6} {m.tp:>5} {m.fp:>5} {m.fn:>5} {m.tn:>5} {m.forced:>5} "
            f"{r.p50_us:>7.1f} {r.p95_us:>7.1f} {_span(m.recall_ci95):>12} {_span(m.skip_rate_ci95):>12}"
        )
    if by_reason:
        for name, r in reports.items():
            lines.append(f"  by reason ({name}):  {'action':<8} {'n':>5} {'durable':>7} {'not':>5}")
            for reason, row in sorted(r.by_reason.items(), key=lambda kv: (kv[1]["action"], -kv[1]["n"])):
                lines.append(
                    f"    {reason:<24} {row['action']:<8} {row['n']:>5} {row['durable']:>7} {row['not_durable']:>5}"
                )
    return "\n".join(lines)


def report_json(gate: GateFile, reports: dict[str, MethodReport], by_reason: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"path": str(gate.path), "language": gate.language, "items": len(gate.items)}
    for name, r in reports.items():
        entry: dict[str, Any] = asdict(r.metrics)
        entry.update(p50_us=round(r.p50_us, 1), p95_us=round(r.p95_us, 1))
        for k in ("precision", "recall", "f1", "skip_rate", "pass_rate"):
            entry[k] = None if entry[k] is None else round(entry[k], 4)
        for k in ("recall_ci95", "skip_rate_ci95"):
            entry[k] = None if entry[k] is None else [round(x, 4) for x in entry[k]]
        if by_reason:
            entry["by_reason"] = r.by_reason
        out[name] = entry
    return out


# --------------------------------------------------------------------------- CLI


def _default_paths() -> list[Path]:
    return [eval_file(name) for name in DEFAULT_FILES]


def main(argv: Iterable[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.gate.run", description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--data",
        action="append",
        type=Path,
        metavar="FILE",
        help="gatekeeper-format JSON file (repeatable; default: the three gate files in the eval dir)",
    )
    ap.add_argument("--by-reason", action="store_true", help="also break results down by decision reason")
    ap.add_argument(
        "--cv",
        type=int,
        metavar="K",
        default=0,
        help="also K-fold cross-validate the rule set, folds by conversation/user (e.g. 5)",
    )
    ap.add_argument(
        "--cv-target",
        type=float,
        default=DEFAULT_TARGET,
        metavar="R",
        help=f"recall the rule selection must keep on the training folds (default {DEFAULT_TARGET})",
    )
    ap.add_argument(
        "--part",
        choices=PARTS,
        default="all",
        help="MSC conversations of bench/data/holdout.json's development part, its held-out part, or all",
    )
    args = ap.parse_args(list(argv) if argv is not None else None)

    try:
        paths = args.data or _default_paths()
    except EvalDataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    results: dict[str, Any] = {}
    held: dict[str, dict[str, object]] | None = None  # the learned stage on the held-out part, measured once
    for path in paths:
        try:
            whole = load_gate(path)
        except EvalDataError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        gate = select_gate(whole, args.part)
        if not whole.items:
            print(f"error: {path}: no items", file=sys.stderr)
            return 2
        if not gate.items:  # bench/data/holdout.json splits MSC's conversations only
            print(f"{gate.name}: no items in the {args.part} part (the split holds MSC conversations only)\n")
            continue
        reports = evaluate(gate)
        print(format_table(gate, reports, args.by_reason))
        print()
        key = gate.name if gate.name not in results else str(path)
        results[key] = report_json(gate, reports, args.by_reason)
        for part in by_language(gate):  # a mixed file (bench/data/blind/): each language apart too
            part_reports = evaluate(part)
            print(format_table(part, part_reports, False))
            print()
            results[part.name] = report_json(part, part_reports, False)
        if args.cv:
            if args.cv < 2:
                print(f"error: --cv needs at least 2 folds, got {args.cv}", file=sys.stderr)
                return 2
            cv = cross_validate(gate, args.cv, args.cv_target)
            print(format_cv(gate, cv))
            print()
            results[key]["cv"] = asdict(cv)
            if gate.name in gate_model.REPORT_NAMES and args.part != "holdout":
                pool, reports = gate_model.dev_items(path.parent, args.part)
                model_cv = gate_model.cross_validate(pool, reports[gate.name], args.cv)
                print(gate_report.format_cv(gate.name, model_cv))
                print()
                results[key]["model_cv"] = model_cv
        if args.part == "holdout" and gate.name in gate_model.REPORT_NAMES:
            held = held or gate_model.holdout(path.parent)
            print(gate_report.format_holdout({gate.name: held[gate.name]}))
            print()
            results[key]["model_holdout"] = held[gate.name]
    print(json.dumps({"bench": "gate", "files": results}, ensure_ascii=False, sort_keys=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
