"""Facts over time: does GATED recall the value that held at the time a question asks about?

    uv run python -m bench.retrieval.run --set temporal [--data FILE] [--k 5] [--limit-stories N]

(`bench.retrieval.run` hands `--set temporal` to this module; `python -m bench.retrieval.temporal` is the
same.) Data: `bench/data/temporal.json` (hand-written, 32 stories, 128 questions about the
past in English and Chinese and 64 about now; its format is in the file's `format` key).
Each story is one user. Its turns are written in order, each at its own time, through
GATED's write path as it ships: `MemoryService.remember` with the real `Gatekeeper` (the
pre-filter and its learned stage decide; a skipped turn stores nothing, as in the product),
the read of the user's known facts, the store's supersede under the per-user lock, Mem0 on
an embedded Postgres. Only the extraction model is scripted: it returns the facts the file
lists for the turn (the suite's `scripted_extraction` style), with the slot of the fact it
replaces. Corrections ("No, I said Porto, not Faro.") are told apart by the turn's words.

Each question is then asked at the file's `asked_at` through the retrieval GATED runs
(`Retriever.retrieve` with the durable categories), and scored:

- hit@1 / hit@k: the fact that held at the time asked about is first / in the top k
  (compared as text, `canonical_key`); per language, with 95% cluster-bootstrap intervals
  over stories; questions about the past (`time: past`) and about now apart;
- span shown: the past answers recalled first that carry their span (`valid_until`);
- recall trigger: the share of questions GATED looks up memory for at all (`needs_memory`);
- write path: turns the pre-filter skipped, facts stored, past values kept.

The last line is one JSON object with every figure (`hit@1_past_en`, `hit@1_past_zh`, ...).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.common import stats
from bench.common.paths import DATA as DATA_DIR
from harness.scripted import LLMRequest, RecordingLLM
from memory.gatekeeper.gatekeeper import Gatekeeper
from memory.language.recall_intent import needs_memory
from memory.service import MemoryService
from memory.settings import MemoryMode, load_settings
from memory.storage.store import MemoryStore
from memory.types import Turn, canonical_key, parse_time

DATA = DATA_DIR / "temporal.json"
DEFAULT_DATA_DIR = Path("/tmp/bench-memory")  # as bench.retrieval.run
COLLECTION = "bench_temporal"


class TemporalDataError(ValueError):
    """The temporal file does not match its format (which story, which key)."""


@dataclass(frozen=True)
class Story:
    id: str
    language: str
    turns: tuple[dict[str, Any], ...]
    questions: tuple[dict[str, Any], ...]


def load(path: Path) -> tuple[datetime, list[Story]]:
    """The file's time of asking and its stories, every key checked up front."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise TemporalDataError(f"{path}: {exc}") from exc
    asked = parse_time(doc.get("asked_at"))
    if asked is None:
        raise TemporalDataError(f"{path}: 'asked_at' must be an ISO time")
    stories = []
    for s in doc.get("stories") or []:
        where = f"{path}: story {s.get('id')!r}"
        if s.get("language") not in ("en", "zh"):
            raise TemporalDataError(f"{where}: 'language' must be 'en' or 'zh'")
        for t in s.get("turns") or []:
            if parse_time(t.get("at")) is None or not isinstance(t.get("text"), str):
                raise TemporalDataError(f"{where}: every turn needs 'at' (ISO time) and 'text'")
            for f in t.get("facts", []):
                if not {"text", "category"} <= set(f):
                    raise TemporalDataError(f"{where}: a fact needs 'text' and 'category'")
        for q in s.get("questions") or []:
            if q.get("time") not in ("past", "now") or not q.get("text") or not q.get("answer"):
                raise TemporalDataError(f"{where}: a question needs 'text', 'answer' and 'time' (past|now)")
        stories.append(Story(str(s["id"]), s["language"], tuple(s["turns"]), tuple(s["questions"])))
    if not stories:
        raise TemporalDataError(f"{path}: no stories")
    return asked, stories


