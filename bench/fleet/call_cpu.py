"""Memory's share of a call's CPU, on one worker: `python -m bench.fleet.call_cpu`.

The calls of `bench.fleet.run` (its plan: greeting, "Do you remember my lucky word?", "Please
remember that my lucky word is ...", "Remember that my seat for trip ... is ..."), each in
a job process of its own forked and prewarmed as `bench.fleet.fleet_worker` does (LiveKit's
forkserver preloads, `agent.prewarm`), run one at a time on ONE worker against one
embedded Postgres: memory-on and memory-off calls of the same scripts, interleaved.
Without the fleet's other workers, PgBouncer, the kill and the PSS measurement, the
job process's CPU per call is measured with the least else running beside it.

For each call: the job process's CPU seconds from after prewarm to the end of the call
(its journal drained and its session closed), and the same per kind of thread (the event
loop, memory's read/write/upkeep pools, retrieval, the native threads: the embedder's
OpenMP team and Silero's onnxruntime). Reports CPU per call on and off with 95%
intervals, memory's share (on - off) / off, and where the difference went.

The database's CPU is counted too (`db_cpu_s`): the embedded server's processes (the
postmaster, its backends and workers, and the children it reaped meanwhile, through its
`cutime`/`cstime`), read from /proc when the call starts and when it is done. Calls run one
at a time on one worker, so what the server spent in between is the call's (its background
writers and autovacuum too, alike for memory on and off): work moved from the job process
into Postgres stays in the figure. `memory_cpu_share` is the whole call's (job process plus
Postgres); `memory_cpu_share_job_only` the job process's alone.
Prints a table and, last, one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import statistics
import tempfile
from pathlib import Path
from typing import Any

from bench.common.stats import mean_interval
from bench.fleet.calls import TABLE, Fleet, run_calls
from bench.fleet.fleet_data import clear_run_rows, ensure_loaded
from bench.fleet.plan import plan_calls

_TICK = os.sysconf("SC_CLK_TCK")


def postgres_cpu_s(pgdata: Path) -> float | None:
    """CPU seconds the server under `pgdata` has used so far: the postmaster's own and its
    reaped children's, plus every live child's (backends, workers). None when not running."""
    try:
        postmaster = int((pgdata / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    total = 0
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # ended meanwhile
        pid, ppid = int(proc.name), int(fields[1])
        if pid == postmaster:  # utime, stime, cutime, cstime: fields 14-17 of stat
            total += sum(int(x) for x in fields[11:15])
        elif ppid == postmaster:
            total += int(fields[11]) + int(fields[12])
    return total / _TICK


def _mean(values: list[float]) -> float | None:
    return round(statistics.mean(values), 3) if values else None


def summarise(calls: list[Any]) -> dict[str, Any]:
    """CPU per call on and off, the share, and the per-thread means."""
    on = [c for c in calls if c.memory and c.cpu_s is not None]
    off = [c for c in calls if not c.memory and c.cpu_s is not None]
    job_on, job_off = [c.cpu_s for c in on], [c.cpu_s for c in off]
    db_on = [getattr(c, "db_cpu_s", None) or 0.0 for c in on]
    db_off = [getattr(c, "db_cpu_s", None) or 0.0 for c in off]
    on_s = [j + d for j, d in zip(job_on, db_on, strict=True)]  # the whole call: job process + Postgres
    off_s = [j + d for j, d in zip(job_off, db_off, strict=True)]
    for c in on + off:  # what threads that ended before the call's end used (the total counts them)
        c.cpu_s_by_thread = {**c.cpu_s_by_thread, "ended threads": max(0.0, c.cpu_s - sum(c.cpu_s_by_thread.values()))}
    threads = sorted({k for c in on + off for k in c.cpu_s_by_thread})
    by_thread = {
        name: {
            "on": _mean([c.cpu_s_by_thread.get(name, 0.0) for c in on]),
            "off": _mean([c.cpu_s_by_thread.get(name, 0.0) for c in off]),
        }
        for name in threads
    }
    share = job_share = None
    if on_s and off_s:
        share = round((statistics.mean(on_s) - statistics.mean(off_s)) / statistics.mean(off_s), 4)
        job_share = round((statistics.mean(job_on) - statistics.mean(job_off)) / statistics.mean(job_off), 4)
    return {
        "calls_on": len(on_s),
        "calls_off": len(off_s),
        "cpu_s_per_call_on": _mean(on_s),
        "cpu_s_per_call_off": _mean(off_s),
        "cpu_s_per_call_on_ci95": [round(x, 3) for x in mean_interval(on_s)] if len(on_s) > 1 else None,
        "cpu_s_per_call_off_ci95": [round(x, 3) for x in mean_interval(off_s)] if len(off_s) > 1 else None,
        "memory_cpu_share": share,
        "memory_cpu_share_job_only": job_share,
        "job_cpu_s_per_call_on": _mean(job_on),
        "job_cpu_s_per_call_off": _mean(job_off),
        "db_cpu_s_per_call_on": _mean(db_on),
        "db_cpu_s_per_call_off": _mean(db_off),
        "db_cpu_s_per_call_on_ci95": [round(x, 3) for x in mean_interval(db_on)] if len(db_on) > 1 else None,
        "db_cpu_s_per_call_off_ci95": [round(x, 3) for x in mean_interval(db_off)] if len(db_off) > 1 else None,
        "cpu_s_by_thread": dict(sorted(by_thread.items(), key=lambda kv: -((kv[1]["on"] or 0) - (kv[1]["off"] or 0)))),
        "cpu_s_each_on": [round(x, 2) for x in on_s],
        "cpu_s_each_off": [round(x, 2) for x in off_s],
    }


def _count_postgres(fleet: Fleet, pgdata: Path) -> None:
    """Each call's `db_cpu_s`: the server's CPU from the call's start to its end (one call at a time)."""
    at_start: dict[str, float] = {}
    on_event = fleet.on_event

    def counted(worker: Any, ev: dict[str, Any]) -> None:
        kind, call_id = ev.get("ev"), ev.get("call_id", "")
        now = postgres_cpu_s(pgdata) if kind in ("call_started", "call_done") else None
        if kind == "call_started" and now is not None:
            at_start[call_id] = now
        on_event(worker, ev)
        call = fleet.calls.get(call_id)
        if kind == "call_done" and call is not None and now is not None and call_id in at_start:
            call.db_cpu_s = round(now - at_start.pop(call_id), 3)  # type: ignore[attr-defined]

    fleet.on_event = counted  # type: ignore[method-assign]


