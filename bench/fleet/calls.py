"""The fleet's worker processes and the calls placed on them: each worker a
`bench.fleet.fleet_worker` process, each call a job its forkserver forks, watched (CPU,
memory, database connections) while the calls run."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common.paths import ROOT as REPO_ROOT
from bench.fleet.plan import Call

ROOT = REPO_ROOT


TABLE = "fleet_memories"


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