def extraction(facts_by_text: dict[str, list[dict[str, Any]]]) -> RecordingLLM:
    """The scripted extraction model: the facts the file lists for the turn it is shown."""

    def respond(request: LLMRequest) -> str:
        payload = json.loads(request.messages[-1][1])
        return json.dumps({"facts": facts_by_text.get(payload["latest_user_message"], [])}, ensure_ascii=False)

    return RecordingLLM(respond, keep_context=False)


@dataclass
class Written:
    turns: int = 0
    skipped: int = 0  # turns the pre-filter skipped (their facts are not stored)
    facts: int = 0
    past: int = 0  # superseded values kept with their span


def user_for(story: Story) -> str:
    return f"bench-temporal:{story.id}"


async def write_story(service: MemoryService, story: Story, written: Written) -> None:
    """The story's turns, in order, through GATED's write path (a fresh user each run)."""
    user = user_for(story)
    service.store.rows.delete_user(user)
    service.gatekeeper = Gatekeeper(extraction({t["text"]: t.get("facts", []) for t in story.turns}))
    for i, t in enumerate(story.turns):
        context = (story.turns[i - 1]["text"],) if i else ()
        turn = Turn(user_id=user, session_id=f"{story.id}-s{i}", turn_id=f"{story.id}-t{i}", text=t["text"],
                    created_at=t["at"], context=context, mode=MemoryMode.GATED.value)  # fmt: skip
        report = await service.remember(turn)
        written.turns += 1
        if report.gate is not None and report.gate.decision.action.value == "skip":
            written.skipped += 1
    rows = service.store.list_user(user)
    written.facts += sum(1 for r in rows if not r.metadata.get("valid_until"))
    written.past += sum(1 for r in rows if r.metadata.get("valid_until"))


@dataclass
class Asked:
    story: Story
    question: dict[str, Any]
    texts: list[str]  # recalled, best first
    spans: list[bool]  # each recalled one carries `valid_until`
    triggered: bool

    def hit(self, k: int) -> bool:
        want = canonical_key(self.question["answer"])
        return any(canonical_key(t) == want for t in self.texts[:k])


def ask(service: MemoryService, stories: Sequence[Story], asked_at: datetime, k: int) -> list[Asked]:
    out = []
    for story in stories:
        for q in story.questions:
            records = service.retriever.retrieve(user_for(story), q["text"], top_k=k,
                                                 categories=service.recall_categories, now=asked_at)  # fmt: skip
            spans = [bool(r.metadata.get("valid_until")) for r in records]
            out.append(Asked(story, q, [r.text for r in records], spans, needs_memory(q["text"])))
    return out


@dataclass
class Figure:
    n: int
    value: float
    ci95: tuple[float, float] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def figure(asked: Sequence[Asked], test: Any) -> Figure:
    values = [float(test(a)) for a in asked]
    if not values:
        return Figure(0, float("nan"))
    groups = [a.story.id for a in asked]
    ci = stats.mean_interval(values, groups=groups) if len(set(groups)) > 1 else stats.mean_interval(values)
    return Figure(len(values), sum(values) / len(values), ci)


def summarise(asked: Sequence[Asked], k: int) -> dict[str, Figure]:
    out: dict[str, Figure] = {}
    for time in ("past", "now"):
        for lang in ("en", "zh", "all"):
            part = [a for a in asked if a.question["time"] == time and lang in (a.story.language, "all")]
            out[f"hit@1_{time}_{lang}"] = figure(part, lambda a: a.hit(1))
            out[f"hit@{k}_{time}_{lang}"] = figure(part, lambda a: a.hit(k))
            out[f"trigger_{time}_{lang}"] = figure(part, lambda a: a.triggered)
    first_past = [a for a in asked if a.question["time"] == "past" and a.hit(1)]
    out["span_shown_past"] = figure(first_past, lambda a: a.spans[0])
    now_first = [a for a in asked if a.question["time"] == "now" and a.texts]
    out["past_value_first_now"] = figure(now_first, lambda a: a.spans[0])  # a past value answering "now": wrong
    return out


