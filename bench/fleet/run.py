"""A worker fleet on one shared Postgres, measured: `python -m bench.fleet.run`.

W worker processes (`bench.fleet.fleet_worker`), each forking its job processes from a
forkserver that preloads what `agent.py` preloads, each job process running `agent.prewarm`
and one call through `agent.entrypoint` with the harness's production-shaped pipeline (real
speech into the Silero VAD, STT, LLM and TTS fakes timed like OpenAI's), in GATED mode
. All of them reach ONE Postgres (the embedded server under `--data-dir`, holding
`--users` x `--per-user` background memories, 1,000 x 1,000 by default, loaded once by
COPY with synthetic vectors: bench/fleet/fleet_data.py) through PgBouncer in transaction mode.

Callers are some of those users. Calls are dispatched to the least-loaded worker, never
the one that served the caller's previous call: every caller hops. Each call: the greeting;
"Do you remember my lucky word?" (from the caller's second call on: the word of their last
call must reach the LLM: `cross_worker_recall`); "Please remember that my lucky word is ..."
(a fact in one slot, superseded call after call); "Remember that my seat for trip ... is ..."
(a fact in a slot of its own: each must end up stored exactly once: `turns_lost`,
`turns_duplicated`). Some callers make two calls at once on two workers, each changing the
same fact (`lost_updates`: the fact must end up as the later one said, in one row). Halfway,
one worker is killed with SIGKILL (its job processes with it) and started again on the same
data directory, as a pod restarts with its volume. Memory-off calls of the same scripts
(one every `--off-every`) run among them: `added_ms_p95` is the p95 of the first-audio
delay of memory-on turns minus that of memory-off turns, same run.

Also: the server connections Postgres holds for the fleet (`server_connections_max`,
sampled every 0.2 s) against PgBouncer's pool, the clients PgBouncer holds against the
documented budget (docs/scaling.md), memory per call as `bench.fleet.job_memory` measures it,
and how many retention runs the fleet made (once per fleet: 1).

`--smoke` is a small run (50 users x 400 memories, 16 calls) for a quick check. The loaded
database is kept under `--data-dir` and reused. Prints a table and, last, one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common.paths import ROOT as REPO_ROOT
from bench.fleet.fleet_data import clear_run_rows, ensure_loaded, user_id

ROOT = REPO_ROOT
TABLE = "fleet_memories"
# Audio fixtures (English, 2-3 s) the callers' lines are spoken with: the STT fake gives the
# line's words; the VAD hears this speech.
QUESTION_AUDIO, STATEMENT_AUDIO, SEAT_AUDIO = "u01", "u09", "u08"
_ADJ = ["amber", "silver", "quiet", "rapid", "golden", "velvet", "crimson", "hidden", "gentle", "bright", "frozen",
        "wild", "lucky", "misty", "sunny", "rusty", "cobalt", "ivory", "jade", "scarlet"]  # fmt: skip
_NOUN = ["falcon", "harbor", "meadow", "lantern", "comet", "willow", "otter", "canyon", "ember", "glacier", "heron",
         "orchard", "pepper", "quartz", "raven", "saddle", "tulip", "violin", "walnut", "zephyr"]  # fmt: skip
_COLOURS = ["teal", "maroon", "ochre", "lavender", "turquoise", "magenta", "olive", "indigo", "coral", "beige"]


# ------------------------------------------------------------------ the calls
@dataclass
class Call:
    call_id: str
    caller: str
    kind: str  # "regular", "contested", "off"
    memory: bool
    lines: list[dict[str, Any]]
    number: int = 0  # the caller's call number (regular calls)
    word: str | None = None  # the lucky word this call says
    expect: str | None = None  # the lucky word this call must recall
    seat_slot: str | None = None
    colour: str | None = None
    pair: int | None = None
    source: str | None = None  # a memory-off call: the memory-on call whose script it speaks
    replicas: bool = False  # its look-ups may read the replicas (--replicas: every other regular call)
    worker: int | None = None
    state: str = "waiting"  # waiting, running, done, dropped, failed
    turns: list[dict[str, Any]] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)
    cpu_s: float | None = None  # the job process's CPU time during the call
    cpu_s_by_thread: dict[str, float] = field(default_factory=dict)  # the same, per kind of thread
    reads: dict[str, int] | None = None  # its look-ups' reads on a replica / the primary (--replicas)
    uss_mb: float | None = None  # the job process's own memory at the call's end
    started_at: float = 0.0
    error: str | None = None

    def spec(self, stt: str) -> dict[str, Any]:
        return {"op": "call", "call_id": self.call_id, "caller": self.caller, "memory": self.memory, "stt": stt,
                "lines": self.lines, "replicas": self.replicas}  # fmt: skip


def _unique_words(rng: random.Random) -> Any:
    seen: set[str] = set()
    while True:
        word = f"{rng.choice(_ADJ)} {rng.choice(_NOUN)}"
        if word not in seen:
            seen.add(word)
            yield word


def plan_calls(args: argparse.Namespace, rng: random.Random) -> tuple[list[Call], list[str]]:
    """The run's calls: regular callers' calls in rounds, contested pairs, memory-off calls."""
    words = _unique_words(rng)
    pairs = args.contested_pairs
    regular_calls = args.calls - 2 * pairs
    callers = [user_id(i) for i in range(args.callers)]
    per_caller = max(1, regular_calls // len(callers))
    calls: list[Call] = []
    last_word: dict[str, str] = {}
    n = 0
    for number in range(per_caller + 1):
        for caller in callers:
            if n >= regular_calls:
                break
            word, tag = next(words), f"{number}{chr(97 + n % 26)}"
            seat = f"{rng.randint(1, 40)}{rng.choice('ABCDEF')}"
            slot = f"seat_trip_{n}"
            lines = []
            expect = last_word.get(caller)
            if expect:
                lines.append({"audio": QUESTION_AUDIO, "text": "Do you remember my lucky word?", "expect": [expect]})
            lines.append({"audio": STATEMENT_AUDIO, "text": f"Please remember that my lucky word is {word}",
                          "facts": [{"text": f"User's lucky word is {word}", "category": "personal_facts",
                                     "slot": "lucky_word"}]})  # fmt: skip
            if args.replicas:  # the fact of the previous turn, asked for at once: `own_words_missed`
                lines.append({"audio": QUESTION_AUDIO, "text": "Do you remember my lucky word?", "expect": [word],
                              "own": True})  # fmt: skip
            lines.append({"audio": SEAT_AUDIO, "text": f"Remember that my seat for trip {tag} is {seat}",
                          "facts": [{"text": f"User's seat for trip {tag} is {seat}", "category": "preferences",
                                     "slot": slot}]})  # fmt: skip
            calls.append(Call(f"call-{n:03d}", caller, "regular", True, lines, number, word, expect, slot,
                              replicas=bool(args.replicas) and n % 2 == 1))  # fmt: skip
            last_word[caller] = word
            n += 1
    contested = [user_id(args.callers + i) for i in range(pairs)]
    for p, caller in enumerate(contested):
        a, b = rng.sample(_COLOURS, 2)
        for side, colour in (("a", a), ("b", b)):
            line = {"audio": STATEMENT_AUDIO, "text": f"Please remember that my favourite colour is {colour}",
                    "facts": [{"text": f"User's favourite colour is {colour}", "category": "preferences",
                               "slot": "favourite_colour"}]}  # fmt: skip
            calls.append(Call(f"pair-{p:02d}{side}", caller, "contested", True, [line], colour=colour, pair=p))
    # Memory off: the same scripts, by callers of their own (nothing of theirs is stored).
    on_calls = [c for c in calls if c.kind == "regular"]
    for i, base in enumerate(on_calls[:: max(1, args.off_every)]):
        lines = [{k: v for k, v in line.items() if k != "expect"} for line in base.lines]
        calls.append(Call(f"off-{i:03d}", f"fleet-off-{i:03d}", "off", False, lines, source=base.call_id))
    # Regular calls in rounds; contested pairs and memory-off calls spread among them.
    ordered = sorted(on_calls, key=lambda c: (c.number, c.call_id))
    extras = [c for c in calls if c.kind != "regular"]
    rng.shuffle(extras)
    step = max(1, len(ordered) // max(1, len(extras)))
    merged: list[Call] = []
    for i, call in enumerate(ordered):
        merged.append(call)
        if extras and i % step == step - 1:
            merged.append(extras.pop())
    merged += extras
    return merged, callers + contested


# ------------------------------------------------------------------ the workers
@dataclass
class WorkerProc:
    index: int
    data_dir: Path
    proc: asyncio.subprocess.Process | None = None
    active: set[str] = field(default_factory=set)
    alive: bool = False
    generation: int = 0


class Fleet:
    def __init__(self, args: argparse.Namespace, db_url: str, run_dir: Path, read_urls: list[str]) -> None:
        self.args = args
        self.db_url = db_url
        self.read_urls = read_urls
        self.run_dir = run_dir
        self.workers = [WorkerProc(i, run_dir / f"worker-{i}") for i in range(args.workers)]
        self.calls: dict[str, Call] = {}
        self.changed = asyncio.Event()
        self.events: list[dict[str, Any]] = []
        self.drained: dict[int, dict[str, Any]] = {}
        self.job_prewarm_s: list[float] = []
        self.waited_s: list[float] = []
        self.errors: list[str] = []
        self.started: list[asyncio.subprocess.Process] = []

    def env(self, worker: WorkerProc) -> dict[str, str]:
        worker.data_dir.mkdir(parents=True, exist_ok=True)
        return {
            **os.environ,
            "MEMORY_DATABASE_URL": self.db_url,
            "MEMORY_DATABASE_READ_URLS": ",".join(self.read_urls),
            "MEMORY_COLLECTION": TABLE,
            "MEMORY_DATA_DIR": str(worker.data_dir),
            "MEM0_SETTING": "GATED",  # the lost-update and fact checks are about GATED's facts
            "MEMORY_DB_MAX_CONNECTIONS": str(self.args.db_max_connections),
            # Retention runs (once for the fleet) but deletes none of the loaded rows.
            "MEMORY_RETENTION_DAYS": "36500",
            "OPENAI_API_KEY": "sk-fleet-offline",  # the plugins are made, never called: the harness's fakes answer
            "PYTHONUNBUFFERED": "1",
            "PROMETHEUS_PORT": "",
        }

    async def start_worker(self, worker: WorkerProc) -> None:
        worker.generation += 1
        worker.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bench.fleet.fleet_worker",
            "--worker-id", str(worker.index), "--idle", str(self.args.idle),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
            env=self.env(worker), cwd=str(ROOT), start_new_session=True,
        )  # fmt: skip
        self.started.append(worker.proc)
        worker.alive = True
        worker.active = set()
        asyncio.create_task(self._read(worker, worker.proc, worker.generation))

    async def _read(self, worker: WorkerProc, proc: asyncio.subprocess.Process, generation: int) -> None:
        assert proc.stdout is not None
        while line := await proc.stdout.readline():
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            self.on_event(worker, ev)
        if worker.generation == generation:
            worker.alive = False
        self.changed.set()

    def on_event(self, worker: WorkerProc, ev: dict[str, Any]) -> None:
        kind = ev.get("ev")
        call = self.calls.get(ev.get("call_id", ""))
        if kind == "job_ready":
            self.job_prewarm_s.append(float(ev["prewarm_s"]))
        elif kind == "call_started":
            self.waited_s.append(float(ev.get("waited_for_process_s", 0.0)))
        elif kind == "turn" and call is not None:
            call.turns.append(ev)
        elif kind == "call_done" and call is not None:
            call.writes = list(ev.get("writes", []))
            call.cpu_s = ev.get("cpu_s")
            call.cpu_s_by_thread = ev.get("cpu_s_by_thread") or {}
            call.reads = ev.get("reads")
            call.uss_mb = ev.get("uss_mb")
            call.state = "done"
            worker.active.discard(call.call_id)
        elif kind == "drained":
            self.drained[worker.index] = ev
        elif kind == "error":
            self.errors.append(f"worker {worker.index}: {ev.get('error')}"[:300])
            if call is not None and call.state == "running":
                call.state, call.error = "failed", ev.get("error")
                worker.active.discard(call.call_id)
            if "drain" == ev.get("call_id"):
                self.drained[worker.index] = {"error": ev.get("error")}
        self.changed.set()

    async def send(self, worker: WorkerProc, command: dict[str, Any]) -> None:
        assert worker.proc is not None and worker.proc.stdin is not None
        worker.proc.stdin.write((json.dumps(command) + "\n").encode())
        await worker.proc.stdin.drain()

    def kill(self, worker: WorkerProc) -> list[str]:
        """SIGKILL the worker and its job processes (one process group): its calls drop."""
        assert worker.proc is not None
        os.killpg(worker.proc.pid, signal.SIGKILL)
        dropped = sorted(worker.active)
        for call_id in dropped:
            self.calls[call_id].state = "dropped"
        worker.active = set()
        worker.alive = False
        return dropped

    async def stop(self) -> None:
        """Stop every worker (and the job processes of a killed one's successor)."""
        for worker in self.workers:
            if worker.proc is not None and worker.proc.returncode is None:
                try:
                    await self.send(worker, {"op": "stop"})
                except (ConnectionError, RuntimeError):
                    pass
        for worker in self.workers:
            if worker.proc is None:
                continue
            try:
                await asyncio.wait_for(worker.proc.wait(), 60)
            except TimeoutError:
                pass
            try:
                os.killpg(worker.proc.pid, signal.SIGKILL)  # the job processes still draining, if any
            except ProcessLookupError:
                pass
        for proc in self.started:  # their pipes, before the event loop closes
            if proc.stdin is not None and not proc.stdin.is_closing():
                proc.stdin.close()
            if proc.returncode is None:
                await proc.wait()


# ------------------------------------------------------------------ watching the database
class Watch:
    """Samples Postgres's connections for the fleet and PgBouncer's clients every 0.2 s."""

    def __init__(self, direct_url: str, bouncer: Any) -> None:
        self.direct_url = direct_url
        self.bouncer = bouncer
        self.server_max = 0
        self.client_max = 0
        self.samples = 0
        self.transactions = 0  # committed and rolled back in the fleet's database, while watched
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fleet-watch", daemon=True)

    def _run(self) -> None:
        import psycopg

        count = "SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = current_database()"
        with psycopg.connect(self.direct_url, autocommit=True) as conn:
            conn.execute("SELECT pg_stat_clear_snapshot()")
            (first,) = conn.execute(count).fetchone()
            while not self._stop.wait(0.2):
                try:
                    (servers,) = conn.execute(
                        "SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' "
                        "AND pid <> pg_backend_pid()"
                    ).fetchone()
                    clients = self.bouncer.client_connections()
                except Exception:  # noqa: BLE001 - a missed sample
                    continue
                self.server_max = max(self.server_max, int(servers))
                self.client_max = max(self.client_max, int(clients))
                self.samples += 1
            conn.execute("SELECT pg_stat_clear_snapshot()")
            (last,) = conn.execute(count).fetchone()
            self.transactions = int(last) - int(first)

    def start(self) -> Watch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


# ------------------------------------------------------------------ the run
async def run_calls(fleet: Fleet, plan: list[Call], args: argparse.Namespace) -> dict[str, Any]:
    for call in plan:
        fleet.calls[call.call_id] = call
    for worker in fleet.workers:
        await fleet.start_worker(worker)
    last_worker: dict[str, int] = {}
    busy: set[str] = set()
    on_total = sum(1 for c in plan if c.memory)
    killed: dict[str, Any] = {}
    started = time.monotonic()
    deadline = started + args.max_minutes * 60
    shown = -1

    def free(worker: WorkerProc) -> int:
        return args.per_worker - len(worker.active) if worker.alive else 0

    def pick(caller: str, exclude: set[int]) -> WorkerProc | None:
        """The least-loaded worker with room, never the caller's last one (it waits instead)."""
        options = [w for w in fleet.workers if free(w) > 0 and w.index not in exclude]
        if len(fleet.workers) > 1:
            options = [w for w in options if w.index != last_worker.get(caller)]
        return min(options, key=lambda w: (len(w.active), w.index)) if options else None

    async def dispatch(call: Call, worker: WorkerProc) -> None:
        call.state, call.worker, call.started_at = "running", worker.index, time.monotonic()
        worker.active.add(call.call_id)
        busy.add(call.caller)
        last_worker[call.caller] = worker.index
        await fleet.send(worker, call.spec(args.stt))

    while True:
        for call in plan:  # release callers whose call ended
            if (
                call.state in ("done", "dropped", "failed")
                and call.caller in busy
                and not any(c.caller == call.caller and c.state == "running" for c in plan)
            ):
                busy.discard(call.caller)
        waiting = [c for c in plan if c.state == "waiting"]
        if not waiting and not any(c.state == "running" for c in plan):
            break
        if time.monotonic() > deadline:
            fleet.errors.append(f"stopped after {args.max_minutes} minutes with calls unfinished")
            break
        done_on = sum(1 for c in plan if c.memory and c.state in ("done", "dropped", "failed"))
        if args.kill and not killed and done_on >= on_total // 2:
            victim = fleet.workers[min(1, len(fleet.workers) - 1)]
            if victim.active:
                dropped = fleet.kill(victim)
                killed = {"worker": victim.index, "dropped_calls": dropped, "at_s": round(time.monotonic() - started)}
                print(f"killed worker {victim.index} with SIGKILL mid-call ({', '.join(dropped)}); restarting it",
                      flush=True)  # fmt: skip
                await fleet.start_worker(victim)
        for call in waiting:
            if call.caller in busy:
                continue
            if call.pair is not None:
                twin = next(c for c in plan if c.pair == call.pair and c is not call)
                if twin.state != "waiting":
                    continue
                first = pick(call.caller, set())
                second = pick(call.caller, {first.index}) if first else None
                if first is None or second is None:
                    continue
                await dispatch(call, first)
                await dispatch(twin, second)
                continue
            worker = pick(call.caller, set())
            if worker is None:
                continue  # no room, or only on the caller's last worker: a later call may fit
            await dispatch(call, worker)
        fleet.changed.clear()
        try:
            await asyncio.wait_for(fleet.changed.wait(), 1.0)
        except TimeoutError:
            pass
        finished = sum(1 for c in plan if c.state != "waiting" and c.state != "running")
        if finished != shown:
            shown = finished
            print(f"\rcalls finished {finished}/{len(plan)}", end="", flush=True)
    calls_s = time.monotonic() - started
    print(flush=True)
    # What the killed worker's journal holds, written by a job process of the worker
    # started in its place (as its next call would); the others' too, should any remain.
    for worker in fleet.workers:
        if worker.alive:
            await fleet.send(worker, {"op": "drain"})
    drain_deadline = time.monotonic() + 180
    while len(fleet.drained) < sum(1 for w in fleet.workers if w.alive) and time.monotonic() < drain_deadline:
        fleet.changed.clear()
        try:
            await asyncio.wait_for(fleet.changed.wait(), 1.0)
        except TimeoutError:
            pass
    return {"calls_s": calls_s, "killed": killed}


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def assess(fleet: Fleet, plan: list[Call], direct_url: str) -> dict[str, Any]:
    """The run's figures, from what the calls reported and what the database holds."""
    import psycopg

    on = [c for c in plan if c.memory]
    killed_worker_calls = {c.call_id for c in plan if c.state == "dropped"}
    # cross-worker recall: the word of the caller's previous call, said on another worker
    checks = found = skipped = 0
    misses: list[dict[str, Any]] = []
    by_caller: dict[str, list[Call]] = defaultdict(list)
    for c in plan:
        if c.kind == "regular":
            by_caller[c.caller].append(c)
    for caller_calls in by_caller.values():
        said: tuple[str, Call] | None = None  # the last word a completed turn said, and its call
        for c in sorted(caller_calls, key=lambda x: x.number):
            question = next((t for t in c.turns if t["text"].startswith("Do you remember") and not t.get("own")), None)
            if question is not None and said is not None:
                if said[1].call_id in killed_worker_calls:
                    skipped += 1  # its write may wait in the killed worker's journal for its next call
                elif said[1].worker != c.worker:
                    checks += 1
                    hit = said[0] in question.get("expect_found", [])
                    found += hit
                    if not hit:
                        misses.append({"call": c.call_id, "said_in": said[1].call_id,
                                       "missed_budget": question.get("missed_budget")})  # fmt: skip
            statement = next((t for t in c.turns if "lucky word is" in t["text"] and t.get("replied")), None)
            if statement is not None and c.word is not None:
                said = (c.word, c)
    with psycopg.connect(direct_url, autocommit=True) as conn:
        rows = conn.execute(
            f"SELECT payload->>'user_id', payload->>'slot', payload->>'data', payload->>'timestamp' FROM {TABLE} "
            "WHERE payload->>'user_id' = ANY(%s) AND payload ? 'write_id'",
            [sorted({c.caller for c in on})],
        ).fetchall()
    stored: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    for user, slot, text, when in rows:
        stored[(user, slot)].append((text, when))
    # every seat a completed turn said: stored once
    lost = duplicated = completed = 0
    lost_ids: list[str] = []
    for c in on:
        if c.kind != "regular" or c.seat_slot is None:
            continue
        turn = next((t for t in c.turns if "seat for trip" in t["text"] and t.get("replied")), None)
        if turn is None:
            continue  # dropped before the turn completed: never said in full
        completed += 1
        n = len(stored.get((c.caller, c.seat_slot), []))
        if n == 0:
            lost += 1
            lost_ids.append(c.call_id)
        elif n > 1:
            duplicated += n - 1
    # two workers changing one fact at once: one row, holding the later said
    lost_updates = 0
    pairs = defaultdict(list)
    for c in on:
        if c.kind == "contested":
            pairs[c.pair].append(c)
    pair_detail = []
    for p, sides in sorted(pairs.items()):
        said = [(t["journaled"]["said_at"], c.colour) for c in sides for t in c.turns if t.get("journaled")]
        rows_ = stored.get((sides[0].caller, "favourite_colour"), [])
        expected = max(said)[1] if said else None
        ok = len(rows_) == 1 and expected is not None and rows_[0][0] == f"User's favourite colour is {expected}"
        lost_updates += 0 if ok or len(said) < 2 else 1
        pair_detail.append({"pair": p, "workers": [c.worker for c in sides], "said": len(said), "rows": len(rows_),
                            "ok": ok})  # fmt: skip

    # first audio: memory on against memory off, same run
    def delays(calls: list[Call]) -> list[float]:
        return [t["first_audio_s"] * 1000 for c in calls for t in c.turns if t.get("first_audio_s") is not None]

    on_ms, off_ms = delays([c for c in on if c.kind == "regular"]), delays([c for c in plan if not c.memory])
    # Paired: each memory-off call speaks a memory-on call's script (same audio, same
    # lines): turn by turn, on minus off.
    paired: list[float] = []
    for off_call in (c for c in plan if not c.memory and c.source):
        on_turns = {t["index"]: t for t in fleet.calls[off_call.source].turns if t.get("first_audio_s") is not None}
        for t in off_call.turns:
            twin = on_turns.get(t["index"])
            if twin is not None and t.get("first_audio_s") is not None:
                paired.append((twin["first_audio_s"] - t["first_audio_s"]) * 1000)
    replicas = replica_figures(plan) if fleet.args.replicas else {}
    writes = sum(1 for c in on for w in c.writes if w in ("ADD", "UPDATE"))
    writes += sum(int(d.get("written") or 0) for d in fleet.drained.values())
    return {
        "cross_worker_recall": round(found / checks, 4) if checks else None,
        "recall_checks": checks,
        "recall_checks_skipped_killed_worker": skipped,
        "recall_misses": misses,
        "lost_updates": lost_updates,
        "contested_pairs": pair_detail,
        "fact_turns_completed": completed,
        "turns_lost": lost,
        "turns_lost_calls": lost_ids,
        "turns_duplicated": duplicated,
        "first_audio_ms_p50_on": _round(_pct(on_ms, 50)),
        "first_audio_ms_p95_on": _round(_pct(on_ms, 95)),
        "first_audio_ms_p50_off": _round(_pct(off_ms, 50)),
        "first_audio_ms_p95_off": _round(_pct(off_ms, 95)),
        "added_ms_p50": _round((_pct(on_ms, 50) or 0) - (_pct(off_ms, 50) or 0)) if on_ms and off_ms else None,
        "added_ms_p95": _round((_pct(on_ms, 95) or 0) - (_pct(off_ms, 95) or 0)) if on_ms and off_ms else None,
        "added_ms_paired_p50": _round(_pct(paired, 50)),
        "added_ms_paired_p95": _round(_pct(paired, 95)),
        "paired_turns": len(paired),
        "turns_on": len(on_ms),
        "turns_off": len(off_ms),
        "writes": writes,
        **replicas,
    }


def replica_figures(plan: list[Call]) -> dict[str, Any]:
    """`--replicas`: the previous turn's fact asked for at once (missed: must be 0), where the
    look-ups read, and their time, for the calls on replicas against those on the primary."""
    out: dict[str, Any] = {}
    for key, on_replicas in (("replicas", True), ("primary_only", False)):
        calls = [c for c in plan if c.kind == "regular" and c.state == "done" and c.replicas == on_replicas]
        own = [t for c in calls for t in c.turns if t.get("own") and t.get("replied")]
        ms = [t["lookup_ms"] for c in calls for t in c.turns if t.get("lookup_ms") is not None]
        out[f"own_words_checked_{key}"] = len(own)
        out[f"own_words_missed_{key}"] = sum(1 for t in own if not t.get("expect_found"))
        out[f"lookup_ms_p50_{key}"] = _round(_pct(ms, 50))
        out[f"lookup_ms_p95_{key}"] = _round(_pct(ms, 95))
        out[f"lookups_{key}"] = len(ms)
        if on_replicas:
            replica = sum((c.reads or {}).get("replica", 0) for c in calls)
            primary = sum((c.reads or {}).get("primary", 0) for c in calls)
            out["replica_reads"], out["primary_reads_of_replica_calls"] = replica, primary
            why: dict[str, int] = defaultdict(int)
            for c in calls:
                for reason, n in ((c.reads or {}).get("primary_because") or {}).items():
                    why[reason] += n
            out["primary_reads_because"] = {k: v for k, v in why.items() if v}
            out["replica_reads_share"] = round(replica / (replica + primary), 3) if replica + primary else None
    out["own_words_missed"] = out["own_words_missed_replicas"]
    return out


def _mean(values: list[float]) -> float | None:
    return statistics.mean(values) if values else None


def _round2(x: float | None) -> float | None:
    return None if x is None else round(x, 2)


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 1)


