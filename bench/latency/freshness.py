"""What the freshness check costs a look-up: `python -m bench.latency.freshness [--lookups 200]`.

Each look-up that would read the caller's held rows (memory/storage/session_index.py) first
reads the user's generation on the primary (`SessionIndexes.check`, one small statement), so
that a forget or a redaction another process made is never served (issue 50). This opens a
store of its own (an embedded server in a temporary directory), holds one user of
`--memories` memories, and times `--lookups` look-ups (`Retriever.retrieve`) with the check
and without it, interleaved (A, B, B, A...) so both see the same load, each query's
embedding computed once before (both time the look-up's stages, not the model); and the statement
alone. Reports medians and the paired mean difference with its 95% interval, and the
machine's load. Prints a table and one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

from bench.common.stats import paired
from memory.storage import generations


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.latency.freshness", description=__doc__.split("\n\n")[0])
    ap.add_argument("--lookups", type=int, default=200)
    ap.add_argument("--memories", type=int, default=300)
    ap.add_argument("--data-dir", default=None, help="the store's data directory (default: a new temporary one)")
    args = ap.parse_args(argv)
    data_dir = args.data_dir or tempfile.mkdtemp(prefix="bench-freshness-")
    from memory.retrieval.retriever import Retriever
    from memory.settings import load_settings
    from memory.storage.store import MemoryStore

    store = MemoryStore.open(load_settings({**os.environ, "MEMORY_DATA_DIR": data_dir}, dotenv=False))
    try:
        user = "bench-freshness"
        for i in range(args.memories):
            store.add_raw(user, f"On day {i} I visited friend number {i % 37} in town {i % 11}")
        store.open_session_index(user)
        store.session_index.wait_idle(user)
        retriever = Retriever(store, store.settings.tuned(density=0.0))
        queries = [f"where did I go on day {i}" for i in range(args.lookups)]
        check = store.session_index.check
        with_check: list[float] = []
        without: list[float] = []
        statement: list[float] = []
        for n, query in enumerate(queries):
            retriever.retrieve(user, query)  # its embedding cached: both timings are of the look-up's stages
            order = ((with_check, True), (without, False))
            for timed, on in order if n % 2 else order[::-1]:
                store.session_index.check = check if on else (lambda _user: None)  # type: ignore[method-assign]
                store.session_index.wait_idle(user)  # the refresh after the last look-up: not in this one
                started = time.perf_counter()
                retriever.retrieve(user, query)
                timed.append(1000 * (time.perf_counter() - started))
            started = time.perf_counter()
            generations.current(store.pool, store.table, user)
            statement.append(1000 * (time.perf_counter() - started))
        store.session_index.check = check  # type: ignore[method-assign]
    finally:
        store.close()
    diff = paired(without, with_check)
    load = os.getloadavg()
    print(f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; {args.lookups} look-ups each, interleaved")
    print(f"look-up without the check  median {statistics.median(without):7.2f} ms")
    print(f"look-up with the check     median {statistics.median(with_check):7.2f} ms")
    print(f"added (paired mean)        {diff.diff:7.2f} ms  [{diff.low:.2f}, {diff.high:.2f}] 95%")
    print(f"the statement alone        median {statistics.median(statement):7.2f} ms")
    print(json.dumps({
        "load_avg_1m": round(load[0], 2), "lookups": args.lookups, "memories": args.memories,
        "lookup_median_ms": round(statistics.median(without), 3),
        "lookup_checked_median_ms": round(statistics.median(with_check), 3),
        "check_added_mean_ms": round(diff.diff, 3), "check_added_low_ms": round(diff.low, 3),
        "check_added_high_ms": round(diff.high, 3), "statement_median_ms": round(statistics.median(statement), 3),
    }))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
