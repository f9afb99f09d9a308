"""What memory costs a call in RAM, as LiveKit runs the worker: `python -m bench.fleet.job_memory`.

Runs `agent.py start` (memory on) and `bench/common/plain_agent.py start` (the same worker
without memory: LiveKit, the OpenAI plugins and the Silero VAD) one after the other,
each against `bench.ops.start_soak`'s stand-in LiveKit server, with `--processes` N
prewarmed job processes (AGENT_IDLE_PROCESSES). Once all N have finished their prewarm
and sat idle for `--settle` seconds, it reads the proportional set size (PSS: each
shared page counted once, split among the processes that map it) of the N job processes
and of LiveKit's forkserver they were forked from, and divides by N: what one more call
costs the pod. Memory on minus memory off is memory's share of a call.

The memory worker gets an embedded Postgres of its own (a temporary MEMORY_DATA_DIR) or
`--database-url`; the database's own processes are not counted (they live on the database
machine in a fleet). LiveKit's `start` serves a health check on port 8081: a second
`start` on the machine must end first (the bench waits for the port).

Prints a table and, last, one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common.livekit_stub import Soak, fake_livekit, free_port
from bench.common.paths import ROOT as REPO_ROOT

ROOT = REPO_ROOT
HEALTH_PORT = 8081  # LiveKit's health check in `start` (agent.py)
MB = 1024 * 1024


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("", port))
            return True
        except OSError:
            return False


async def _wait_for_health_port(limit_s: float) -> None:
    deadline = time.monotonic() + limit_s
    while not _port_free(HEALTH_PORT):
        if time.monotonic() > deadline:
            raise SystemExit(f"bench.fleet.job_memory: port {HEALTH_PORT} stayed busy (another worker's `start`)")
        await asyncio.sleep(1.0)


def process_memory(pid: int) -> dict[str, float]:
    """RSS, USS and PSS of one process, in MB."""
    import psutil

    info = psutil.Process(pid).memory_full_info()
    return {"rss": info.rss / MB, "uss": info.uss / MB, "pss": info.pss / MB}


def worker_tree(main_pid: int, job_pids: set[int]) -> dict[str, Any]:
    """The worker's processes by role: its main process, LiveKit's forkserver, the job
    processes (those that logged "process initialized"), anything else (not Postgres)."""
    import psutil

    main = psutil.Process(main_pid)
    out: dict[str, Any] = {"main": process_memory(main_pid), "forkserver": None, "jobs": {}, "other": []}
    for child in main.children(recursive=True):
        try:
            name, cmd = child.name(), " ".join(child.cmdline())
            if "postgres" in name or "pg_ctl" in name:
                continue
            if child.pid in job_pids:
                out["jobs"][child.pid] = process_memory(child.pid)
            elif "forkserver" in cmd:
                out["forkserver"] = process_memory(child.pid)
            else:
                out["other"].append({"pid": child.pid, "cmd": cmd[:80], **process_memory(child.pid)})
        except psutil.Error:
            continue
    return out


async def measure(label: str, script: Path, args: argparse.Namespace, extra_env: dict[str, str]) -> dict[str, Any]:
    """Start the worker, wait for N prewarmed idle job processes, read their memory, stop it."""
    await _wait_for_health_port(args.port_wait)
    soak, port = Soak(), free_port()
    stand_in = await fake_livekit(soak, port)
    env = {
        **os.environ,
        "LIVEKIT_URL": f"ws://127.0.0.1:{port}",
        "LIVEKIT_API_KEY": "bench-key",
        "LIVEKIT_API_SECRET": "bench-secret-that-is-long-enough-for-hs256",
        "OPENAI_API_KEY": "sk-bench-offline",  # plugins are made, never called
        "MEMORY_LLM_CHECK": "off",
        "AGENT_IDLE_PROCESSES": str(args.processes),
        "PYTHONUNBUFFERED": "1",
        **extra_env,
    }
    env.pop("PROMETHEUS_PORT", None)
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(script), "start",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, env=env, cwd=str(ROOT),
    )  # fmt: skip
    assert proc.stdout is not None
    ready: dict[int, float] = {}
    errors: list[str] = []
    log_lines: list[str] = []

    async def read() -> None:
        assert proc.stdout is not None
        while line := await proc.stdout.readline():
            text = line.decode(errors="replace")
            log_lines.append(text)
            try:
                rec = json.loads(text)
            except ValueError:
                continue
            if rec.get("message") == "process initialized" and isinstance(rec.get("pid"), int):
                ready[rec["pid"]] = float(rec.get("elapsed_time") or 0.0)
            elif rec.get("level") in ("ERROR", "CRITICAL") and len(errors) < 10:
                errors.append(str(rec.get("message"))[:200])

    reader = asyncio.create_task(read())
    try:
        deadline = time.monotonic() + args.timeout
        while len(ready) < args.processes:
            if proc.returncode is not None or time.monotonic() > deadline:
                tail = "".join(log_lines[-15:])
                raise SystemExit(
                    f"bench.fleet.job_memory: {label}: {len(ready)}/{args.processes} processes ready\n{tail}"
                )
            await asyncio.sleep(0.2)
        ready_s = time.monotonic() - started
        await asyncio.sleep(args.settle)  # idle, as prewarmed processes wait for calls
        tree = worker_tree(proc.pid, set(ready))
        load = os.getloadavg()
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGINT)
            try:
                await asyncio.wait_for(proc.wait(), 60)
            except TimeoutError:
                proc.kill()
                await proc.wait()
        try:  # to the pipe's end: a transport left open is closed after the loop, with a traceback
            await asyncio.wait_for(reader, 10)
        except TimeoutError:
            reader.cancel()
        await stand_in.cleanup()
    jobs = list(tree["jobs"].values())
    fork_pss = tree["forkserver"]["pss"] if tree["forkserver"] else 0.0
    n = len(jobs)
    return {
        "label": label,
        "processes": n,
        "pss_mb_per_call": round((sum(j["pss"] for j in jobs) + fork_pss) / max(1, n), 1),
        "job_pss_mb_mean": round(statistics.mean(j["pss"] for j in jobs), 1) if jobs else None,
        "job_uss_mb_mean": round(statistics.mean(j["uss"] for j in jobs), 1) if jobs else None,
        "job_rss_mb_mean": round(statistics.mean(j["rss"] for j in jobs), 1) if jobs else None,
        "forkserver_pss_mb": round(fork_pss, 1),
        "forkserver_rss_mb": round(tree["forkserver"]["rss"], 1) if tree["forkserver"] else None,
        "main_pss_mb": round(tree["main"]["pss"], 1),
        "other_processes": tree["other"],
        "prewarm_s": sorted(round(s, 2) for s in ready.values()),
        "all_ready_after_s": round(ready_s, 1),
        "registered": soak.registered,
        "worker_errors": errors,
        "load_average_1m": round(load[0], 2),
    }


async def amain(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, list[dict[str, Any]]] = {"on": [], "off": []}
    for round_ in range(args.rounds):
        for label in ("on", "off") if round_ % 2 == 0 else ("off", "on"):
            if label == "on":
                data_dir = tempfile.mkdtemp(prefix="bench-job-memory-")
                os.chmod(data_dir, 0o755)  # the embedded server's own user reaches its socket
                env = {"MEMORY_DATA_DIR": data_dir}
                if args.database_url:
                    env["MEMORY_DATABASE_URL"] = args.database_url
                res = await measure("memory on", ROOT / "agent.py", args, env)
            else:
                res = await measure("memory off", ROOT / "bench" / "common" / "plain_agent.py", args, {})
            print(f"{res['label']:>10}: {res['pss_mb_per_call']:.1f} MB PSS per call "
                  f"({res['processes']} job processes, load {res['load_average_1m']})", flush=True)  # fmt: skip
            results[label].append(res)
    on = statistics.median(r["pss_mb_per_call"] for r in results["on"])
    off = statistics.median(r["pss_mb_per_call"] for r in results["off"])
    return {
        "bench": "job_memory",
        "processes": args.processes,
        "rounds": args.rounds,
        "pss_mb_per_call_memory_on": round(on, 1),
        "pss_mb_per_call_memory_off": round(off, 1),
        "memory_share_mb_per_call": round(on - off, 1),
        "target_mb": 60,
        "runs": results,
        "cores": os.cpu_count(),
    }


def print_table(out: dict[str, Any]) -> None:
    header = (
        f"{'worker':>10} {'per call PSS':>13} {'job PSS':>8} {'job USS':>8} {'job RSS':>8} "
        f"{'forkserver':>11} {'prewarm max':>12}"
    )
    print(header)
    print("-" * len(header))
    for label in ("on", "off"):
        for r in out["runs"][label]:
            print(
                f"{r['label']:>10} {r['pss_mb_per_call']:>10.1f} MB {r['job_pss_mb_mean']:>5.0f} MB "
                f"{r['job_uss_mb_mean']:>5.0f} MB {r['job_rss_mb_mean']:>5.0f} MB {r['forkserver_pss_mb']:>8.0f} MB "
                f"{max(r['prewarm_s'] or [0]):>10.1f} s"
            )
    print(f"memory's share of a call: {out['memory_share_mb_per_call']:.1f} MB PSS "
          f"(target <= {out['target_mb']} MB), {out['processes']} job processes a worker")  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=6, help="prewarmed job processes a worker (default 6)")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds idle before reading memory (default 5)")
    parser.add_argument("--rounds", type=int, default=1, help="on/off pairs, order alternated (default 1)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds for all processes to be ready")
    parser.add_argument("--port-wait", type=float, default=600.0, help="seconds to wait for port 8081 to be free")
    parser.add_argument("--database-url", default="", help="memory on: a shared Postgres (default: embedded)")
    args = parser.parse_args(argv)
    out = asyncio.run(amain(args))
    print_table(out)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
