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
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from bench.common.evaldata import EvalDataError, RetrievalFile, load_retrieval
from bench.common.holdout import PARTS, select_retrieval
from bench.common.paths import DATA as DATA_DIR
from bench.retrieval import run as rb
from bench.retrieval import stores as rs
from bench.retrieval.block_report import (
    JUNK_FLOOR,
    Cut,
    Row,
    cell,
    choose,
    cross_validate,
    curve,
    figures,
    print_table,
    summarise,
)
from bench.retrieval.self_questions import self_questions
from memory.language.asking import tells_nothing
from memory.service import MemoryService
from memory.settings import MemoryMode, MemorySettings, load_settings
from memory.storage.embedder import local_model
from memory.storage.store import MemoryStore

EVAL_DIRS = (Path("/work/shared/eval"), DATA_DIR / "eval")
DEFAULT_FILES = ("locomo.dev.json", "memdaily.dev.json", "madial_en.dev.json", "madial_zh.dev.json")
DEFAULT_DATA_DIR = Path("/tmp/bench-block")
FACT_CATEGORY = "personal_facts"  # GATED: the file's memories stored as facts of this durable category
# Small talk for development (the blind and tuning sets come with --small-talk).
DEV_SMALL_TALK: dict[str, tuple[str, ...]] = {
    "en": ("ok thanks", "how's the weather today?", "hello there", "good morning!", "haha that's funny",
           "sounds good", "bye for now", "can you hear me?", "let's talk later", "nice, go on",
           "what time is it?", "tell me a joke"),
    "zh": ("好的", "嗯", "谢谢", "再见", "今天天气怎么样？", "你好", "哈哈哈", "没问题", "早上好", "听得到吗？",
           "讲个笑话吧", "现在几点了？"),
}  # fmt: skip


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
                print(f"  {file:<20} " + "  ".join(f"{k} {cell(v)}" for k, v in fig.items()))
        print(f"\nchosen on all the data: {sweep['chosen_on_all']} (per language {sweep['chosen_on_all_per_lang']})")
    load_avg = [round(x, 2) for x in os.getloadavg()]
    print(f"\nload average {load_avg[0]} {load_avg[1]} {load_avg[2]}; {time.perf_counter() - started:.0f}s")
    print(json.dumps({"cut": cut.threshold, "top_k": shipped.recall_top_k, "max_chars": max_chars,
                      "small_talk": {k: len(v) for k, v in small_talk.items()}, "load_avg": load_avg,
                      "blocks": groups, **({"sweep": sweep} if sweep else {})}, ensure_ascii=False))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
