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
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.fleet.calls import TABLE, Fleet, Watch, run_calls
from bench.fleet.fleet_data import clear_run_rows, ensure_loaded
from bench.fleet.plan import Call, plan_calls
from bench.fleet.report import assess, mean, pct, print_table, round1, round2


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
        cpu_s_per_call_on=round2(mean([c.cpu_s for c in plan if c.memory and c.cpu_s is not None])),
        cpu_s_per_call_off=round2(mean([c.cpu_s for c in plan if not c.memory and c.cpu_s is not None])),
        uss_mb_at_call_end_on=round1(mean([c.uss_mb for c in plan if c.memory and c.uss_mb is not None])),
        uss_mb_at_call_end_off=round1(mean([c.uss_mb for c in plan if not c.memory and c.uss_mb is not None])),
        retention_runs=runs_after - runs_before,
        drained=fleet.drained,
        job_prewarm_s_p50=pct(fleet.job_prewarm_s, 50),
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


def main(argv: list[str] | None = None) -> None:
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
    args = ap.parse_args(argv)
    if args.smoke:
        args.users, args.per_user, args.calls, args.callers, args.contested_pairs = 50, 400, 16, 6, 2
        args.pss_processes = 3
        args.data_dir = str(Path(args.data_dir) / "smoke")
    out = asyncio.run(amain(args))
    print_table(out)
    print(json.dumps(out, default=str))


if __name__ == "__main__":
    main()
