"""Benchmark GATED's recall trigger (`memory.language.recall_intent`) on the eval files.

    uv run python -m bench.gate.recall_intent [--data FILE ...] [--misses N]

GATED searches memory only for messages the trigger says need it. Two figures, from
any mix of the two eval formats (bench/data/eval/README.md):

- on a retrieval file, every query is a question that memory answers: the share
  that triggers a search is the trigger's recall (a miss is a question asked of an
  agent that then does not remember);
- on a gatekeeper file, the turns are everyday conversation: the share that
  triggers a search is the search rate, the cost side (a search is one embedding
  and one round trip, prefetched while the user speaks, so a needless one costs
  little but keeps unrelated memories in the prompt).

Each with a 95% bootstrap interval over the messages, and per category (retrieval)
or per reason. The LAST line is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Sequence
from typing import Any

from bench.common import stats
from bench.common.evaldata import EvalDataError, eval_file, file_kind, load_gate, load_retrieval
from memory.language.recall_intent import recall_reason

DEFAULT_FILES = (
    "memdaily.dev.json", "madial_en.dev.json", "madial_zh.dev.json", "locomo.dev.json",
    "msc_gate.realistic.dev.json", "zh_gate.smoke.dev.json",
)  # fmt: skip


def measure(texts: Sequence[str], categories: Sequence[str] | None = None) -> dict[str, Any]:
    """Share of `texts` that trigger a search, its interval, and the breakdowns."""
    reasons = [recall_reason(t) for t in texts]
    hits = [1.0 if r else 0.0 for r in reasons]
    low, high = stats.mean_interval(hits)
    out: dict[str, Any] = {
        "messages": len(texts),
        "searched": int(sum(hits)),
        "rate": round(sum(hits) / len(texts), 3),
        "rate_ci95": [round(low, 3), round(high, 3)],
        "by_reason": dict(Counter(r or "none" for r in reasons).most_common()),
    }
    if categories is not None:
        per: dict[str, list[float]] = {}
        for cat, hit in zip(categories, hits, strict=True):
            per.setdefault(cat, []).append(hit)
        out["by_category"] = {c: round(sum(v) / len(v), 3) for c, v in sorted(per.items())}
    return out


def run_file(path: str) -> tuple[str, str, dict[str, Any], list[str]]:
    """(name, kind, figures, messages not searched) for one eval file."""
    if file_kind(path) == "retrieval":
        data = load_retrieval(path)
        texts = [q.query for q in data.queries]
        figures = measure(texts, [q.category for q in data.queries])
        return data.name, "recall", figures, [t for t in texts if not recall_reason(t)]
    gate = load_gate(path)
    texts = [it.text for it in gate.items]
    return gate.name, "search rate", measure(texts), []


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.gate.recall_intent", description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", nargs="+", help="eval files (default: the dev files, bench/data/eval/README.md)")
    ap.add_argument("--misses", type=int, default=0, help="print up to N questions per file that get no search")
    args = ap.parse_args(argv)
    try:
        paths = args.data or [str(eval_file(f)) for f in DEFAULT_FILES]
    except EvalDataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    results: dict[str, Any] = {}
    print(f"{'file':24} {'measures':12} {'messages':>8} {'searched':>8} {'rate':>6}  95% interval")
    for path in paths:
        try:
            name, kind, fig, misses = run_file(path)
        except (EvalDataError, OSError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        results[name] = {"measures": kind, **fig}
        low, high = fig["rate_ci95"]
        print(
            f"{name:24} {kind:12} {fig['messages']:>8} {fig['searched']:>8} {fig['rate']:>6.3f}  {low:.3f}-{high:.3f}"
        )
        if "by_category" in fig:
            print("    by category: " + ", ".join(f"{c} {r:.3f}" for c, r in fig["by_category"].items()))
        for text in misses[: args.misses]:
            print(f"    no search: {text[:100]}")
    print(json.dumps({"files": results}, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
