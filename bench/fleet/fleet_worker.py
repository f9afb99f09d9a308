"""One worker of `bench.fleet.run`: job processes forked from a forkserver, one call each.

`python -m bench.fleet.fleet_worker` is started by `bench.fleet.run` with the worker's environment
(MEMORY_DATABASE_URL through PgBouncer, its own MEMORY_DATA_DIR, MEM0_SETTING, ...). As
LiveKit runs a worker, it starts a forkserver with `agent.py`'s `preload_modules` (and
LiveKit's own preloads and freeze) and keeps `--idle` job processes prewarmed, each having
run `agent.prewarm`; a call goes to an idle process, which runs `agent.entrypoint` in
LiveKit's fake job context with the harness's production-shaped pipeline (real speech into
the Silero VAD, the STT, LLM and TTS fakes timed like OpenAI's), then exits; another is
prewarmed in its place.

Commands come as JSON lines on stdin (`call`, `drain`, `stop`), events go out as JSON
lines on stdout (`ready`, `turn`, `call_done`, `drained`, `error`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import sys
import threading
import time
import traceback
from collections import deque
from multiprocessing.connection import Connection
from types import SimpleNamespace
from typing import Any

# The forkserver's preloads, as livekit-agents 1.8 lists them for `agent.py` (worker.py):
# the registered plugins, `preload_modules`, then its own warm-up and the freeze (last).
FORKSERVER_PRELOAD = [
    "livekit.plugins.openai",
    "livekit.plugins.silero",
    "memory.preload",
    "livekit.agents.ipc._preload",
    "livekit.agents.ipc._preload_freeze",
]
_out_lock = threading.Lock()


def emit(event: dict[str, Any]) -> None:
    with _out_lock:
        sys.stdout.write(json.dumps(event) + "\n")
        sys.stdout.flush()


# ------------------------------------------------------------------ the job process
def job_main(conn: Connection, first_check_s: tuple[float, float]) -> None:  # pragma: no cover - a child process
    """A job process: prewarm as LiveKit does, then one call, then exit."""
    started = time.perf_counter()
    try:
        from memory.archive import retention

        retention.FIRST_CHECK_S = first_check_s  # the fleet's first retention check within the run
        import agent
        from harness import memory_parts

        proc = SimpleNamespace(userdata={})
        agent.prewarm(proc)
        proc.userdata.update(memory_parts())
        conn.send({"ev": "ready", "pid": os.getpid(), "prewarm_s": round(time.perf_counter() - started, 2)})
        try:
            spec = conn.recv()
        except EOFError:  # the worker stopped: an idle process ends without a call
            return
        if spec.get("op") == "drain":
            conn.send({"ev": "drained", **asyncio.run(_drain(proc.userdata))})
            return
        before, threads_before = _cpu_s(), thread_cpu_s()
        result = asyncio.run(_call(spec, proc.userdata, conn))
        import psutil

        uss = psutil.Process().memory_full_info().uss / 2**20  # what the call left the process holding alone
        by_thread = cpu_by_thread(threads_before, thread_cpu_s())
        conn.send({"ev": "call_done", "cpu_s": round(_cpu_s() - before, 3), "uss_mb": round(uss, 1),
                   "cpu_s_by_thread": by_thread, **result})  # fmt: skip
    except Exception as exc:  # noqa: BLE001 - reported to the coordinator, which counts it
        conn.send({"ev": "error", "error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()[-2000:]})
    finally:
        conn.close()


def _cpu_s() -> float:
    """CPU seconds this process (all its threads) has used."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def thread_cpu_s() -> dict[int, tuple[str, float]]:
    """CPU seconds of each live thread of this process (Linux: /proc), by native id, with
    the Python thread's name cut to its pool (`memory-write_0` -> `memory-write`). Threads
    Python does not know are the native ones: OpenMP's team of the embedder, onnxruntime's
    (Silero), libpq's none."""
    names = {t.native_id: t.name.split("_")[0].rstrip("-0123456789") for t in threading.enumerate()}
    main = threading.main_thread().native_id
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[int, tuple[str, float]] = {}
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        tid = int(task)
        name = "event loop" if tid == main else names.get(tid, "native")
        out[tid] = (name, (int(fields[11]) + int(fields[12])) / tick)  # utime + stime
    return out


