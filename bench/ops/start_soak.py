"""`uv run agent.py start` for minutes beside CPU load: does LiveKit kill job processes
for a slow prewarm? `python -m bench.ops.start_soak`.

No LiveKit server runs on these machines, but the part of `start` that killed job
processes does not need one: LiveKit's `AgentServer.run` starts its process pool (the
idle job processes, each running `agent.prewarm` within `initialize_process_timeout`)
before and beside its connection to the server (livekit-agents 1.8, `worker.py`). An
unreachable URL would end the worker after its connection retries (about two minutes),
so the worker is pointed at a small stand-in server here: a websocket at `/agent` that
answers LiveKit's `RegisterWorkerRequest` with a `RegisterWorkerResponse` (the
livekit-protocol messages) and then reads the worker's status updates. No job is ever
assigned.

Jobs are what recycles job processes in production (a process serves one job, then the
pool starts another). The soak stands in for them by killing each idle process a few
seconds after it is ready, so the pool keeps prewarming new ones beside the load for
the whole run: each of those is one more prewarm timed under load. From the worker's
own JSON log it counts the processes LiveKit killed because their initialisation timed
out, and the prewarm times LiveKit measured ("process initialized", `elapsed_time`).
Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common.livekit_stub import Soak, fake_livekit, free_port
from bench.common.paths import ROOT as REPO_ROOT

ROOT = REPO_ROOT


def _busy() -> None:  # pragma: no cover - a load process
    while True:
        pass


async def read_log(stream: asyncio.StreamReader, soak: Soak, recycle_after: float, log_file: Any) -> None:
    """The worker's JSON log: prewarm times, initialisation time-outs; ready idle
    processes are recycled after `recycle_after` seconds."""
    loop = asyncio.get_running_loop()
    while line := await stream.readline():
        log_file.write(line.decode(errors="replace"))
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        message = str(rec.get("message", ""))
        if message == "process initialized" and "elapsed_time" in rec:
            soak.prewarm_s.append(float(rec["elapsed_time"]))
            pid = rec.get("pid")
            if isinstance(pid, int) and recycle_after > 0:
                loop.call_later(recycle_after, _recycle, pid, soak)
        elif "initialization timed out" in message or "initialization timed out" in str(rec.get("exc_info", "")):
            soak.init_timeouts += 1
        elif message == "error initializing process":
            soak.init_errors += 1
            if "timed out" in str(rec.get("exc_info", "")) or "timed out" in line.decode(errors="replace"):
                soak.init_timeouts += 1
        elif message == "process exited with non-zero exit code -9":
            pass  # the soak's own recycling (SIGKILL), or LiveKit's kill after a time-out (counted above)
        elif rec.get("level") in ("ERROR", "CRITICAL") and len(soak.errors) < 20:
            soak.errors.append(message[:200])


def _recycle(pid: int, soak: Soak) -> None:
    """An idle job process ends, as after a job: the pool starts another."""
    try:
        os.kill(pid, signal.SIGKILL)
        soak.recycled += 1
    except ProcessLookupError:
        pass


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


async def run(args: argparse.Namespace) -> dict[str, Any]:
    import agent

    soak = Soak()
    port = free_port()
    server = await fake_livekit(soak, port)
    data_dir = Path(args.data_dir or tempfile.mkdtemp(prefix="bench-soak-"))
    env = {
        **os.environ,
        "LIVEKIT_URL": f"ws://127.0.0.1:{port}",
        "LIVEKIT_API_KEY": "soak-key",
        "LIVEKIT_API_SECRET": "soak-secret-that-is-long-enough-for-hs256",
        "OPENAI_API_KEY": os.environ.get("OPENAI_API_KEY") or "sk-soak-offline",  # plugins are made, never called
        "MEMORY_DATA_DIR": str(data_dir),
        "MEMORY_LLM_CHECK": "off",  # no LLM server: the plugins are never called
        "PYTHONUNBUFFERED": "1",
    }
    load = [multiprocessing.Process(target=_busy, daemon=True) for _ in range(args.load)]
    for p in load:
        p.start()
    log_path = data_dir / "worker.log"
    started = time.monotonic()
    with open(log_path, "w") as log_file:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(ROOT / "agent.py"), "start",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, env=env, cwd=str(ROOT),
        )  # fmt: skip
        assert proc.stdout is not None
        reader = asyncio.create_task(read_log(proc.stdout, soak, args.recycle_after, log_file))
        try:
            await asyncio.wait_for(proc.wait(), args.seconds)
            soak.errors.append(f"the worker exited early with code {proc.returncode}")
        except TimeoutError:
            pass
        finally:
            load_avg = os.getloadavg()
            if proc.returncode is None:
                proc.send_signal(signal.SIGINT)  # a graceful stop, as on a deploy
                try:
                    await asyncio.wait_for(proc.wait(), 60)
                except TimeoutError:
                    proc.kill()
                    await proc.wait()
            await asyncio.wait_for(reader, 10)
            for p in load:
                p.kill()
            await server.cleanup()
    return {
        "bench": "start_soak",
        "seconds": round(time.monotonic() - started, 1),
        "load_processes": args.load,
        "load_average_1m_at_end": round(load_avg[0], 2),
        "cores": os.cpu_count(),
        "initialize_process_timeout_s": agent.PREWARM_TIMEOUT_S,
        "registered": soak.registered,
        "prewarms": len(soak.prewarm_s),
        "init_timeout_kills": soak.init_timeouts,
        "init_errors": soak.init_errors,
        "recycled_idle_processes": soak.recycled,
        "prewarm_s_p50": pct(soak.prewarm_s, 50),
        "prewarm_s_p95": pct(soak.prewarm_s, 95),
        "prewarm_s_max": max(soak.prewarm_s) if soak.prewarm_s else None,
        "prewarm_s_over_10": sum(1 for s in soak.prewarm_s if s > 10.0),
        "prewarm_s": sorted(round(s, 2) for s in soak.prewarm_s),
        "worker_errors": soak.errors,
        "worker_log": str(log_path),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=300.0, help="how long the worker runs (default 300)")
    parser.add_argument("--load", type=int, default=2, help="busy processes beside it (default 2)")
    parser.add_argument(
        "--recycle-after",
        type=float,
        default=5.0,
        help="seconds after which a ready idle process is ended, as after a job (0: never)",
    )
    parser.add_argument("--data-dir", default="", help="the worker's MEMORY_DATA_DIR (default: a new temporary one)")
    args = parser.parse_args(argv)
    out = asyncio.run(run(args))
    print(f"{'prewarms':28} {out['prewarms']}")
    print(f"{'killed for init timeout':28} {out['init_timeout_kills']}")
    print(f"{'prewarm p50 / p95 / max':28} {out['prewarm_s_p50']} / {out['prewarm_s_p95']} / {out['prewarm_s_max']} s")
    print(f"{'over LiveKit default 10 s':28} {out['prewarm_s_over_10']}")
    print(f"{'timeout set (agent.py)':28} {out['initialize_process_timeout_s']} s")
    print(f"{'load average at the end':28} {out['load_average_1m_at_end']} ({out['load_processes']} busy processes)")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
