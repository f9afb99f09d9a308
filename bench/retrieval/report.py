"""The retrieval benchmark's figures: each query's result, hit@k and nDCG per query, bootstrap
intervals, paired differences between methods, close calls, cross-validation by store, and
the printed tables."""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from bench.common import stats
from bench.common.evaldata import Query
from bench.retrieval.stores import (
    VARIANTS,
)

KS = (1, 5, 10)


# The columns of the table, and the measures given with a 95% interval (overall and per category).
COLUMNS = ("hit@1", "hit@5", "hit@10", "ndcg@5", "frac@5", "frac@10", "mrr@10")


INTERVALS = ("hit@1", "hit@5", "ndcg@5")


CLOSE_EPS = 0.001  # "decided by less than this": see `close_calls`


# -------------------------------------------------------------- measuring
@dataclasses.dataclass
class QueryResult:
    query: Query
    ranked: list[str]  # memory ids, best first
    ms: float
    scores: list[float] = dataclasses.field(default_factory=list)  # fused scores, same order
    # The memory ids each shown memory stands for besides its own: its copies among the
    # candidates (exact, or near with MEMORY_RETRIEVAL_NEAR_COPIES), same order.
    copies: list[frozenset[str]] = dataclasses.field(default_factory=list)


def quantile(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    return round(values[min(len(values) - 1, int(q * len(values)))], 4)


def metrics(results: Sequence[QueryResult]) -> dict[str, float]:
    n = len(results)
    if not n:
        return {"n": 0}
    sums: dict[str, float] = defaultdict(float)
    for k in KS:
        sums[f"hit@{k}"] = sum(per_query_hits(results, k))
    for k in (1, 5):
        sums[f"hit@{k}+copies"] = sum(per_query_hits(results, k, copies=True))
    sums["ndcg@5"] = sum(per_query_ndcg(results, 5))
    for r in results:
        relevant = set(r.query.relevant)
        for k in (5, 10):
            sums[f"frac@{k}"] += len(relevant.intersection(r.ranked[:k])) / min(k, len(relevant))
        rank = next((i for i, m in enumerate(r.ranked[:10], 1) if m in relevant), None)
        sums["mrr@10"] += 1.0 / rank if rank else 0.0
    out = {"n": n}
    for key in (*COLUMNS, "hit@1+copies", "hit@5+copies"):
        out[key] = round(sums[key] / n, 4)
    return out


def per_query_hits(results: Sequence[QueryResult], k: int, *, copies: bool = False) -> list[int]:
    """1 for each query with a relevant memory in its top k, else 0, in query order. With
    `copies`, a shown memory also counts for the copies it stands for (`QueryResult.copies`):
    "hit@k+copies", the figure for a reply that gets one line for what was said several
    times (a near-copy of the labelled memory is as good to the reply as the memory)."""
    out = []
    for r in results:
        relevant = set(r.query.relevant)
        shown = set(r.ranked[:k])
        if copies:
            for also in r.copies[:k]:
                shown |= also
        out.append(int(not relevant.isdisjoint(shown)))
    return out


def per_query_ndcg(results: Sequence[QueryResult], k: int) -> list[float]:
    """NDCG@k of each query, relevance 0/1: the relevant memories' places in the top k,
    each worth 1/log2(rank + 1), over the best the query could get (all its relevant
    memories first), in query order."""
    out = []
    for r in results:
        relevant = set(r.query.relevant)
        dcg = sum(1.0 / math.log2(i + 1) for i, m in enumerate(r.ranked[:k], 1) if m in relevant)
        ideal = sum(1.0 / math.log2(i + 1) for i in range(1, min(k, len(relevant)) + 1))
        out.append(dcg / ideal)
    return out


def per_query(results: Sequence[QueryResult], measure: str) -> list[float]:
    """Each query's value of `measure` ("hit@K" or "ndcg@K"), in query order."""
    name, _, k = measure.partition("@")
    if name == "hit":
        at, plus, _ = k.partition("+")
        return [float(x) for x in per_query_hits(results, int(at), copies=bool(plus))]
    if name == "ndcg":
        return per_query_ndcg(results, int(k))
    raise ValueError(f"unknown measure {measure!r}")


def intervals(results: Sequence[QueryResult]) -> dict[str, Any]:
    """95% bootstrap interval of each of `INTERVALS` over the queries, and over the
    stores when there are several (`..._ci95_stores`, with their number): the held-out
    halves hold other users, so that is how far the figure may move there."""
    if not results:
        return {}
    out: dict[str, Any] = {
        f"{m}_ci95": [round(x, 4) for x in stats.mean_interval(per_query(results, m))] for m in INTERVALS
    }
    stores = [r.query.store_id for r in results]
    if len(set(stores)) > 1:
        for m in INTERVALS:
            low, high = stats.mean_interval(per_query(results, m), groups=stores)
            out[f"{m}_ci95_stores"] = [round(low, 4), round(high, 4)]
        out["stores"] = len(set(stores))
    return out


def close_calls(results: Sequence[QueryResult], k: int = 5, eps: float = CLOSE_EPS) -> dict[str, Any]:
    """Queries whose hit@k is decided by less than `eps` of fused score: a hit whose
    best relevant memory leads the memory ranked k+1 by less, or a miss whose best
    relevant memory (within the returned list) trails the k-th by less.

    These are the queries a rounding difference between machines, or a 1% change of
    any weight, turns over; the interval says how wide the noise is, this says where.
    """
    hits = misses = 0
    for r in results:
        best = next((i for i, m in enumerate(r.ranked) if m in r.query.relevant), None)
        if best is None or len(r.scores) != len(r.ranked):
            continue
        if best < k:
            close = len(r.scores) > k and r.scores[best] - r.scores[k] < eps
            hits += close
        else:
            close = r.scores[k - 1] - r.scores[best] < eps
            misses += close
    return {"eps": eps, "hits": hits, "misses": misses}


def compare(base: Sequence[QueryResult], other: Sequence[QueryResult], k: int = 5) -> dict[str, Any]:
    """`other`'s paired difference in hit@k from `base` (the same queries, in order), and
    under `also` in each measure of `INTERVALS`."""
    p = stats.paired(per_query_hits(base, k), per_query_hits(other, k))
    also = {}
    for m in INTERVALS:
        q = stats.paired(per_query(base, m), per_query(other, m))
        also[m] = {"diff": round(q.diff, 4), "ci95": [round(q.low, 4), round(q.high, 4)], "clear": q.clear}
    return {f"hit@{k}_diff": round(p.diff, 4), "ci95": [round(p.low, 4), round(p.high, 4)],
            "better": p.better, "worse": p.worse, "clear": p.clear, "also": also}  # fmt: skip


def timing(results: Sequence[QueryResult]) -> dict[str, float]:
    ms = sorted(r.ms for r in results)
    if not ms:
        return {}
    return {
        "p50_ms": round(statistics.median(ms), 1),
        "p95_ms": round(ms[min(len(ms) - 1, math.ceil(0.95 * len(ms)) - 1)], 1),
        "mean_ms": round(statistics.fmean(ms), 1),
    }


def summarise(results: Sequence[QueryResult]) -> dict[str, Any]:
    by_cat: dict[str, list[QueryResult]] = defaultdict(list)
    for r in results:
        by_cat[r.query.category].append(r)
    overall = {**metrics(results), "hits@5": sum(per_query_hits(results, 5)), **intervals(results)}
    return {
        "overall": {**overall, "close@5": close_calls(results)},
        "categories": {c: {**metrics(rs), **intervals(rs)} for c, rs in sorted(by_cat.items())},
        **timing(results),
    }


def print_table(name: str, k: int, summaries: dict[str, dict[str, Any]]) -> None:
    cols = COLUMNS
    print(f"\n{name}  (top_k={k})")
    header = f"{'method':<28} {'category':<16} {'n':>5} " + " ".join(f"{c:>7}" for c in cols)
    print(header + f" {'p50 ms':>7} {'p95 ms':>7}")
    print("-" * (len(header) + 16))
    for method, summ in summaries.items():
        rows = [("all", summ["overall"])] + list(summ["categories"].items())
        for i, (cat, m) in enumerate(rows):
            cells = " ".join(f"{m.get(c, 0):>7.3f}" for c in cols)
            times = f" {summ.get('p50_ms', 0):>7.1f} {summ.get('p95_ms', 0):>7.1f}" if i == 0 else ""
            print(f"{method if i == 0 else '':<28} {cat:<16} {m['n']:>5} {cells}{times}")
        overall = summ["overall"]
        if "hit@5_ci95" in overall:
            low, high = overall["hit@5_ci95"]
            close = overall["close@5"]
            line = f"hit@5 {overall['hits@5']}/{overall['n']}, 95% interval {low:.3f}-{high:.3f} over queries"
            if "hit@5_ci95_stores" in overall:
                s_low, s_high = overall["hit@5_ci95_stores"]
                line += f", {s_low:.3f}-{s_high:.3f} over its {overall['stores']} stores"
            print(f"{'':<28} {line}; decided by < {close['eps']} of score: {close['hits']} hits, "
                  f"{close['misses']} misses")  # fmt: skip
        if (
            overall.get("hit@5+copies", overall["hit@5"]) != overall["hit@5"]
            or overall.get("hit@1+copies", overall["hit@1"]) != overall["hit@1"]
        ):
            print(f"{'':<28} counting the copies a shown memory stands for: hit@1 {overall['hit@1+copies']:.3f}, "
                  f"hit@5 {overall['hit@5+copies']:.3f}")  # fmt: skip
        if "calibration" in summ:
            print(f"{'':<28} scores: " + ", ".join(f"{k} {v:.3f}" for k, v in summ["calibration"].items()))
    print_intervals(summaries)
    paired = [(m, s[key]) for m, s in summaries.items() for key in s if key.startswith("vs ") and key != "vs plain"]
    if paired:
        base = next(iter(summaries))
        print(f"\npaired against {base} (same queries; 95% bootstrap interval of the hit@5 difference)")
        for method, p in paired:
            verdict = "a difference" if p["clear"] else "within noise"
            low, high = p["ci95"]
            print(f"  {method:<28} {p['hit@5_diff']:+.3f} [{low:+.3f}, {high:+.3f}]  "
                  f"better on {p['better']}, worse on {p['worse']}: {verdict}")  # fmt: skip


def print_intervals(summaries: dict[str, dict[str, Any]]) -> None:
    """hit@1, hit@5 and NDCG@5 with their 95% intervals over queries, per method and category."""
    print("\n95% bootstrap intervals over queries (over stores in brackets where a file has several)")
    print(f"{'method':<28} {'category':<16} " + " ".join(f"{m:<26}" for m in INTERVALS))
    for method, summ in summaries.items():
        rows = [("all", summ["overall"])] + list(summ["categories"].items())
        for i, (cat, m) in enumerate(rows):
            cells = []
            for measure in INTERVALS:
                low, high = m.get(f"{measure}_ci95", (0.0, 0.0))
                cell = f"{m.get(measure, 0):.3f} {low:.3f}-{high:.3f}"
                if f"{measure}_ci95_stores" in m and i == 0:
                    s_low, s_high = m[f"{measure}_ci95_stores"]
                    cell += f" [{s_low:.2f}-{s_high:.2f}]"
                cells.append(f"{cell:<26}")
            print(f"{method if i == 0 else '':<28} {cat:<16} " + " ".join(cells))


def print_variants(summaries: dict[str, dict[str, Any]]) -> None:
    """What the self-question variant costs each method: its paired difference from the
    same method on the plain file."""
    rows = [(m, s["vs plain"]) for m, s in summaries.items() if "vs plain" in s]
    if not rows:
        return
    print("\nself-question variant against the plain file (same method, same queries; 95% paired interval)")
    for method, p in rows:
        cells = "  ".join(
            f"{m} {p['also'][m]['diff']:+.3f} [{p['also'][m]['ci95'][0]:+.3f}, {p['also'][m]['ci95'][1]:+.3f}]"
            for m in INTERVALS
        )
        print(f"  {method:<28} {cells}")


def cross_validate(runs: Mapping[str, Mapping[str, Sequence[QueryResult]]], folds: Sequence[Sequence[str]]) -> dict:
    """Choosing among the methods run, cross-validated by store: for each fold of stores,
    the method with the best mean of hit@1 and hit@5 (over the variants run) on the other
    folds, and its figures on this one. `runs`: method -> variant -> results. The pooled
    figures of the chosen methods are what the choice is worth on stores it did not see."""
    if len(folds) < 2 or not runs:
        return {}

    both = {id(rs): [a + b for a, b in zip(per_query_hits(rs, 1), per_query_hits(rs, 5), strict=True)]
            for by_variant in runs.values() for rs in by_variant.values()}  # fmt: skip

    def value(results: Sequence[QueryResult], stores: set[str]) -> tuple[float, int]:
        hits = [h for r, h in zip(results, both[id(results)], strict=True) if r.query.store_id in stores]
        return sum(hits) / 2, len(hits)

    out: dict[str, Any] = {"folds": [], "pooled": {}}
    pooled: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for fold in folds:
        inside = {r.query.store_id for rs in next(iter(runs.values())).values() for r in rs} - set(fold)
        scores = {}
        for method, by_variant in runs.items():
            total = [value(rs, inside) for rs in by_variant.values()]
            scores[method] = sum(t for t, _ in total) / max(1, sum(n for _, n in total))
        chosen = max(scores, key=lambda m: (scores[m], -list(runs).index(m)))
        row: dict[str, Any] = {"stores": list(fold), "chosen": chosen}
        for variant, rs in runs[chosen].items():
            held = [r for r in rs if r.query.store_id in fold]
            for m in INTERVALS:
                pooled[variant][m] += per_query(held, m)
            row[variant] = {m: round(statistics.fmean(per_query(held, m)), 4) for m in INTERVALS}
        out["folds"].append(row)
    for variant, by_measure in pooled.items():
        out["pooled"][variant] = {m: round(statistics.fmean(v), 4) for m, v in by_measure.items()}
    return out


def print_cv(cv: Mapping[str, Any]) -> None:
    if not cv:
        return
    print("\ncross-validated by store: each fold gets the method best on the other folds")
    for row in cv["folds"]:
        cells = "  ".join(f"{v}: " + " ".join(f"{m} {x:.3f}" for m, x in row[v].items()) for v in VARIANTS if v in row)
        print(f"  {'+'.join(row['stores']):<40} {row['chosen']:<36} {cells}")
    for variant, figures in cv["pooled"].items():
        print(f"  pooled ({variant}): " + " ".join(f"{m} {x:.3f}" for m, x in figures.items()))


# -------------------------------------------------------------------- main
def store_folds(results: Sequence[QueryResult], k: int, seed: int = stats.SEED) -> list[list[str]]:
    """The stores of the results in `k` folds (whole stores, shuffled with a fixed seed)."""
    import random

    names = sorted({r.query.store_id for r in results})
    random.Random(seed).shuffle(names)
    k = min(k, len(names))
    return [sorted(names[i::k]) for i in range(k)] if k >= 2 else []


def fold_figures(
    results: Sequence[QueryResult], base: Sequence[QueryResult] | None, folds: Sequence[Sequence[str]]
) -> list[dict[str, Any]]:
    """hit@5 in each fold of stores, and the difference from `base` there."""
    out = []
    own, theirs = per_query_hits(results, 5), per_query_hits(base, 5) if base is not None else []
    for stores in folds:
        idx = [i for i, r in enumerate(results) if r.query.store_id in stores]
        hits = [own[i] for i in idx]
        row: dict[str, Any] = {"stores": list(stores), "n": len(idx), "hit@5": round(sum(hits) / len(idx), 4)}
        if base is not None:
            base_hits = [theirs[i] for i in idx]
            row["diff"] = round((sum(hits) - sum(base_hits)) / len(idx), 4)
        out.append(row)
    return out


def print_folds(summaries: dict[str, dict[str, Any]]) -> None:
    rows = [(m, s["folds"]) for m, s in summaries.items() if s.get("folds")]
    if not rows:
        return
    print("\nhit@5 per fold of stores (difference from the first method)")
    for method, folds in rows:
        cells = "  ".join(
            f"{'+'.join(f['stores'])}: {f['hit@5']:.3f}" + (f" ({f['diff']:+.3f})" if "diff" in f else "")
            for f in folds
        )
        print(f"  {method:<28} {cells}")
