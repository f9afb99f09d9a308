"""Every thread pool of memory, and the admission of reads to theirs.

Store calls block a thread (psycopg, the embedder). They get small pools of their own:
a stalled database then ties up these threads only, never the event loop's default
executor that LiveKit and its plugins also use. Each kind of work has its pool, so one
kind that hangs never takes the threads another needs:

- reads (`run_read`): the turns' look-ups, the profile, the forget check, earlier
  conversations; `MEMORY_MAX_READS_IN_FLIGHT` threads, admitted within the reply's budget;
- writes (`run_write`): the journal's rows into the store, at a lower CPU priority. A
  write that hangs (a table lock, a primary waiting on a dead synchronous standby) leaves
  its thread behind each time its attempt times out: such attempts queue up here, never
  on the reads' threads, and are no-ops when they finally run (write ids);
- upkeep (`run_upkeep`): session-start work that can take seconds on a large store
  (re-indexing rows an older version wrote), one job at a time;
- contexts (`CONTEXT_POOL`): the shared contexts' reads and writes, whose tools have a
  timeout of their own;
- retrieval (`RETRIEVAL_POOL`, `DENSITY_POOL`, `INDEX_POOL`): the lexical recall that runs
  beside a look-up's embedding, the per-user densities (seconds of numpy), one at a time,
  and the refreshes of the caller's memories held in the process;
- text (`run_text`): long turns redacted and split off the event loop, one at a time;
- the operator's pages (`web_pool`), sized by the web app's settings.

Nothing else in memory/ makes a pool or uses the event loop's default executor
(tests/ops/test_threads.py).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

from memory.types import StoreBusy

logger = logging.getLogger(__name__)

T = TypeVar("T")

WRITE_NICENESS = 10


def _background_priority() -> None:
    """Writes are background work: their threads (and the embedder's OpenMP team, made by
    the thread that first embeds) run at a lower CPU priority than the event loop, which
    an embedding of a long turn on both cores of a busy machine stalled for 150 ms. Per
    thread on Linux; elsewhere a no-op."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), WRITE_NICENESS)
    except (AttributeError, OSError):
        pass


_WRITE_POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="memory-write", initializer=_background_priority)
_UPKEEP_POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memory-upkeep")
# Threads of their own: a stalled database ties up these, never the look-ups' read
# slots or the event loop (the reply in progress goes on while a note is written).
CONTEXT_POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="memory-context")
# The lexical recall of a query runs here while the caller's thread embeds the query;
# sized like the read slots.
RETRIEVAL_POOL = ThreadPoolExecutor(max_workers=3, thread_name_prefix="retrieval")
# Density computations run one at a time on their own thread: they never take a worker
# the reply path's lexical recall needs, and never more than one core's worth of them
# queue up per process.
DENSITY_POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="density")
# The caller's memories held in the process (memory/storage/session_index.py): their load
# and refreshes, in the background, one at a time.
INDEX_POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memory-index")


_TEXT_POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memory-text")


async def run_text(fn: Callable[..., T], /, *args: object) -> T:
    """Run CPU-bound text work (redacting and splitting a long turn) off the event loop."""
    return await asyncio.get_running_loop().run_in_executor(_TEXT_POOL, functools.partial(fn, *args))


def web_pool(max_workers: int) -> ThreadPoolExecutor:
    """The operator's pages' own threads (`memory/web/app.py`): a page's query never takes a
    thread a reply's look-up or a turn's write needs."""
    return ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="memory-web")


async def run_in(pool: ThreadPoolExecutor, fn: Callable[..., T], /, *args: object, **kwargs: object) -> T:
    """Run a blocking call on one of the pools made here."""
    return await asyncio.get_running_loop().run_in_executor(pool, functools.partial(fn, *args, **kwargs))