async def amain(args: argparse.Namespace) -> dict[str, Any]:
    from memory.storage.postgres import embedded_url

    data = Path(args.data_dir)
    data.mkdir(parents=True, exist_ok=True)
    os.chmod(data, 0o755)  # the embedded server's own user (as root) reaches its socket
    direct = embedded_url(data / "pg")
    load_info = ensure_loaded(direct, TABLE, args.users, args.per_user)
    rng = random.Random(args.seed)
    plan, callers = plan_calls(args, rng)
    cleared = clear_run_rows(direct, TABLE, callers)
    run_dir = Path(tempfile.mkdtemp(prefix="bench-fleet-run-"))
    os.chmod(run_dir, 0o755)
    out: dict[str, Any] = {"bench": "fleet", "load": load_info, "cleared_rows_of_earlier_runs": cleared}
    with contextlib.ExitStack() as stack:
        read_urls = start_replicas(stack, direct, data, args)
        out["replicas"] = args.replicas
        out.update(await run_fleet(args, direct, plan, run_dir, read_urls, out))
    shutil.rmtree(run_dir, ignore_errors=True)
    return out


def start_replicas(stack: contextlib.ExitStack, direct: str, data: Path, args: argparse.Namespace) -> list[str]:
    """`--replicas N`: N streaming replicas of the fleet's Postgres (`pg_basebackup -R`,
    harness/replica.py), each behind a PgBouncer of its own; their URLs."""
    from harness.pgbouncer import PgBouncer
    from harness.replica import StreamingReplica

    urls = []
    for i in range(args.replicas):
        t0 = time.perf_counter()
        replica = stack.enter_context(StreamingReplica(direct, data / f"replica-{i}"))
        print(f"replica {i}: streaming after {time.perf_counter() - t0:.0f} s (pg_basebackup and start)", flush=True)
        bouncer = stack.enter_context(
            PgBouncer(replica.url, pool_size=args.server_pool, max_client_conn=args.max_client_conn)
        )
        urls.append(bouncer.url)
    return urls


