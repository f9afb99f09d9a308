"""Which of memory's work runs between the end of the user's speech and the reply's
first audio frame (`bench.latency.run --work-window`).

The reply's own wait for memory is measured by the glue; what memory's other work
costs the reply is not: on 2 cores a write's embedding, an archive insert or a
look-up running beside the reply delays it without the reply ever waiting for it.
This records the wall-clock interval of each piece of memory work in a session (the
journal handler, split into turn writes and archive writes; look-ups; profile reads;
forget checks; session-start upkeep) and, per turn, how much of each fell inside
the window [end of speech, first audio]. Instrumentation only: the methods are
wrapped for the run and restored after it.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Work:
    kind: str
    start: float  # perf_counter
    end: float


def _kind_of_write(args: tuple[Any, ...]) -> str:
    turn = args[1] if len(args) > 1 else None
    return "archive_write" if getattr(turn, "kind", "memory") != "memory" else "turn_write"


@contextmanager
def record_work() -> Iterator[list[Work]]:
    """Wrap memory's async work for the duration of the block; yields the log."""
    from memory.livekit.reader import MemoryReader
    from memory.rows import RowHandler

    log: list[Work] = []
    patched: list[tuple[type, str, Any]] = []

    def wrap(cls: type, name: str, kind: str | None) -> None:
        real = getattr(cls, name)

        @functools.wraps(real)
        async def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return await real(*args, **kwargs)
            finally:
                log.append(Work(kind or _kind_of_write(args), t0, time.perf_counter()))

        patched.append((cls, name, real))
        setattr(cls, name, timed)

    wrap(RowHandler, "__call__", None)
    wrap(MemoryReader, "_fetch", "lookup")
    wrap(MemoryReader, "_refresh_profile", "profile_refresh")
    wrap(MemoryReader, "_load_profile", "session_start")
    wrap(MemoryReader, "_check_forget", "forget_check")
    try:
        yield log
    finally:
        for cls, name, real in reversed(patched):
            setattr(cls, name, real)


def in_window(log: list[Work], start: float, end: float) -> dict[str, float]:
    """Milliseconds of each kind of work that overlapped [start, end]."""
    out: dict[str, float] = {}
    for w in log:
        overlap = min(w.end, end) - max(w.start, start)
        if overlap > 0:
            out[w.kind] = out.get(w.kind, 0.0) + overlap * 1000
    return out