def print_table(summary: dict[str, Figure], k: int, written: Written, misses: list[Asked]) -> None:
    print(f"temporal: {written.turns} turns written through GATED's write path ({written.skipped} skipped by the "
          f"pre-filter), {written.facts} facts hold now, {written.past} past values kept")  # fmt: skip
    print(f"  {'questions':<10} {'lang':<4} {'n':>4} {'hit@1':>6} {'95% (stories)':>15} {f'hit@{k}':>6} {'trigger':>7}")
    for time in ("past", "now"):
        for lang in ("en", "zh", "all"):
            h1, hk, tr = (summary[f"{m}_{time}_{lang}"] for m in ("hit@1", f"hit@{k}", "trigger"))
            ci = f"{h1.ci95[0]:.3f}-{h1.ci95[1]:.3f}" if h1.ci95 else "-"
            print(f"  {time:<10} {lang:<4} {h1.n:>4} {h1.value:>6.3f} {ci:>15} {hk.value:>6.3f} {tr.value:>7.3f}")
    s, p = summary["span_shown_past"], summary["past_value_first_now"]
    print(f"  past answers recalled first with their span: {s.value:.3f} of {s.n}; "
          f"questions about now answered first by a past value: {p.value:.3f} of {p.n}")  # fmt: skip
    for a in misses:
        got = a.texts[0] if a.texts else "(nothing)"
        print(f"  miss {a.question['id']}: {a.question['text']!r} -> {got!r} (want {a.question['answer']!r})")


def run(path: Path, data_dir: Path, k: int, limit: int | None) -> dict[str, Any]:
    asked_at, stories = load(path)
    stories = stories[:limit] if limit else stories
    env = {key: v for key, v in os.environ.items() if key.startswith(("MEMORY_", "OPENAI_"))}
    env.pop("MEMORY_DATABASE_URL", None)  # never a real database
    env.update(MEMORY_DATA_DIR=str(data_dir), MEMORY_COLLECTION=COLLECTION, MEM0_SETTING="GATED")
    settings = load_settings(env, dotenv=False)
    store = MemoryStore.open(settings)
    try:
        service = MemoryService(store, dataclasses.replace(settings, mode=MemoryMode.GATED))
        written = Written()

        async def write_all() -> None:
            for story in stories:
                await write_story(service, story, written)

        asyncio.run(write_all())
        asked = ask(service, stories, asked_at, k)
    finally:
        store.close()
    summary = summarise(asked, k)
    misses = [a for a in asked if not a.hit(1)]
    print_table(summary, k, written, misses)
    load_avg = [round(x, 2) for x in os.getloadavg()]
    print(f"\nload average {load_avg[0]} {load_avg[1]} {load_avg[2]}")
    out: dict[str, Any] = {"bench": "retrieval", "set": "temporal", "k": k, "stories": len(stories),
                           "questions": len(asked), "load_avg": load_avg, **dataclasses.asdict(written)}  # fmt: skip
    for name, f in summary.items():
        out[name] = round(f.value, 4) if f.n else None
        out[f"{name}_n"] = f.n
        if f.ci95:
            out[f"{name}_ci95"] = [round(x, 4) for x in f.ci95]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m bench.retrieval.run --set temporal", description=__doc__.split("\n\n")[0]
    )
    ap.add_argument("--data", type=Path, default=DATA, help=f"a temporal stories file (default {DATA.name})")
    ap.add_argument("--k", type=int, default=5, help="memories recalled per question (default 5, MEMORY_TOP_K)")
    ap.add_argument("--limit-stories", type=int, default=None, help="only the first N stories")
    ap.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR, help="bench data dir (not a user's)")
    args = ap.parse_args(argv)
    try:
        out = run(args.data, args.data_dir, args.k, args.limit_stories)
    except TemporalDataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(out, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