async def run_fleet(
    args: argparse.Namespace, direct: str, plan: list[Call], run_dir: Path, read_urls: list[str], out: dict[str, Any]
) -> dict[str, Any]:
    from harness.pgbouncer import PgBouncer

    with PgBouncer(direct, pool_size=args.server_pool, max_client_conn=args.max_client_conn) as bouncer:
        if not args.skip_pss:
            from bench.fleet.job_memory import amain as job_memory

            pss_args = argparse.Namespace(processes=args.pss_processes, settle=5.0, rounds=1, timeout=300.0,
                                          port_wait=600.0, database_url=bouncer.url)  # fmt: skip
            out["job_memory"] = await job_memory(pss_args)
        from memory.archive import retention
        from memory.settings import load_settings
        from memory.storage.store import MemoryStore

        admin = MemoryStore.open(load_settings({"MEMORY_DATABASE_URL": direct, "MEMORY_COLLECTION": TABLE,
                                                "MEMORY_DATA_DIR": str(run_dir / "admin")}, dotenv=False))  # fmt: skip
        retention.ensure_maintenance_table(admin)
        with admin.pool.connection() as conn:  # due now: the fleet's first processes find it so
            conn.execute("UPDATE memory_maintenance SET ran_at = '-infinity', lease_until = NULL, holder = NULL "
                         "WHERE name = 'memory-retention'")  # fmt: skip
        runs_before = retention.runs(admin)
        fleet = Fleet(args, bouncer.url, run_dir, read_urls)
        watch = Watch(direct, bouncer).start()
        load_start = os.getloadavg()
        try:
            ran = await run_calls(fleet, plan, args)
        finally:
            watch.stop()
            await fleet.stop()
        load_end = os.getloadavg()
        runs_after = retention.runs(admin)
        admin.close()
        out.update(assess(fleet, plan, direct))
    out.update(
        workers=args.workers,
        calls=sum(1 for c in plan if c.memory and c.state != "waiting"),
        calls_completed=sum(1 for c in plan if c.memory and c.state == "done"),
        calls_off=sum(1 for c in plan if not c.memory and c.state == "done"),
        calls_dropped=sorted(c.call_id for c in plan if c.state == "dropped"),
        calls_failed=sorted(c.call_id for c in plan if c.state == "failed"),
        killed=ran["killed"],
        calls_s=round(ran["calls_s"], 1),
        writes_per_s=round(out["writes"] / ran["calls_s"], 2) if ran["calls_s"] else None,
        server_connections_max=watch.server_max,
        server_connections_budget=args.server_pool,
        client_connections_max=watch.client_max,
        client_connections_budget=args.workers * (args.per_worker + args.idle) * args.db_max_connections,
        connection_samples=watch.samples,
        db_transactions_per_s=round(watch.transactions / ran["calls_s"], 1) if ran["calls_s"] else None,
        db_transactions_per_call=round(watch.transactions / max(1, sum(1 for c in plan if c.state != "waiting")), 1),
        cpu_s_per_call_on=_round2(_mean([c.cpu_s for c in plan if c.memory and c.cpu_s is not None])),
        cpu_s_per_call_off=_round2(_mean([c.cpu_s for c in plan if not c.memory and c.cpu_s is not None])),
        uss_mb_at_call_end_on=_round(_mean([c.uss_mb for c in plan if c.memory and c.uss_mb is not None])),
        uss_mb_at_call_end_off=_round(_mean([c.uss_mb for c in plan if not c.memory and c.uss_mb is not None])),
        retention_runs=runs_after - runs_before,
        drained=fleet.drained,
        job_prewarm_s_p50=_pct(fleet.job_prewarm_s, 50),
        job_prewarm_s_max=max(fleet.job_prewarm_s) if fleet.job_prewarm_s else None,
        waited_for_process_s_max=round(max(fleet.waited_s), 2) if fleet.waited_s else None,
        errors=fleet.errors[:20],
        load_average_1m=[round(load_start[0], 2), round(load_end[0], 2)],
        cores=os.cpu_count(),
        users=args.users,
        memories=args.users * args.per_user,
    )
    if "job_memory" in out:
        out["pss_mb_per_call_memory_on"] = out["job_memory"]["pss_mb_per_call_memory_on"]
        out["pss_mb_per_call_memory_off"] = out["job_memory"]["pss_mb_per_call_memory_off"]
    shutil.rmtree(run_dir, ignore_errors=True)
    return out