def cpu_by_thread(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]]) -> dict[str, float]:
    """CPU seconds per kind of thread between two `thread_cpu_s` readings (a thread that
    ended in between is not counted: the process total still is)."""
    out: dict[str, float] = {}
    for tid, (name, cpu) in after.items():
        used = cpu - before.get(tid, (name, 0.0))[1]
        if used > 0:
            out[name] = round(out.get(name, 0.0) + used, 3)
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


async def _drain(userdata: dict[str, Any]) -> dict[str, Any]:
    """What a worker's next job process does with the journal: take over what stopped
    processes left, and write it."""
    from memory.journal.queue import DurableWriteQueue
    from memory.service import MemoryService

    settings, store = userdata["settings"], userdata["store"]
    service = MemoryService(store, settings, retriever=userdata["retriever"])
    queue = DurableWriteQueue(settings.journal_path, service.remember, mode=service.mode.value)
    queue.start()
    ok = await queue.drain(120.0)
    pending = queue.pending_count()
    await queue.aclose(5.0)
    return {"drained": ok, "replayed": queue.replayed, "written": queue.written, "pending": pending}


async def _call(spec: dict[str, Any], userdata: dict[str, Any], conn: Connection) -> dict[str, Any]:
    """One call: the caller's utterances through `agent.entrypoint`, reported turn by turn."""
    from bench.common.pipeline import Caught, memory_off
    from harness import PipelineHarness, Utterance, load_utterances, scripted_llm
    from memory.livekit.session import MemorySession

    fixtures = load_utterances()
    facts: dict[str, list[dict[str, str]]] = {line["text"]: line.get("facts", []) for line in spec["lines"]}

    def extract(request: Any) -> str:
        payload = json.loads(request.messages[-1][1])
        return json.dumps({"facts": facts.get(payload.get("latest_user_message", ""), [])})

    h = PipelineHarness(spec["stt"], vad=userdata["vad"], llm=scripted_llm(lambda _r: "Sure."), timeout=90.0)
    h.plugins.memory_llm = scripted_llm(extract, ttft=0.3)  # GATED's extraction: a remote call
    journaled: dict[str, dict[str, str]] = {}
    memory_on = bool(spec["memory"])
    off = memory_off() if not memory_on else _Null()
    # `bench.fleet.run --replicas`: every other call's look-ups stay on the primary (the same
    # run's baseline); the router's counts say where this call's reads went.
    store = userdata.get("store")
    rows = store.rows if store is not None and store.available else None
    reads = rows.reads if rows is not None else None
    if reads is not None and not spec.get("replicas"):
        rows.reads = None
    before = reads.stats.as_dict() if reads is not None else None
    with Caught(MemorySession) as sessions, off:
        async with h.entrypoint(userdata, user_id=spec["caller"], job_id=spec["call_id"]):
            memory = sessions.made[0] if memory_on and sessions.made else None
            if memory is not None:
                real_enqueue = memory.queue.enqueue

                def enqueue(turn: Any) -> Any:
                    journaled[turn.text] = {"turn_id": turn.turn_id, "said_at": turn.created_at}
                    return real_enqueue(turn)

                memory.queue.enqueue = enqueue
            await h.greeted()
            for i, line in enumerate(spec["lines"]):
                utt = Utterance(line["audio"], line["text"], fixtures[line["audio"]].pcm)
                turn = await h.say(utt)
                seen = "\n".join(text for req in turn.requests for _, text in req.messages)
                conn.send({
                    "ev": "turn", "call_id": spec["call_id"], "index": i, "text": line["text"],
                    "first_audio_s": turn.first_audio_s, "replied": bool(turn.requests),
                    "expect_found": [w for w in line.get("expect", []) if w in seen], "own": bool(line.get("own")),
                    "journaled": journaled.get(line["text"]),
                    "lookup_ms": _lookup_ms(memory),
                    "missed_budget": bool(memory and memory.turns and memory.turns[-1].recall
                                          and memory.turns[-1].recall.missed_budget),
                })  # fmt: skip
        writes = []
        if memory is not None:
            writes = [w.event for report in memory.write_reports for w in report.writes]
    if reads is not None:
        rows.reads = reads
        after = reads.stats.as_dict()
        read_counts = {where: after[where] - before[where] for where in ("replica", "primary")}
        read_counts["primary_because"] = {
            why: n - before["primary_because"].get(why, 0) for why, n in after["primary_because"].items()
        }
    else:
        read_counts = None
    return {"call_id": spec["call_id"], "writes": writes, "reads": read_counts}


