"""Prometheus metrics for memory, served on LiveKit's Prometheus port.

LiveKit's worker exposes prometheus_client's registry (or, with
PROMETHEUS_MULTIPROC_DIR, every job process's metrics) on `:PORT/metrics` when
its Prometheus port is enabled; metrics defined here ride along. With the port
off they cost a few counter increments per turn.
"""

from __future__ import annotations

import re
from pathlib import Path

from prometheus_client import Counter, Gauge, Histogram

_MS_BUCKETS = (0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0, 2.0, 5.0)

RECALL_SECONDS = Histogram(
    "memory_recall_seconds", "Time a memory look-up took (store + embedding).", buckets=_MS_BUCKETS
)
REPLY_WAIT_SECONDS = Histogram(
    "memory_reply_wait_seconds", "Time a reply waited for memory at generation time.", buckets=_MS_BUCKETS
)
RECALLS = Counter(
    "memory_recalls_total", "Replies that asked for memory, by outcome.", ["outcome"]
)  # outcome: prefetched | fetched | budget_missed | error
INJECTED = Counter("memory_injected_total", "Memories injected into LLM requests.")
PROFILES = Counter("memory_profiles_injected_total", "LLM requests that carried the session profile.")
GATE = Counter("memory_gate_decisions_total", "Gatekeeper pre-filter decisions.", ["action", "reason"])
WRITES = Counter("memory_writes_total", "Store writes by event (ADD, UPDATE, NOOP).", ["event"])
QUEUE_PENDING = Gauge(
    "memory_write_queue_pending",
    "Turns waiting to be written, per process (a store outage shows here).",
    multiprocess_mode="livesum",
)
WRITE_RETRIES = Counter("memory_write_retries_total", "Store write attempts that failed and will be retried.")
DEAD_LETTERS = Counter("memory_write_dead_letters_total", "Turns that will never be written (the store refused them).")


_LIVE_GAUGE_FILE = re.compile(r"gauge_live\w*?_(\d+)\.db$")


def forget_dead_processes(directory: Path | None) -> list[int]:
    """Drop the live gauges of job processes that died without saying so; their pids.

    In multiprocess mode a process's gauges stay on the metrics page until someone
    calls `mark_process_dead` for it, and a job process that was killed (the OOM
    killer, LiveKit's memory limit or shutdown deadline) never does: its last
    `memory_write_queue_pending` stayed in the sum for ever, beside the process that
    took over its turns, and a backlog alert never cleared. Each job process sweeps
    at start (prewarm). Counters and histograms stay: they are totals.
    """
    if directory is None:
        return []
    import psutil
    from prometheus_client import multiprocess

    dead = set()
    for path in Path(directory).glob("gauge_live*.db"):
        match = _LIVE_GAUGE_FILE.search(path.name)
        if match and not psutil.pid_exists(int(match.group(1))):
            dead.add(int(match.group(1)))
    for pid in sorted(dead):
        multiprocess.mark_process_dead(pid, directory)
    return sorted(dead)
