"""The block benchmark's figures: a row per query and block (answers, noise, size), the cut
chosen by cross-validation over stores, the curve over the grid, and the printed table."""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.common import stats
from memory.language.asking import tells_nothing
from memory.livekit.blocks import fit_recalled, format_memories
from memory.types import MemoryRecord

JUNK_FLOOR = 0.02


GRID = tuple(round(0.02 * i, 2) for i in range(1, 46))  # cuts swept: 0.02 ... 0.90


@dataclass
class Row:
    """One look-up and the block it gave."""

    file: str
    variant: str  # plain | selfq
    mode: str  # normal | gated
    kind: str  # own | foreign | smalltalk
    store: str  # the store asked (the unit of the folds)
    lang: str
    category: str
    relevant: frozenset[str]
    records: list[MemoryRecord] = field(default_factory=list)  # at the floor, best first
    ids: list[frozenset[str]] = field(default_factory=list)  # each record's file ids (itself and its copies)
    ms: float = 0.0
    fitted: dict[tuple[int, ...], list[int]] = field(default_factory=dict, repr=False)  # `injected`'s cache


@dataclass(frozen=True)
class Cut:
    """A relevance cut: memories scoring at least `threshold` (per language when given)."""

    threshold: float
    by_lang: tuple[tuple[str, float], ...] = ()

    def at(self, lang: str) -> float:
        return dict(self.by_lang).get(lang, self.threshold)


def injected(row: Row, cut: Cut, max_chars: int) -> list[int]:
    """Indexes of the records the block shows under `cut`: those clearing it, then fitted
    to the block's budget as the reply's request fits them."""
    t = cut.at(row.lang)
    kept = tuple(i for i, r in enumerate(row.records) if r.score >= t)
    if kept not in row.fitted:  # the same memories kept under many cuts: fitted once
        shown, _ = fit_recalled([row.records[i] for i in kept], max_chars)
        ids = {id(r) for r in shown}
        row.fitted[kept] = [i for i in kept if id(row.records[i]) in ids]
    return row.fitted[kept]


def figures(row: Row, cut: Cut, max_chars: int, count_tokens: Callable[[str], int] | None = None) -> dict[str, float]:
    """One block's measures."""
    shown = injected(row, cut, max_chars)
    out: dict[str, float] = {"n_mem": float(len(shown)), "empty": float(not shown)}
    if row.kind == "own":
        labelled = [bool(row.ids[i] & row.relevant) for i in shown]
        out["answer"] = float(any(labelled))
        out["noise"] = float(sum(not x for x in labelled))
        asks = [tells_nothing(row.records[i].text) for i in shown]
        out["own_q"] = float(any(asks) and not all(asks))
    if count_tokens is not None:
        recs = [row.records[i] for i in shown]
        _, line_max = fit_recalled(recs, max_chars)
        out["tokens"] = float(count_tokens(format_memories(recs, line_max=line_max)) if recs else 0)
    return out


# ------------------------------------------------------------------ scoring
MEASURES = ("answer", "noise", "n_mem", "own_q", "tokens")


# (kind of block, measure, label) of the curve and the cross-validation.
LABELS = (("own", "answer", "answer"), ("own", "n_mem", "n_mem"), ("foreign", "empty", "empty_foreign"),
          ("smalltalk", "empty", "empty_smalltalk"))  # fmt: skip


def summarise(rows: Sequence[Row], cut: Cut, max_chars: int, count_tokens: Callable[[str], int] | None) -> dict:
    """Mean and 95% interval of each measure over the rows it applies to."""
    per = [(r, figures(r, cut, max_chars, count_tokens)) for r in rows]
    out: dict[str, Any] = {}
    own = [(r, f) for r, f in per if r.kind == "own"]
    for m in MEASURES:
        values = [f[m] for _, f in own if m in f]
        if values:
            out[m] = _with_interval(values, [r.store for r, _ in own])
    # memories and tokens on answerable queries are above; empty rates for the others
    for kind in ("foreign", "smalltalk"):
        sel = [(r, f) for r, f in per if r.kind == kind]
        if sel:
            out[f"empty_{kind}"] = _with_interval([f["empty"] for _, f in sel], [r.store for r, _ in sel])
    talk = [(r, f) for r, f in per if r.kind == "smalltalk"]
    for lang in sorted({r.lang for r, _ in talk}):
        sel = [(r, f) for r, f in talk if r.lang == lang]
        out[f"empty_smalltalk_{lang}"] = _with_interval([f["empty"] for _, f in sel], [r.store for r, _ in sel])
    out["n"] = len(own)
    ms = sorted(r.ms for r in rows)
    if ms:
        out["p95_ms"] = round(ms[min(len(ms) - 1, int(0.95 * len(ms)))], 1)
    return out


