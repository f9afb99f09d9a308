"""The block a reply is given: what reaches the model, through the product's recall path.

    uv run python -m bench.retrieval.block [--data FILE ...] [--modes normal gated] [--limit-queries N]
        [--small-talk FILE ...] [--self-questions] [--sweep]

`bench.retrieval.run` stops at the ranking (hit@k). This measures what a turn injects: every
query of every file goes through `MemoryService.recall_sync` (the one recall path of a
spoken turn, a typed one, `memory.recall`, MCP and the operator's page), then the block's
budget (`fit_recalled`), with the shipped defaults, in NORMAL and in GATED (GATED: the
file's memories stored as facts, so its look-ups have something to read; only the
messages GATED looks memory up for get a block). Scored, with 95% bootstrap intervals
(over stores where a file has several):

- answer in block: a labelled memory (or a copy it stands for) is injected;
- noise: injected memories that are none of the labelled ones, per block;
- empty when nothing is relevant: the same query asked of another store of the file
  (`bench.retrieval.run --calibrate`'s foreign queries), and small talk asked of every store;
- own questions injected: blocks that hold a turn that only asks beside a statement;
- memories and tokens per block (tokens: the local embedder's tokenizer, about an LLM's).

Overall, per file, per LoCoMo category, and for the self-question variant of each file
(`--self-questions`: each store also holds its queries and a paraphrase of each).

`--sweep`: the relevance cut's curve. The look-ups run once with the cut at the junk floor
(0.02); a cut at t keeps the block's memories scoring t or more (the retriever's threshold
does exactly that: the block is best first, so a higher cut keeps a prefix), and the
cut is chosen by cross-validation over stores (whole stores of every file in 5 folds): on
the other folds, the cut with the best answer in block plus empty block for a foreign
query, each averaged over the files (`choose`), then scored on the fold left out. The
last line of the output is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import stats
from bench.common.evaldata import EvalDataError, RetrievalFile, load_retrieval
from bench.common.holdout import PARTS, select_retrieval
from bench.common.paths import DATA as DATA_DIR
from bench.retrieval import run as rb
from bench.retrieval import stores as rs
from bench.retrieval.self_questions import self_questions
from memory.language.asking import tells_nothing
from memory.livekit.blocks import fit_recalled, format_memories
from memory.service import MemoryService
from memory.settings import MemoryMode, MemorySettings, load_settings
from memory.storage.embedder import local_model
from memory.storage.store import MemoryStore
from memory.types import MemoryRecord

EVAL_DIRS = (Path("/work/shared/eval"), DATA_DIR / "eval")
DEFAULT_FILES = ("locomo.dev.json", "memdaily.dev.json", "madial_en.dev.json", "madial_zh.dev.json")
DEFAULT_DATA_DIR = Path("/tmp/bench-block")
FACT_CATEGORY = "personal_facts"  # GATED: the file's memories stored as facts of this durable category
JUNK_FLOOR = 0.02
GRID = tuple(round(0.02 * i, 2) for i in range(1, 46))  # cuts swept: 0.02 ... 0.90
# Small talk for development (the blind and tuning sets come with --small-talk).
DEV_SMALL_TALK: dict[str, tuple[str, ...]] = {
    "en": ("ok thanks", "how's the weather today?", "hello there", "good morning!", "haha that's funny",
           "sounds good", "bye for now", "can you hear me?", "let's talk later", "nice, go on",
           "what time is it?", "tell me a joke"),
    "zh": ("好的", "嗯", "谢谢", "再见", "今天天气怎么样？", "你好", "哈哈哈", "没问题", "早上好", "听得到吗？",
           "讲个笑话吧", "现在几点了？"),
}  # fmt: skip


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


# ------------------------------------------------------------------ loading
def first_stores(data: RetrievalFile, n: int | None) -> RetrievalFile:
    """The file with its first `n` stores and their queries (all when None): a development subset."""
    import dataclasses

    if not n or n >= len(data.stores):
        return data
    keep = {s.store_id for s in data.stores[:n]}
    return dataclasses.replace(
        data, stores=data.stores[:n], queries=tuple(q for q in data.queries if q.store_id in keep)
    )


def seed(
    plain: MemoryStore, store: MemoryStore, data: RetrievalFile, extra: dict[str, Any], category: str | None
) -> None:
    """A variant's store from the plain one's rows (the same vectors and index, copied in SQL,
    not embedded again), then the variant's own: GATED's memories as facts of `category`
    (no place in a call), the self-question variant's added turns through `add_raw`. Each
    store is stamped as `bench.retrieval.stores.load` stamps it, so that `load` keeps it."""
    from psycopg import sql

    for s in data.stores:
        user = rs.user_for(s.store_id)
        added = extra.get(s.store_id, ())
        stamp = rs.fingerprint(s, added)
        with store.pool.connection() as conn:
            (have,) = conn.execute(
                sql.SQL("SELECT count(*) FROM {} WHERE user_id = %s").format(sql.Identifier(store.table)), [user]
            ).fetchone()
            if have:
                continue
            change = sql.SQL("payload || jsonb_build_object('bench_store', %s::text)")
            args: list[Any] = [stamp]
            if category:
                change = sql.SQL("({}) - 'session_id' - 'seq' || jsonb_build_object('category', %s::text)").format(
                    change
                )
                args.append(category)
            conn.execute(
                sql.SQL("INSERT INTO {dst} (id, vector, payload, user_id) SELECT id, vector, {change}, user_id "
                        "FROM {src} WHERE user_id = %s").format(
                    dst=sql.Identifier(store.table), src=sql.Identifier(plain.table), change=change
                ),
                [*args, user],
            )  # fmt: skip
        calls = any(m.session is not None for m in s.memories)
        for t in added:  # as `bench.retrieval.run` loads a store
            meta = {"memory_id": t.memory_id, "store_id": s.store_id, "timestamp": t.timestamp,
                    "session_id": t.session if calls else None, "seq": 0 if calls else None,
                    "bench_store": stamp}  # fmt: skip
            store.add_raw(user, t.text, metadata={k: v for k, v in meta.items() if v is not None})


# ------------------------------------------------------------------ running
def _service(store: MemoryStore, mode: str) -> MemoryService:
    """The product's service over the bench store, with the cut at the junk floor (the
    sweep cuts higher), in the mode asked."""
    settings = store.settings.tuned(retrieval_threshold=min(JUNK_FLOOR, store.settings.retrieval.threshold))
    settings = _with_mode(settings, MemoryMode.GATED if mode == "gated" else MemoryMode.NORMAL)
    return MemoryService(store, settings)


def _with_mode(settings: MemorySettings, mode: MemoryMode) -> MemorySettings:
    import dataclasses

    return dataclasses.replace(settings, mode=mode)


def run_file(
    data: RetrievalFile,
    store: MemoryStore,
    *,
    variant: str,
    mode: str,
    small_talk: dict[str, Sequence[str]],
    limit: int | None,
) -> list[Row]:
    service = _service(store, mode)
    stores = [s.store_id for s in data.stores]
    users = [rs.user_for(s) for s in stores]
    store.session_index.keep = max(store.session_index.keep, len(users))
    for user in users:
        store.open_session_index(user)
        service.retriever.prepare(user)
    names = rb.memory_ids(store, users)
    now = rb.asked_at(data)
    queries = list(data.queries[:limit] if limit else data.queries)
    lang = "zh" if data.language.startswith("zh") else "en"
    rows: list[Row] = []

    def ask(kind: str, store_id: str, text: str, category: str, relevant: Iterable[str], context=(), when=None) -> None:
        started = time.perf_counter()
        records = service.recall_sync(rs.user_for(store_id), text, list(context), now=when)
        ms = (time.perf_counter() - started) * 1000
        ids = [
            frozenset({str(r.metadata.get("memory_id")), *(names.get(c, c) for c in r.metadata.get("copies") or ())})
            for r in records
        ]
        rows.append(Row(data.name, variant, mode, kind, store_id, lang, category, frozenset(relevant), records, ids,
                        ms))  # fmt: skip

    for q in queries:
        context, when = rb.earlier_turns(q), now.get(q.id)
        ask("own", q.store_id, q.query, q.category, q.relevant, context, when)
        if len(stores) > 1:  # the same words asked of the next store, where nothing is relevant
            other = stores[(stores.index(q.store_id) + 1) % len(stores)]
            ask("foreign", other, q.query, q.category, (), context, when)
    for line_lang, lines in small_talk.items():
        for store_id in stores:
            for line in lines:
                ask("smalltalk", store_id, line, f"smalltalk_{line_lang}", ())
                rows[-1].lang = line_lang
    return rows


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


# -------------------------------------------------------------------- main
def _find(name: str) -> Path:
    path = Path(name)
    if path.exists():
        return path
    for d in EVAL_DIRS:
        if (d / name).exists():
            return d / name
    raise SystemExit(f"no evaluation file {name!r} in {', '.join(str(d) for d in EVAL_DIRS)}")


def load_small_talk(paths: Sequence[Path]) -> dict[str, list[str]]:
    """Lines by language from JSON files: a list of strings, or of {"text", "lang"/"language"},
    or an object whose "lines" (or "items") is such a list."""
    out: dict[str, list[str]] = defaultdict(list)
    for path in paths:
        doc = json.loads(path.read_text(encoding="utf-8"))
        items = doc.get("lines") or doc.get("items") if isinstance(doc, dict) else doc
        for item in items or []:
            text = item if isinstance(item, str) else item.get("text", "")
            lang = "en" if isinstance(item, str) else str(item.get("lang") or item.get("language") or "")
            if isinstance(item, str) or not lang:
                lang = "zh" if any("\u4e00" <= ch <= "\u9fff" for ch in text) else "en"
            if text.strip():
                out["zh" if lang.startswith("zh") else "en"].append(text)
    return dict(out)


def _cell(d: dict[str, Any] | None) -> str:
    if not d:
        return f"{'-':>19}"
    low, high = d["ci95"]
    return f"{d['mean']:>6.3f} [{low:.2f}-{high:.2f}]"


def print_table(groups: dict[str, dict[str, Any]]) -> None:
    cols = ("answer", "noise", "n_mem", "own_q", "tokens", "empty_foreign", "empty_smalltalk_en",
            "empty_smalltalk_zh")  # fmt: skip
    print(f"\n{'block (file / variant / mode / category)':<52} {'n':>5} " + " ".join(f"{c:>19}" for c in cols))
    for name, summ in groups.items():
        print(f"{name:<52} {summ.get('n', 0):>5} " + " ".join(_cell(summ.get(c)) for c in cols))


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.retrieval.block", description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", nargs="+", default=list(DEFAULT_FILES), help="retrieval files (names or paths)")
    ap.add_argument("--modes", nargs="+", choices=("normal", "gated"), default=["normal", "gated"])
    ap.add_argument("--part", choices=PARTS, default="all")
    ap.add_argument("--limit-queries", type=int, default=None, help="only the first N queries of each file")
    ap.add_argument("--max-stores", type=int, default=None, help="only the first N stores of each file")
    ap.add_argument("--small-talk", nargs="*", type=Path, default=[], help="small-talk files (default: a dev list)")
    ap.add_argument("--self-questions", action="store_true", help="also the self-question variant of each file")
    ap.add_argument("--sweep", action="store_true", help="the cut's curve and its cross-validated choice")
    ap.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    ap.add_argument("--embed-cache", type=Path, default=None)
    ap.add_argument("--rows-out", type=Path, default=None, help="write every block's scores here (JSON lines)")
    args = ap.parse_args(argv)

    small_talk = (
        load_small_talk(args.small_talk) if args.small_talk else {k: list(v) for k, v in DEV_SMALL_TALK.items()}
    )
    shipped = load_settings(rs.bench_env(args.data_dir), dotenv=False)
    cut = Cut(shipped.retrieval.threshold)
    max_chars = shipped.recall_max_chars
    cache = args.embed_cache or args.data_dir / "passages.sqlite"
    variants = (rs.PLAIN, rs.SELFQ) if args.self_questions else (rs.PLAIN,)
    rows: list[Row] = []
    started = time.perf_counter()
    for name in args.data:
        try:
            data = first_stores(select_retrieval(load_retrieval(_find(name)), args.part), args.max_stores)
        except EvalDataError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        now = rb.asked_at(data)
        plain = rs.open_store(data, args.data_dir, variant=rs.PLAIN)
        try:
            rs.load(plain, data, cache=cache)
            for mode in args.modes:
                for variant in variants if mode == "normal" else (rs.PLAIN,):  # GATED stores no questions
                    tag = variant if mode == "normal" else "gated"
                    store = plain if tag == rs.PLAIN else rs.open_store(data, args.data_dir, variant=tag)
                    try:
                        extra = self_questions(data, now) if variant == rs.SELFQ else {}
                        category = FACT_CATEGORY if mode == "gated" else None
                        if store is not plain:
                            seed(plain, store, data, extra, category)
                            rs.load(store, data, cache=cache, extra=extra, category=category)
                        got = run_file(data, store, variant=variant, mode=mode, small_talk=small_talk,
                                       limit=args.limit_queries)  # fmt: skip
                    finally:
                        if store is not plain:
                            store.close()
                    rows += got
                    own = [r for r in got if r.kind == "own"]
                    print(f"  {data.name} {variant} {mode}: {len(got)} look-ups, answer in block "
                          f"{statistics.fmean(figures(r, cut, max_chars)['answer'] for r in own):.3f} "
                          f"({time.perf_counter() - started:.0f}s)", file=sys.stderr)  # fmt: skip
        finally:
            plain.close()
    if args.rows_out is not None:
        with args.rows_out.open("w", encoding="utf-8") as out:
            for r in rows:
                out.write(json.dumps({"file": r.file, "variant": r.variant, "mode": r.mode, "kind": r.kind,
                                      "store": r.store, "lang": r.lang, "category": r.category,
                                      "relevant": sorted(r.relevant), "ms": round(r.ms, 2),
                                      "records": [[sorted(i), round(x.score, 4), tells_nothing(x.text), len(x.text)]
                                                  for i, x in zip(r.ids, r.records, strict=True)]},
                                     ensure_ascii=False) + "\n")  # fmt: skip

    model = local_model()

    def count_tokens(text: str) -> int:
        return int(model.token_count(text, False))

    groups: dict[str, dict[str, Any]] = {}

    def group(name: str, sel: list[Row]) -> None:
        if sel:
            groups[name] = summarise(sel, cut, max_chars, count_tokens)

    for mode in args.modes:
        for variant in variants:
            group(f"all / {variant} / {mode}", [r for r in rows if r.mode == mode and r.variant == variant])
            for file in dict.fromkeys(r.file for r in rows):
                sel = [r for r in rows if r.mode == mode and r.variant == variant and r.file == file]
                group(f"{file} / {variant} / {mode}", sel)
                if file.startswith("locomo") and variant == rs.PLAIN:
                    for category in sorted({r.category for r in sel if r.kind == "own"}):
                        group(f"  {category} / {mode}", [r for r in sel if r.kind == "own" and r.category == category])
    print(f"\nthe shipped block: relevance cut {cut.threshold}, MEMORY_TOP_K {shipped.recall_top_k}, "
          f"{max_chars} characters; 95% bootstrap intervals (over stores where there are several)")  # fmt: skip
    print_table(groups)
    sweep: dict[str, Any] = {}
    if args.sweep:
        normal = [r for r in rows if r.mode == "normal" and r.variant == rs.PLAIN]
        sweep = {"curve": curve(normal, max_chars), "cv": cross_validate(normal, max_chars),
                 "cv_per_lang": cross_validate(normal, max_chars, per_lang=True),
                 "chosen_on_all": choose(normal, max_chars).threshold,
                 "chosen_on_all_per_lang": dict(choose(normal, max_chars, per_lang=True).by_lang)}  # fmt: skip
        print("\nthe cut's curve (NORMAL, plain files; all files pooled)")
        print(f"{'cut':>6} {'answer':>8} {'n_mem':>7} {'empty foreign':>14} {'empty small talk':>17}")
        for p in sweep["curve"]:
            print(f"{p['cut']:>6.2f} {p.get('answer', 0):>8.3f} {p.get('n_mem', 0):>7.2f} "
                  f"{p.get('empty_foreign', 0):>14.3f} {p.get('empty_smalltalk', 0):>17.3f}")  # fmt: skip
        for key in ("cv", "cv_per_lang"):
            print(f"\ncross-validated ({key}): cuts chosen per fold {sweep[key]['cuts']}")
            for file, fig in sweep[key]["held_out"].items():
                print(f"  {file:<20} " + "  ".join(f"{k} {_cell(v)}" for k, v in fig.items()))
        print(f"\nchosen on all the data: {sweep['chosen_on_all']} (per language {sweep['chosen_on_all_per_lang']})")
    load_avg = [round(x, 2) for x in os.getloadavg()]
    print(f"\nload average {load_avg[0]} {load_avg[1]} {load_avg[2]}; {time.perf_counter() - started:.0f}s")
    print(json.dumps({"cut": cut.threshold, "top_k": shipped.recall_top_k, "max_chars": max_chars,
                      "small_talk": {k: len(v) for k, v in small_talk.items()}, "load_avg": load_avg,
                      "blocks": groups, **({"sweep": sweep} if sweep else {})}, ensure_ascii=False))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
