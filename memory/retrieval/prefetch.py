"""Recall that starts before the user stops talking, and never waits past a budget.

Interim and final transcripts start the look-up early (`prefetch`); at reply
time `get` reuses the one whose text (and conversation context) matches what
the user finally said, or starts it then, and waits no longer than the budget.
A look-up that finishes late is kept: the next turn with the same words gets it
at once, or, once the context has moved on, gets it only if its own fresh
look-up misses the budget (an older answer beats none).
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import unicodedata
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from memory.errors import retryable
from memory.types import MemoryRecord

logger = logging.getLogger(__name__)

Context = tuple[str, ...]
Fetch = Callable[[str, Context], Awaitable[list[MemoryRecord]]]
_Key = tuple[str, Context]

_PUNCT_RE = re.compile(r"[\W_]+", re.UNICODE)


def transcript_key(text: str) -> str:
    """What must match between a prefetched transcript and the final one."""
    return _PUNCT_RE.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


@dataclass
class RecallResult:
    """One reply's memory look-up, as measured at generation time."""

    records: list[MemoryRecord] = field(default_factory=list)
    waited_s: float = 0.0
    took_s: float | None = None
    prefetched: bool = False
    missed_budget: bool = False
    error: str | None = None
    earlier_context: bool = False  # records of the same words looked up in an earlier context


@dataclass
class _Lookup:
    task: asyncio.Task[list[MemoryRecord]]
    started: float
    finished: float | None = None


class Recaller:
    """Per-session look-ups keyed by transcript and context, bounded in number and in wait.

    `context` returns what else shapes a look-up (the session's earlier turns): the
    same words in a different context are a different look-up.
    """

    def __init__(
        self,
        fetch: Fetch,
        *,
        budget_s: float,
        context: Callable[[], Context] = tuple,
        keep: int = 16,
        ttl_s: float = 30.0,
        max_interim_lookups: int = 2,
    ) -> None:
        self._fetch = fetch
        self._context = context
        self.budget_s = budget_s
        self._keep = keep
        self._ttl_s = ttl_s
        self._max_interim = max_interim_lookups
        self._lookups: OrderedDict[_Key, _Lookup] = OrderedDict()
        self._pending_interim: str | None = None
        self._interim_running: set[asyncio.Task[list[MemoryRecord]]] = set()

    def prefetch(self, text: str, *, final: bool) -> None:
        """Start a look-up for a transcript.

        A final transcript starts at once. Interims start at once too while fewer
        than `max_interim_lookups` are in flight; past that only the newest waits
        for a free slot. With a slow embedder (a remote API) a single slot would
        queue the newest words behind stale ones; unbounded slots would spend a
        look-up on every partial word.
        """
        words = transcript_key(text)
        key = (words, self._context())
        if final:
            # An interim still waiting for a slot is for words the user went on from: run
            # after the turn ends, it would only compete with the reply for the CPU.
            self._pending_interim = None
        if not words or self._fresh(key):
            return
        if final:
            self._start(key, text)
            return
        if len(self._interim_running) >= self._max_interim:
            self._pending_interim = text
            return
        task = self._start(key, text).task
        self._interim_running.add(task)

    async def get(self, text: str) -> RecallResult:
        """The memories for this text, waiting at most the budget; never raises."""
        words = transcript_key(text)
        key = (words, self._context())
        if not words:
            return RecallResult()
        lookup = self._lookups.get(key) if self._fresh(key) else None
        if lookup is not None and lookup.task.done() and (lookup.task.cancelled() or lookup.task.exception()):
            lookup = None  # a failed prefetch gets one fresh try at reply time
        prefetched = lookup is not None
        if lookup is None:
            if self._pending_interim is not None and transcript_key(self._pending_interim) == words:
                self._pending_interim = None  # about to run anyway
            lookup = self._start(key, text)
        t0 = time.perf_counter()
        done, _ = await asyncio.wait({lookup.task}, timeout=self.budget_s)
        waited = time.perf_counter() - t0
        took = (lookup.finished - lookup.started) if lookup.finished else None
        if not done:
            earlier = self._earlier_answer(words)
            if earlier is not None:
                return RecallResult(earlier, waited, None, True, missed_budget=True, earlier_context=True)
            return RecallResult(waited_s=waited, prefetched=prefetched, missed_budget=True)
        if lookup.task.cancelled() or lookup.task.exception() is not None:
            self._lookups.pop(key, None)  # do not cache a failure
            err = "cancelled" if lookup.task.cancelled() else repr(lookup.task.exception())
            return RecallResult(waited_s=waited, took_s=took, prefetched=prefetched, error=err)
        return RecallResult(lookup.task.result(), waited, took, prefetched)

    def clear(self) -> None:
        """Forget the finished look-ups (the user was forgotten: their answers are stale).
        Those still running stay: the reply is waiting for them."""
        for key in [k for k, lookup in self._lookups.items() if lookup.task.done()]:
            del self._lookups[key]

    async def aclose(self) -> None:
        tasks = [lk.task for lk in self._lookups.values() if not lk.task.done()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._lookups.clear()

    # ------------------------------------------------------------ internals
    def _earlier_answer(self, words: str) -> list[MemoryRecord] | None:
        """The newest finished, successful look-up of these words in any context."""
        for (w, _ctx), lookup in reversed(self._lookups.items()):
            task = lookup.task
            if w == words and task.done() and not task.cancelled() and task.exception() is None:
                if time.perf_counter() - (lookup.finished or 0.0) <= self._ttl_s:
                    return task.result()
        return None

    def _fresh(self, key: _Key) -> bool:
        lookup = self._lookups.get(key)
        if lookup is None:
            return False
        if lookup.finished is not None and time.perf_counter() - lookup.finished > self._ttl_s:
            del self._lookups[key]
            return False
        return True

    def _start(self, key: _Key, text: str) -> _Lookup:
        lookup = _Lookup(asyncio.ensure_future(self._fetch(text, key[1])), time.perf_counter())
        lookup.task.add_done_callback(lambda _t, lk=lookup: self._on_done(lk))
        self._lookups[key] = lookup
        self._lookups.move_to_end(key)
        while len(self._lookups) > self._keep:
            self._lookups.popitem(last=False)
        return lookup

    def _on_done(self, lookup: _Lookup) -> None:
        lookup.finished = time.perf_counter()
        if not lookup.task.cancelled() and lookup.task.exception() is not None:
            exc = lookup.task.exception()
            # A busy store is expected under load and already bounded: keep it quiet.
            # So is a store this process could not open: its start-up logged it once.
            level = logging.DEBUG if retryable(exc) else logging.WARNING
            logger.log(level, "memory look-up failed: %r", exc)
        self._interim_running.discard(lookup.task)
        if self._pending_interim is not None and len(self._interim_running) < self._max_interim:
            text, self._pending_interim = self._pending_interim, None
            self.prefetch(text, final=False)
