"""How long a job process takes to get ready: `python -m bench.ops.prewarm`.

LiveKit kills a job process whose prewarm (agent.prewarm, LiveKit's `setup_fnc`)
does not finish within the server's `initialize_process_timeout`, and starts another;
on 2 busy cores that became a loop of kills. No LiveKit server can run here, so this
starts fresh processes as LiveKit's pool does (`--concurrent` at once, as a `start`
worker keeps one idle process per core), each importing agent.py and running its
prewarm, optionally beside `--load` processes that keep cores busy, and reports the
distribution of the prewarm time against agent.PREWARM_TIMEOUT_S.

Prints a table and, last, one JSON line.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import tempfile
import time

from bench.common.paths import ROOT as REPO_ROOT

_CHILD = r"""
import json, os, sys, time, types
t0 = time.perf_counter()
import agent
t1 = time.perf_counter()
proc = types.SimpleNamespace(userdata={})
agent.prewarm(proc)
t2 = time.perf_counter()
import memory
memory.close()
print(json.dumps({"import_s": t1 - t0, "prewarm_s": t2 - t1}))
"""


def _burn(stop_at: float) -> None:
    x = 0
    while time.time() < stop_at:
        x = (x * 31 + 7) % 1_000_003


def _one(data_dir: str) -> dict[str, float]:
    import subprocess

    root = REPO_ROOT
    env = {**os.environ, "MEMORY_DATA_DIR": data_dir, "OPENAI_API_KEY": "sk-bench-offline", "PYTHONPATH": str(root)}
    out = subprocess.run([sys.executable, "-c", _CHILD], cwd=tempfile.gettempdir(), env=env,
                         capture_output=True, text=True, timeout=600)  # fmt: skip
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=12, help="job processes in all (default 12)")
    parser.add_argument("--concurrent", type=int, default=2, help="started at once (default 2: one per core)")
    parser.add_argument("--load", type=int, default=2, help="busy processes beside them (default 2)")
    parser.add_argument("--data-dir", default=None, help="memory data directory (default: a new temporary one)")
    args = parser.parse_args(argv)
    import agent

    data_dir = args.data_dir or tempfile.mkdtemp(prefix="bench-prewarm-")
    _one(data_dir)  # the embedded Postgres is created once, as on a worker's first start
    stop_at = time.time() + 3600
    burners = [mp.Process(target=_burn, args=(stop_at,), daemon=True) for _ in range(args.load)]
    for b in burners:
        b.start()
    results: list[dict[str, float]] = []
    try:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(args.concurrent) as pool:
            results = list(pool.map(lambda _i: _one(data_dir), range(args.runs)))
    finally:
        for b in burners:
            b.terminate()
    pre = [r["prewarm_s"] for r in results]
    imp = [r["import_s"] for r in results]
    timeout = agent.PREWARM_TIMEOUT_S
    print(
        f"{args.runs} job processes, {args.concurrent} at once, "
        f"{args.load} busy processes beside, {os.cpu_count()} cores"
    )
    print(f"{'':10} {'p50':>7} {'p95':>7} {'max':>7}")
    for name, vals in (("import", imp), ("prewarm", pre)):
        print(f"{name:10} {_pct(vals, 50):>6.2f}s {_pct(vals, 95):>6.2f}s {max(vals):>6.2f}s")
    print(f"initialize_process_timeout {timeout:g} s: worst prewarm is {max(pre) / timeout:.0%} of it")
    print(json.dumps({"bench": "prewarm", "runs": args.runs, "concurrent": args.concurrent, "load": args.load,
                      "prewarm_s": sorted(round(v, 2) for v in pre), "import_s_p50": round(_pct(imp, 50), 2),
                      "prewarm_s_p50": round(_pct(pre, 50), 2), "prewarm_s_p95": round(_pct(pre, 95), 2),
                      "prewarm_s_max": round(max(pre), 2), "timeout_s": timeout,
                      "killed": sum(1 for v in pre if v > timeout)}))  # fmt: skip


if __name__ == "__main__":
    main()