def print_table(out: dict[str, Any]) -> None:
    rows = [
        ("workers / calls memory on (completed) / off", f"{out['workers']} / {out['calls']} "
         f"({out['calls_completed']}) / {out['calls_off']}"),
        ("memories in the shared Postgres", f"{out['memories']:,} of {out['users']:,} users"),
        ("worker killed -9 mid-run (calls dropped)", f"{out['killed'].get('worker', '-')} "
         f"({', '.join(out['killed'].get('dropped_calls', [])) or '-'})"),
        ("added first-audio p95 (on - off), ms", f"{out['added_ms_p95']} (p50 {out['added_ms_p50']}); paired "
         f"by turn p95 {out['added_ms_paired_p95']} (p50 {out['added_ms_paired_p50']}, {out['paired_turns']} turns)"),
        ("first audio p95 on / off, ms", f"{out['first_audio_ms_p95_on']} / {out['first_audio_ms_p95_off']}"),
        ("cross-worker recall", f"{out['cross_worker_recall']} of {out['recall_checks']} checks"),
        ("lost updates (contested pairs)", f"{out['lost_updates']} of {len(out['contested_pairs'])}"),
        ("turns lost / duplicated (fact turns)", f"{out['turns_lost']} / {out['turns_duplicated']} of "
         f"{out['fact_turns_completed']}"),
        ("store writes per second", f"{out['writes_per_s']}"),
        ("database transactions per second / per call", f"{out['db_transactions_per_s']} / "
         f"{out['db_transactions_per_call']}"),
        ("CPU seconds per call on / off (job process)", f"{out['cpu_s_per_call_on']} / {out['cpu_s_per_call_off']}"),
        ("job process USS at call end on / off, MB", f"{out['uss_mb_at_call_end_on']} / "
         f"{out['uss_mb_at_call_end_off']}"),
        ("server connections max (budget)", f"{out['server_connections_max']} ({out['server_connections_budget']})"),
        ("PgBouncer clients max (budget)", f"{out['client_connections_max']} ({out['client_connections_budget']})"),
        ("PSS per call on / off, MB", f"{out.get('pss_mb_per_call_memory_on')} / "
         f"{out.get('pss_mb_per_call_memory_off')}"),
        ("retention runs", f"{out['retention_runs']}"),
        *_replica_rows(out),
        ("load average (start, end)", f"{out['load_average_1m']}"),
    ]  # fmt: skip
    width = max(len(r[0]) for r in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")


def _replica_rows(out: dict[str, Any]) -> list[tuple[str, str]]:
    if not out.get("replicas"):
        return []
    return [
        ("replicas; reads of replica calls on a replica", f"{out['replicas']}; {out['replica_reads_share']} "
         f"({out['replica_reads']} of {out['replica_reads'] + out['primary_reads_of_replica_calls']})"),
        ("previous turn's fact missed, replicas / primary only", f"{out['own_words_missed_replicas']} of "
         f"{out['own_words_checked_replicas']} / {out['own_words_missed_primary_only']} of "
         f"{out['own_words_checked_primary_only']}"),
        ("look-up p95 (p50), replicas / primary only, ms", f"{out['lookup_ms_p95_replicas']} "
         f"({out['lookup_ms_p50_replicas']}) / {out['lookup_ms_p95_primary_only']} "
         f"({out['lookup_ms_p50_primary_only']})"),
    ]  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=3)
    ap.add_argument("--calls", type=int, default=60, help="memory-on calls, contested pairs included (default 60)")
    ap.add_argument("--callers", type=int, default=16, help="callers making regular calls (default 16)")
    ap.add_argument("--contested-pairs", type=int, default=6, help="pairs of simultaneous calls of one caller")
    ap.add_argument("--off-every", type=int, default=3, help="one memory-off call per this many regular calls")
    ap.add_argument("--per-worker", type=int, default=2, help="calls a worker runs at once (default 2)")
    ap.add_argument("--idle", type=int, default=1, help="prewarmed job processes a worker keeps (default 1)")
    ap.add_argument("--users", type=int, default=1000)
    ap.add_argument("--per-user", type=int, default=1000)
    ap.add_argument("--stt", default="realtime", choices=("realtime", "batch"))
    ap.add_argument("--server-pool", type=int, default=20, help="PgBouncer's server connections (default_pool_size)")
    ap.add_argument("--max-client-conn", type=int, default=1000)
    ap.add_argument("--db-max-connections", type=int, default=3, help="MEMORY_DB_MAX_CONNECTIONS of each job process")
    ap.add_argument("--replicas", type=int, default=0, help="streaming read replicas; every other call reads them")
    ap.add_argument("--no-kill", dest="kill", action="store_false", help="do not kill a worker mid-run")
    ap.add_argument("--skip-pss", action="store_true", help="skip bench.fleet.job_memory's PSS measurement")
    ap.add_argument("--pss-processes", type=int, default=6)
    ap.add_argument("--max-minutes", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=28)
    ap.add_argument("--data-dir", default=os.environ.get("BENCH_FLEET_DIR", "/tmp/bench-fleet"))
    ap.add_argument("--smoke", action="store_true", help="50 users x 400 memories, 16 calls: a quick check")
    args = ap.parse_args()
    if args.smoke:
        args.users, args.per_user, args.calls, args.callers, args.contested_pairs = 50, 400, 16, 6, 2
        args.pss_processes = 3
        args.data_dir = str(Path(args.data_dir) / "smoke")
    out = asyncio.run(amain(args))
    print_table(out)
    print(json.dumps(out, default=str))


if __name__ == "__main__":
    main()