async def amain(args: argparse.Namespace) -> dict[str, Any]:
    from memory.storage.postgres import embedded_url

    data = Path(args.data_dir)
    data.mkdir(parents=True, exist_ok=True)
    os.chmod(data, 0o755)  # the embedded server's own user (as root) reaches its socket
    direct = embedded_url(data / "pg")
    ensure_loaded(direct, TABLE, args.users, args.per_user)
    plan, callers = plan_calls(args, random.Random(args.seed))
    clear_run_rows(direct, TABLE, callers)
    run_dir = Path(tempfile.mkdtemp(prefix="bench-call-cpu-"))
    os.chmod(run_dir, 0o755)
    fleet = Fleet(args, direct, run_dir, [])
    _count_postgres(fleet, data / "pg")
    load_start = os.getloadavg()[0]
    try:
        await run_calls(fleet, plan, args)
    finally:
        await fleet.stop()
        shutil.rmtree(run_dir, ignore_errors=True)
    out = {"bench": "call_cpu", "stt": args.stt, "users": args.users, "per_user": args.per_user, **summarise(plan)}
    out["errors"] = fleet.errors[:10]
    out["load_average_1m"] = [round(load_start, 2), round(os.getloadavg()[0], 2)]
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=12, help="memory-on calls (default 12), as many off")
    ap.add_argument("--callers", type=int, default=4, help="callers making them (default 4)")
    ap.add_argument("--users", type=int, default=50)
    ap.add_argument("--per-user", type=int, default=1000)
    ap.add_argument("--stt", default="realtime", choices=("realtime", "batch"))
    ap.add_argument("--seed", type=int, default=28)
    ap.add_argument("--max-minutes", type=float, default=60.0)
    ap.add_argument("--data-dir", default=os.environ.get("BENCH_CALL_CPU_DIR", "/tmp/bench-call-cpu"))
    args = ap.parse_args(argv)
    # The fleet's plan and worker, cut to one worker taking one call at a time.
    args.workers, args.per_worker, args.idle, args.contested_pairs, args.off_every = 1, 1, 1, 0, 1
    args.db_max_connections, args.kill, args.replicas = 3, False, 0  # no read replicas (`bench.fleet.run --replicas`)
    out = asyncio.run(amain(args))
    print(f"calls on / off: {out['calls_on']} / {out['calls_off']}; load average {out['load_average_1m']}")
    print(f"CPU s per call on  {out['cpu_s_per_call_on']} {out['cpu_s_per_call_on_ci95']}")
    print(f"CPU s per call off {out['cpu_s_per_call_off']} {out['cpu_s_per_call_off_ci95']}")
    print(f"  of which Postgres on {out['db_cpu_s_per_call_on']} {out['db_cpu_s_per_call_on_ci95']}, "
          f"off {out['db_cpu_s_per_call_off']} {out['db_cpu_s_per_call_off_ci95']}")  # fmt: skip
    print(f"memory's share (on - off) / off, Postgres included: {out['memory_cpu_share']}; "
          f"the job process alone: {out['memory_cpu_share_job_only']}")  # fmt: skip
    for name, v in out["cpu_s_by_thread"].items():
        print(f"  {name:24} on {v['on']}  off {v['off']}")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
