"""Keep the garbage collector's full passes off the reply path.

CPython's cyclic collector now and then makes a *full* pass over every object it
tracks, holding the GIL throughout. A worker process that has loaded LiveKit,
Mem0, jieba, the embedder and the store tracks some 240,000 objects; one pass
over them took about 130 ms on 2 cores, and a reply whose look-up lands on it is
late by that much (`python -m bench.latency.run` measures it). Nearly all of those
objects live as long as the process, so scanning them finds nothing.

`settle` moves them out of the collector's sight (`gc.freeze`) once prewarm has
made them; a full pass then scans only what sessions made since, a few
milliseconds. Garbage is still freed by reference counting; only reference
cycles among frozen objects would stay, and prewarm's objects live for the
process anyway.

LiveKit freezes its own preloaded plugins the same way in the forkserver
(livekit/agents/ipc/_preload_freeze.py), but prewarm runs later, in each job
process, so what it loads is not covered by that.
"""

from __future__ import annotations

import gc
import time


def settle() -> int:
    """Free what is already garbage, then freeze everything left.

    Call once the process's long-lived objects exist (the end of prewarm).
    Returns how many objects are now frozen.
    """
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


def full_pass_ms() -> float:
    """How long one full collection takes now, in milliseconds (for benchmarks)."""
    start = time.perf_counter()
    gc.collect()
    return (time.perf_counter() - start) * 1000


__all__ = ["full_pass_ms", "settle"]