def _lookup_ms(memory: Any) -> float | None:
    """How long the turn's memory look-up took (prefetched or not), if it ran and finished."""
    recall = memory.turns[-1].recall if memory is not None and memory.turns else None
    return round(recall.took_s * 1000, 2) if recall is not None and recall.took_s is not None else None


class _Null:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


# ------------------------------------------------------------------ the worker
class Worker:
    """The job processes of one worker: `idle` prewarmed, one per call."""

    def __init__(self, worker_id: int, idle: int, first_check_s: tuple[float, float]) -> None:
        self.worker_id = worker_id
        self.idle_target = idle
        self.first_check_s = first_check_s
        self.ctx = multiprocessing.get_context("forkserver")
        self.ctx.set_forkserver_preload(FORKSERVER_PRELOAD)
        self.ready: deque[tuple[Any, Connection]] = deque()
        self.starting = 0
        self.lock = threading.Lock()
        self.cv = threading.Condition(self.lock)

    def _spawn(self) -> None:
        parent, child = self.ctx.Pipe()
        proc = self.ctx.Process(target=job_main, args=(child, self.first_check_s), daemon=False)
        proc.start()
        child.close()
        with self.lock:
            self.starting += 1
        threading.Thread(target=self._await_ready, args=(proc, parent), daemon=True).start()

    def _await_ready(self, proc: Any, conn: Connection) -> None:
        try:
            msg = conn.recv()
        except EOFError:
            msg = {"ev": "error", "error": f"job process {proc.pid} died in prewarm (exit {proc.exitcode})"}
        with self.cv:
            self.starting -= 1
            if msg.get("ev") == "ready":
                self.ready.append((proc, conn))
                emit({"ev": "job_ready", "worker": self.worker_id, "pid": proc.pid, "prewarm_s": msg["prewarm_s"]})
            else:
                emit({"ev": "error", "worker": self.worker_id, **msg})
            self.cv.notify_all()

    def top_up(self) -> None:
        with self.lock:
            missing = self.idle_target - len(self.ready) - self.starting
        for _ in range(max(0, missing)):
            self._spawn()

    def take(self) -> tuple[Any, Connection, float]:
        """An idle prewarmed process (waiting for one if none is ready), and the wait."""
        started = time.perf_counter()
        with self.cv:
            if not self.ready and self.starting == 0:
                self.cv.release()
                try:
                    self._spawn()
                finally:
                    self.cv.acquire()
            while not self.ready:
                self.cv.wait(1.0)
            proc, conn = self.ready.popleft()
        self.top_up()
        return proc, conn, time.perf_counter() - started

    def run(self, spec: dict[str, Any]) -> None:
        """Hand the call (or a drain) to a job process and forward what it reports."""
        proc, conn, waited = self.take()
        ident = spec.get("call_id", "drain")
        emit({"ev": "call_started", "worker": self.worker_id, "call_id": ident, "pid": proc.pid,
              "waited_for_process_s": round(waited, 3)})  # fmt: skip
        conn.send(spec)
        while True:
            try:
                msg = conn.recv()
            except EOFError:
                emit({"ev": "error", "worker": self.worker_id, "call_id": ident,
                      "error": f"job process {proc.pid} exited mid-call"})  # fmt: skip
                break
            emit({"worker": self.worker_id, **msg})
            if msg.get("ev") in ("call_done", "drained", "error"):
                break
        proc.join(120)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--worker-id", type=int, required=True)
    ap.add_argument("--idle", type=int, default=1, help="prewarmed job processes kept waiting")
    ap.add_argument("--first-check", default="1,4", help="seconds range of retention's first check")
    args = ap.parse_args(argv)
    lo, hi = (float(x) for x in args.first_check.split(","))
    worker = Worker(args.worker_id, args.idle, (lo, hi))
    worker.top_up()
    emit({"ev": "worker_started", "worker": args.worker_id, "pid": os.getpid()})
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd.get("op") == "stop":
            break
        threading.Thread(target=worker.run, args=(cmd,), daemon=True).start()
    emit({"ev": "worker_stopping", "worker": args.worker_id})
    for _, conn in list(worker.ready):
        conn.close()  # idle processes see EOF and exit


if __name__ == "__main__":
    main()