def _with_interval(values: Sequence[float], groups: Sequence[str]) -> dict[str, Any]:
    mean = statistics.fmean(values)
    low, high = stats.mean_interval(values, groups=groups if len(set(groups)) > 1 else None)
    return {"mean": round(mean, 4), "ci95": [round(low, 4), round(high, 4)], "n": len(values)}


def rate(
    rows: Sequence[Row], cut: Cut, max_chars: int, kind: str, key: str, lang: str | None = None, file: str | None = None
) -> float | None:
    """The mean of `key` over the blocks of `kind` (of one language, one file)."""
    sel = [r for r in rows if r.kind == kind and (lang is None or r.lang == lang) and (file is None or r.file == file)]
    if not sel:
        return None
    return statistics.fmean(figures(r, cut, max_chars)[key] for r in sel)


def choose(rows: Sequence[Row], max_chars: int, *, per_lang: bool = False) -> Cut:
    """The cut that best keeps answers and drops foreign queries on `rows`: the highest
    answer in block plus empty block for a foreign query (Youden's J), each averaged over
    the files (every file counts the same, as the targets are per file); ties to the lower
    cut. With `per_lang`, one cut per language, each chosen on its language's files."""

    def best(sel: Sequence[Row]) -> float:
        files = sorted({r.file for r in sel})
        scored = []
        for t in GRID:
            cut = Cut(t)
            answers = [rate(sel, cut, max_chars, "own", "answer", file=f) for f in files]
            foreign = [rate(sel, cut, max_chars, "foreign", "empty", file=f) for f in files]
            kept = [x for x in answers if x is not None]
            dropped = [x for x in foreign if x is not None]
            scored.append(
                ((statistics.fmean(kept) if kept else 0.0) + (statistics.fmean(dropped) if dropped else 0.0), -t)
            )
        return -max(scored)[1]

    if not per_lang:
        return Cut(best(rows))
    langs = sorted({r.lang for r in rows if r.kind == "own"})
    return Cut(best(rows), tuple((lang, best([r for r in rows if r.lang == lang])) for lang in langs))


def cross_validate(rows: Sequence[Row], max_chars: int, folds: int = 5, *, per_lang: bool = False) -> dict[str, Any]:
    """The cut chosen on the other folds of stores, scored on each fold (whole stores of
    every file: a store's own, foreign and small-talk blocks stay together); pooled."""
    units = sorted({(r.file, r.store) for r in rows})
    random.Random(stats.SEED).shuffle(units)
    parts = [set(units[i::folds]) for i in range(folds)]
    held: list[tuple[Row, Cut]] = []
    chosen = []
    for part in parts:
        train = [r for r in rows if (r.file, r.store) not in part]
        cut = choose(train, max_chars, per_lang=per_lang)
        chosen.append(cut)
        held += [(r, cut) for r in rows if (r.file, r.store) in part]
    out: dict[str, Any] = {"cuts": [[c.threshold, dict(c.by_lang)] for c in chosen]}
    by_file: dict[str, dict[str, Any]] = {}
    for name in sorted({r.file for r, _ in held}) + [None]:
        sel = [(r, c) for r, c in held if name is None or r.file == name]
        fig: dict[str, Any] = {}
        for kind, key, label in LABELS:
            vals = [(figures(r, c, max_chars)[key], r.store) for r, c in sel if r.kind == kind]
            if vals:
                fig[label] = _with_interval([v for v, _ in vals], [s for _, s in vals])
        by_file[name or "all"] = fig
    out["held_out"] = by_file
    return out


def curve(rows: Sequence[Row], max_chars: int) -> list[dict[str, float]]:
    """Answer in block against the empty rates, for every cut of the grid."""
    out = []
    for t in (JUNK_FLOOR, *GRID):
        cut = Cut(t)
        point = {"cut": t}
        for kind, key, label in LABELS:
            value = rate(rows, cut, max_chars, kind, key)
            if value is not None:
                point[label] = round(value, 4)
        out.append(point)
    return out


def cell(d: dict[str, Any] | None) -> str:
    if not d:
        return f"{'-':>19}"
    low, high = d["ci95"]
    return f"{d['mean']:>6.3f} [{low:.2f}-{high:.2f}]"


def print_table(groups: dict[str, dict[str, Any]]) -> None:
    cols = ("answer", "noise", "n_mem", "own_q", "tokens", "empty_foreign", "empty_smalltalk_en",
            "empty_smalltalk_zh")  # fmt: skip
    print(f"\n{'block (file / variant / mode / category)':<52} {'n':>5} " + " ".join(f"{c:>19}" for c in cols))
    for name, summ in groups.items():
        print(f"{name:<52} {summ.get('n', 0):>5} " + " ".join(cell(summ.get(c)) for c in cols))
