"""The write path's throughput, with and without the write-time index (issue 32).

    uv run python -m bench.latency.write_path [--data ../shared/eval/locomo.dev.json] [--turns 200]

Each turn is written through `MemoryStore.add_raw` as NORMAL writes a spoken turn: its
session's turn before it as context, its time as the day said. "plain" writes with the
index switches off (MEMORY_RETRIEVAL_INDEX_CONTEXT / _INDEX_DATES), "indexed" with them
on: one embedding of the turn and the question it answers instead of the turn alone, the
dates resolved, a longer lexical form. The two alternate in batches of ten on two
collections of one embedded Postgres, so a busy machine slows both alike. No cache: every
write embeds. Prints writes per second and ms per write (p50/p95) for each, the load
average, and a final JSON line.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from bench.common.evaldata import EvalDataError, default_eval_dir, load_retrieval
from memory.settings import load_settings
from memory.storage.store import MemoryStore

BATCH = 10


def turns(path: Path, n: int) -> list[tuple[str, list[str], str | None]]:
    """(text, context, said at) of the file's first `n` memories, in order."""
    data = load_retrieval(path)
    out: list[tuple[str, list[str], str | None]] = []
    for store in data.stores:
        before: dict[object, str] = {}
        for m in store.memories:
            context = [before[m.session]] if m.session in before else []
            out.append((m.text, context, m.timestamp))
            if m.session is not None:
                before[m.session] = m.text
            if len(out) >= n:
                return out
    return out


def _open(data_dir: Path, indexed: bool) -> MemoryStore:
    flag = "on" if indexed else "off"
    env = {"MEMORY_DATA_DIR": str(data_dir), "MEMORY_COLLECTION": f"write_{'indexed' if indexed else 'plain'}",
           "MEMORY_RETRIEVAL_INDEX_CONTEXT": flag, "MEMORY_RETRIEVAL_INDEX_DATES": flag}  # fmt: skip
    return MemoryStore.open(load_settings(env, dotenv=False))


def _figures(ms: list[float], wall: float) -> dict[str, float]:
    ms = sorted(ms)
    return {
        "writes": len(ms),
        "writes_per_s": round(len(ms) / wall, 2),
        "p50_ms": round(statistics.median(ms), 1),
        "p95_ms": round(ms[max(0, int(0.95 * len(ms)) - 1)], 1),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.latency.write_path", description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=default_eval_dir() / "locomo.dev.json")
    ap.add_argument("--turns", type=int, default=200, help="turns written per variant (default 200)")
    args = ap.parse_args(argv)
    try:
        sample = turns(args.data, args.turns)
    except EvalDataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    data_dir = Path(tempfile.mkdtemp(prefix="bench-write-"))
    atexit.register(shutil.rmtree, data_dir, True)  # first registered, last run: after the server stops
    stores = {"plain": _open(data_dir, False), "indexed": _open(data_dir, True)}
    times: dict[str, list[float]] = {k: [] for k in stores}
    wall: dict[str, float] = dict.fromkeys(stores, 0.0)
    user = f"bench-write-{uuid.uuid4().hex[:8]}"
    try:
        for store in stores.values():  # warm: the model, the pool, the plans
            store.add_raw(user, "warming up", context=["assistant: hello?"])
        for start in range(0, len(sample), BATCH):
            for name, store in stores.items():
                began = time.perf_counter()
                for text, context, said in sample[start : start + BATCH]:
                    t0 = time.perf_counter()
                    store.add_raw(user, text, metadata={"timestamp": said} if said else None, context=context)
                    times[name].append((time.perf_counter() - t0) * 1000)
                wall[name] += time.perf_counter() - began
    finally:
        for store in stores.values():
            store.close()
    load = [round(x, 2) for x in os.getloadavg()]
    result = {name: _figures(times[name], wall[name]) for name in stores}
    print(f"write path, {len(sample)} turns each from {args.data.name} (add_raw: embedding, Mem0, SQL)")
    print(f"  {'variant':<8} {'writes/s':>9} {'p50 ms':>8} {'p95 ms':>8}")
    for name, f in result.items():
        print(f"  {name:<8} {f['writes_per_s']:>9.2f} {f['p50_ms']:>8.1f} {f['p95_ms']:>8.1f}")
    print(f"  load average {load[0]} {load[1]} {load[2]}")
    print(json.dumps({"bench": "write_path", "turns": len(sample), "load_avg": load, **result}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
