"""Do forms and shared contexts slow a reply down? `python -m bench.latency.working_memory`.

Drives a real `AgentSession` (harness/scripted: scripted streaming STT with interims and a
preflight, a fake LLM with a fixed time to first token, instant TTS) wired as the worker
wires it (`memory.working.first_agent`: memory, working memory, the form RPC on a fake
room, the shared-context tools) over the real embedded Postgres and local embedder.
Three scenarios, interleaved round by round in one run:

- `off`: a plain `Agent`, no memory at all (the baseline).
- `on`: the worker's agent with three forms in working memory, nothing else going on.
- `on + forms`: the same, and while each reply is in progress (from the moment its
  LLM request arrives) the frontend submits forms over RPC, concurrently with the reply.
- `on + notes`: the same, with another agent appending notes to the shared context
  (real Postgres writes) while each reply is in progress.

Per turn: end of speech -> LLM request, LLM request -> first audio frame of the reply
(the reply in progress), end of speech -> first audio frame. Reported: what activity
adds to a reply in progress (`on + activity` minus `on`, paired by turn, with a
bootstrap interval), what memory adds end to end (`on` minus `off`), LLM requests per
user turn, how long the form handler runs on the event loop, and how long a form
submission and a context update take from the caller's side.
Prints a table and, last, one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import logging
import os
import platform
import random
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from livekit.agents import Agent

from bench.common.stats import mean_interval, paired
from harness.room import FakeRoom
from harness.scripted import LLMRequest, RecordingLLM, VoiceHarness
from harness.scripted.fake_stt import SpeechEventType
from memory.language import lexical
from memory.livekit.session import MemorySession
from memory.ops import heap
from memory.prompts import load_prompt
from memory.service import MemoryService
from memory.settings import MemoryMode, load_settings
from memory.storage import embedder as embedder_mod
from memory.storage.store import MemoryStore
from memory.working import SUBMIT_FORM, first_agent

TURNS = [
    "I need help with my flat, the landlord kept my deposit",
    "这个周末我想去北京，帮我看看行程",
    "The lease ended in March and I moved out on time",
    "我有搬走那天拍的照片",
    "What should I write in the letter to the landlord?",
    "顺便提醒我一下周末的天气",
    "Can you summarise what we have so far?",
    "好的，谢谢你",
]
FORMS = [
    {"title": "行程安排", "fields": {"destination": "北京", "date": "周末", "people": 2}},
    {"title": "偏好设置", "fields": {"theme": "dark", "language": "zh"}},
    {"title": "tenancy", "fields": {"city": "Berlin", "deposit_eur": 1500, "lease_end": "2026-03-31"}},
]
USER = "bench-working-user"


@dataclass
class Turn:
    to_request_ms: float
    reply_ms: float  # LLM request -> first audio frame: the reply in progress
    to_audio_ms: float
    requests: int


@dataclass
class Scenario:
    name: str
    turns: list[Turn] = field(default_factory=list)
    submit_ms: list[float] = field(default_factory=list)
    handler_ms: list[float] = field(default_factory=list)  # the RPC handler's own time on the loop
    update_ms: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


async def run(name: str, store: MemoryStore, turns: int, *, ttft: float, working: bool,
              forms_per_reply: int = 0, notes_per_reply: int = 0) -> Scenario:  # fmt: skip
    result = Scenario(name)
    room = FakeRoom()
    session_memory: MemorySession | None = None
    pending: list[asyncio.Future[asyncio.Future[Any]]] = []
    ctx_id: list[str] = []

    async def burst() -> None:
        """What the frontend and another agent do while a reply is in progress."""

        async def submit(i: int) -> None:
            form = {"title": f"form {i % 4}", "fields": {"step": i, "note": "进行中" * 10}}
            t0 = time.perf_counter()
            try:
                await room.local_participant.invoke(SUBMIT_FORM, json.dumps(form, ensure_ascii=False), caller=USER)
            except Exception as exc:  # noqa: BLE001 - counted, not hidden
                result.errors.append(f"submit: {exc!r}")
            result.submit_ms.append((time.perf_counter() - t0) * 1000)

        async def note(i: int) -> None:
            t0 = time.perf_counter()
            try:
                await workspace.update_context(ctx_id[0], "specialist", f"note {i}: the caller confirmed a detail")
            except Exception as exc:  # noqa: BLE001 - any failure here is reported, never raised
                result.errors.append(f"update: {exc!r}")
            result.update_ms.append((time.perf_counter() - t0) * 1000)

        await asyncio.gather(*(submit(i) for i in range(forms_per_reply)), *(note(i) for i in range(notes_per_reply)))

    async def respond(request: LLMRequest) -> str:
        if forms_per_reply or notes_per_reply:
            # Somewhere in the reply in progress: while the LLM thinks, or as its first
            # words go to TTS (a seeded draw); never awaited by the reply itself.
            delay = rng.uniform(0.0, ttft + 0.1)
            started = asyncio.get_running_loop().create_future()
            asyncio.get_running_loop().call_later(delay, lambda: started.set_result(asyncio.ensure_future(burst())))
            pending.append(started)
        await asyncio.sleep(ttft)
        return "Sure, I can help with that."

    rng = random.Random(len(name) * 1000 + turns)
    llm = RecordingLLM(respond, keep_context=False)  # time to first token: in `respond`
    if working:
        settings = dataclasses.replace(store.settings, mode=MemoryMode.NORMAL, context_max_chars=100_000)
        session_memory = MemorySession(MemoryService(store, settings), user_id=USER)
        agent: Agent = first_agent(room, session_memory, store, USER)
        workspace = agent.workspace
        handler = workspace.keep_form  # the part on the event loop (reading the payload is on a thread)

        def timed_keep(form: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return handler(form)
            finally:
                result.handler_ms.append((time.perf_counter() - t0) * 1000)

        workspace.keep_form = timed_keep
        ctx_id.append(await workspace.create_context("receptionist", "Landlord kept the deposit"))
        for form in FORMS:
            await room.local_participant.invoke(SUBMIT_FORM, json.dumps(form, ensure_ascii=False), caller=USER)
    else:
        agent = Agent(instructions=load_prompt("system"))
    harness = VoiceHarness(agent, llm=llm, preflight=True, timeout=30.0)
    if session_memory is not None:
        session_memory.attach(harness.session)
    async with harness:
        for i in range(turns):
            text = TURNS[i % len(TURNS)]
            n_req, n_emit, n_ev = llm.count, len(harness.stt.emitted), len(harness.events)
            words = text.split()
            interims = [" ".join(words[: k + 1]) for k in range(0, len(words), max(1, len(words) // 3))]
            await harness.user_says(text, interims, interim_gap=0.05)
            eos = next(t for kind, t, _ in harness.stt.emitted[n_emit:] if kind == SpeechEventType.END_OF_SPEECH)
            reqs = llm.requests[n_req:]
            speaking = next(e.at for e in harness.events[n_ev:]
                            if e.name == "agent_state_changed" and e.payload["new"] == "speaking")  # fmt: skip
            used = reqs[-1].arrived_at  # the request whose reply was spoken (a preemptive one, usually)
            result.turns.append(Turn((used - eos) * 1000, (speaking - used) * 1000, (speaking - eos) * 1000, len(reqs)))
            await asyncio.gather(*[await started for started in pending])
            pending.clear()
    if session_memory is not None:
        await session_memory.aclose(drain_timeout_s=5.0)
    return result


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))] if ordered else float("nan")


def compare(a: list[float], b: list[float]) -> dict[str, float]:
    """B minus A, paired by turn: mean with its 95% bootstrap interval, p50 and p95."""
    diffs = [y - x for x, y in zip(a, b, strict=True)]
    p = paired(a, b)
    return {"mean": round(p.diff, 2), "ci_low": round(p.low, 2), "ci_high": round(p.high, 2),
            "p50": round(pct(diffs, 50), 2), "p95": round(pct(diffs, 95), 2)}  # fmt: skip


async def amain(args: argparse.Namespace) -> dict[str, Any]:
    data_dir = Path(args.data_dir or tempfile.mkdtemp(prefix="bench-working-"))
    env = {"MEMORY_DATA_DIR": str(data_dir), "MEMORY_COLLECTION": "bench_working"}
    store = MemoryStore.open(load_settings(env, dotenv=False))
    embedder_mod.local_model()
    lexical.warm_up()
    heap.settle()  # as the worker's prewarm leaves a job process
    specs: list[tuple[str, bool, int, int]] = [
        ("off", False, 0, 0),
        ("on", True, 0, 0),
        ("on + forms", True, args.forms, 0),
        ("on + notes", True, 0, args.notes),
    ]  # fmt: skip
    # First-call costs are no turn's.
    await run("warm-up", store, 3, ttft=args.ttft, working=True, forms_per_reply=args.forms, notes_per_reply=args.notes)
    merged = {spec[0]: Scenario(spec[0]) for spec in specs}
    for r in range(args.rounds):
        for name, working, forms, notes in specs:
            print(f"round {r + 1}/{args.rounds}: {name}, {args.turns} turns ...", flush=True)
            res = await run(name, store, args.turns, ttft=args.ttft, working=working, forms_per_reply=forms,
                            notes_per_reply=notes)  # fmt: skip
            m = merged[name]
            m.turns += res.turns
            m.submit_ms += res.submit_ms
            m.handler_ms += res.handler_ms
            m.update_ms += res.update_ms
            m.errors += res.errors
            heap.settle()
    MemoryService(store, store.settings).forget(USER)
    store.close()
    off, on, forms, notes = (merged[spec[0]] for spec in specs)

    def reply(s: Scenario) -> list[float]:
        return [t.reply_ms for t in s.turns]

    def audio(s: Scenario) -> list[float]:
        return [t.to_audio_ms for t in s.turns]

    summary: dict[str, Any] = {
        "turns_per_scenario": len(on.turns),
        "forms_added_reply_ms": compare(reply(on), reply(forms)),
        "notes_added_reply_ms": compare(reply(on), reply(notes)),
        "forms_added_end_to_end_ms": compare(audio(on), audio(forms)),
        "notes_added_end_to_end_ms": compare(audio(on), audio(notes)),
        "memory_added_end_to_end_ms": compare(audio(off), audio(on)),
        "form_handler_ms_p50": round(pct(forms.handler_ms, 50), 4),
        "form_handler_ms_max": round(max(forms.handler_ms, default=float("nan")), 4),
        "form_submit_ms_p50": round(pct(forms.submit_ms, 50), 3),
        "form_submit_ms_p95": round(pct(forms.submit_ms, 95), 3),
        "context_update_ms_p50": round(pct(notes.update_ms, 50), 2),
        "context_update_ms_p95": round(pct(notes.update_ms, 95), 2),
        "forms_submitted": len(forms.submit_ms),
        "context_updates": len(notes.update_ms),
        "llm_requests_per_turn": max(
            round(sum(t.requests for t in s.turns) / max(1, len(s.turns)), 3) for s in (on, forms, notes)
        ),  # fmt: skip
        "errors": len(off.errors + on.errors + forms.errors + notes.errors),
        "scenarios": {},
    }
    for s in (off, on, forms, notes):
        reply = [t.reply_ms for t in s.turns]
        summary["scenarios"][s.name] = {
            "to_request_ms_p50": round(pct([t.to_request_ms for t in s.turns], 50), 2),
            "reply_ms_p50": round(pct(reply, 50), 2),
            "reply_ms_p95": round(pct(reply, 95), 2),
            "reply_ms_mean_ci": [round(x, 2) for x in mean_interval(reply)],
            "to_audio_ms_p50": round(pct([t.to_audio_ms for t in s.turns], 50), 2),
            "to_audio_ms_p95": round(pct([t.to_audio_ms for t in s.turns], 95), 2),
            "llm_requests_per_turn": round(sum(t.requests for t in s.turns) / max(1, len(s.turns)), 3),
        }
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=30, help="turns per scenario and round (default 30)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the three scenarios, interleaved (default 3)")
    parser.add_argument("--ttft", type=float, default=0.2, help="the fake LLM's time to first token, s (default 0.2)")
    parser.add_argument("--forms", type=int, default=5, help="forms submitted during each reply (default 5)")
    parser.add_argument("--notes", type=int, default=2, help="context notes appended during each reply (default 2)")
    parser.add_argument("--data-dir", default=os.environ.get("BENCH_DATA_DIR"), help="default: a new temporary one")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    s = asyncio.run(amain(args))
    print()
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}; "
        f"LLM time to first token {args.ttft * 1000:g} ms; during each reply: {args.forms} forms ('on + forms'), "
        f"{args.notes} context notes ('on + notes')"
    )
    header = (
        f"{'scenario':16} {'turns':>5} {'EOS->req p50':>13} {'reply p50':>10} {'reply p95':>10} "
        f"{'EOS->audio p50':>15} {'p95':>8} {'req/turn':>9}"
    )
    print(header)
    print("-" * len(header))
    for name, v in s["scenarios"].items():
        print(f"{name:16} {s['turns_per_scenario']:>5} {v['to_request_ms_p50']:>11.1f}ms {v['reply_ms_p50']:>8.1f}ms "
              f"{v['reply_ms_p95']:>8.1f}ms {v['to_audio_ms_p50']:>13.1f}ms {v['to_audio_ms_p95']:>6.1f}ms "
              f"{v['llm_requests_per_turn']:>9.2f}")  # fmt: skip
    for what in ("forms", "notes"):
        a, e = s[f"{what}_added_reply_ms"], s[f"{what}_added_end_to_end_ms"]
        print(
            f"{what} during a reply add to it: mean {a['mean']:+.2f} ms [{a['ci_low']:+.2f}, {a['ci_high']:+.2f}], "
            f"p95 {a['p95']:+.2f} ms; end to end: mean {e['mean']:+.2f} ms [{e['ci_low']:+.2f}, {e['ci_high']:+.2f}]"
        )
    m = s["memory_added_end_to_end_ms"]
    print(f"memory + working memory add end to end: mean {m['mean']:+.2f} ms [{m['ci_low']:+.2f}, {m['ci_high']:+.2f}]")
    print(
        f"the form handler runs p50 {s['form_handler_ms_p50']:.4f} ms, "
        f"max {s['form_handler_ms_max']:.4f} ms on the loop; "
        f"a form submission takes p50 {s['form_submit_ms_p50']:.3f} ms, p95 {s['form_submit_ms_p95']:.3f} ms; "
        f"a context update p50 {s['context_update_ms_p50']:.2f} ms, p95 {s['context_update_ms_p95']:.2f} ms; "
        f"errors {s['errors']}"
    )
    print(json.dumps({"bench": "working_memory", "ttft_ms": args.ttft * 1000, "forms_per_reply": args.forms,
                      "notes_per_reply": args.notes, **s}, ensure_ascii=False))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