async def run_write(fn: Callable[..., T], /, *args: object, **kwargs: object) -> T:
    """Run a blocking store write on the write pool (never on a read's thread)."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_WRITE_POOL, functools.partial(fn, *args, **kwargs))


async def run_upkeep(fn: Callable[..., T], /, *args: object) -> T:
    """Run slow session-start upkeep on its own thread, one job at a time."""
    return await asyncio.get_running_loop().run_in_executor(_UPKEEP_POOL, functools.partial(fn, *args))


# ------------------------------------------------------------------ reads
# Reads beyond this many in flight wait for a slot within their budget, or are refused:
# behind a hung store, a queued look-up could only ever answer long after its turn.
MAX_READS_IN_FLIGHT = 3
_READ_POOL = ThreadPoolExecutor(max_workers=MAX_READS_IN_FLIGHT, thread_name_prefix="memory-read")
_reads_lock = threading.Lock()
_reads_in_flight = 0
# Look-ups refused for this long in a row (seconds) mean reads hang on the store: said
# at WARNING, at most once a minute. A moment of load is not worth a line.
STUCK_READS_WARN_S = 30.0
_refused_since: float | None = None
_stuck_warned_at = float("-inf")


@dataclass(eq=False)
class _Waiter:
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[None]
    granted: bool = False


# Look-ups waiting for a read slot, oldest first, and how long a read takes (a moving
# average): a look-up that could not start and finish within its wait is shed at once.
_waiting: deque[_Waiter] = deque()
_read_s = 0.05


def configure_reads(slots: int) -> None:
    """`MEMORY_MAX_READS_IN_FLIGHT`: the read threads of this process (set by the first
    service; changed only while no read is in flight)."""
    global MAX_READS_IN_FLIGHT, _READ_POOL
    with _reads_lock:
        if slots == MAX_READS_IN_FLIGHT or _reads_in_flight or _waiting:
            return
        old, _READ_POOL = _READ_POOL, ThreadPoolExecutor(max_workers=slots, thread_name_prefix="memory-read")
        MAX_READS_IN_FLIGHT = slots
    old.shutdown(wait=False)


def _expected_s() -> float:
    """When a look-up queued now would be done: the waiters ahead, the slots, a read's time."""
    return (len(_waiting) // MAX_READS_IN_FLIGHT + 1) * _read_s + _read_s


def _release_slot() -> None:
    """A read finished (or a granted waiter left): the slot goes to the oldest waiter."""
    global _reads_in_flight
    with _reads_lock:
        while _waiting:
            waiter = _waiting.popleft()
            waiter.granted = True
            try:
                waiter.loop.call_soon_threadsafe(_grant, waiter)
            except RuntimeError:  # its loop is closed: the next waiter gets the slot
                continue
            return
        _reads_in_flight -= 1


def _grant(waiter: _Waiter) -> None:
    if waiter.future.done():  # it stopped waiting just now: pass the slot on
        _release_slot()
    else:
        waiter.future.set_result(None)


def _refused(why: str) -> StoreBusy:
    global _refused_since, _stuck_warned_at
    now = time.monotonic()
    _refused_since = now if _refused_since is None else _refused_since
    if now - _refused_since >= STUCK_READS_WARN_S and now - _stuck_warned_at >= 60.0:
        _stuck_warned_at = now
        logger.warning(
            "memory reads stuck for %.0f s: every look-up goes without memory until the store answers",
            now - _refused_since,
        )
    return StoreBusy(why)


async def run_read(fn: Callable[..., T], /, *args: object, wait_s: float = 0.0, **kwargs: object) -> T:
    """A store read on the read pool (`MAX_READS_IN_FLIGHT` threads a process).

    With every slot taken it waits for one at most `wait_s` (the reply's budget), in
    order of arrival, and is refused at once (`StoreBusy`) when the reads ahead of it
    mean it could not be done within that time anyway: many sessions in one process
    then shed look-ups instead of queueing them past their replies (docs/hostile-input.md).
    A slot is freed when the thread finishes, not when the caller stops waiting: a hung
    call keeps holding its slot, which is the point.
    """
    global _reads_in_flight, _refused_since
    waiter: _Waiter | None = None
    with _reads_lock:
        if _reads_in_flight < MAX_READS_IN_FLIGHT:
            _reads_in_flight += 1
            _refused_since = None
        elif wait_s <= 0 or _expected_s() > wait_s:
            raise _refused(f"{_reads_in_flight} memory reads already in flight, {len(_waiting)} waiting")
        else:
            loop = asyncio.get_running_loop()
            waiter = _Waiter(loop, loop.create_future())
            _waiting.append(waiter)
    if waiter is not None:
        try:
            await asyncio.wait_for(asyncio.shield(waiter.future), wait_s)
        except (TimeoutError, asyncio.CancelledError) as exc:
            with _reads_lock:
                granted = waiter.granted
                if not granted:
                    _waiting.remove(waiter)
            if granted and not waiter.future.done():
                waiter.future.cancel()  # _grant, still to run, passes the slot on
            elif granted:
                _release_slot()
            if isinstance(exc, asyncio.CancelledError):
                raise
            raise _refused(f"no memory read slot within {wait_s * 1000:.0f} ms") from None

    started = time.perf_counter()

    def release(_: object) -> None:
        global _read_s
        _read_s = 0.8 * _read_s + 0.2 * (time.perf_counter() - started)
        _release_slot()

    future = _READ_POOL.submit(functools.partial(fn, *args, **kwargs))
    future.add_done_callback(release)
    return await asyncio.wrap_future(future)
