"""The journal's consumer: each row to the store, oldest first, retried until it is written.

Part of `DurableWriteQueue` (`queue.py` says what is retried and what is dead-lettered,
"Ordering and outages" and "Errors"), kept apart: these are the methods that write.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import time
from dataclasses import dataclass
from typing import Any

from memory.errors import retryable
from memory.journal.codec import decode_turn, encode_turn
from memory.journal.file import DEAD, PENDING
from memory.ops import metrics
from memory.storage.faults import in_tree
from memory.types import Turn, describe_error

logger = logging.getLogger("memory.journal.queue")  # the journal's one logger, whichever module logs

# Failures of one turn that say it cannot be written (`is_turn_failure`), before it is
# dead-lettered; the attempts that met an outage do not count.
MAX_TURN_FAILURES = 5


@dataclass(frozen=True)
class DeadLetter:
    """A turn that will never be written (bad input), with the reason."""

    turn_id: str
    error: str
    attempts: int
    failed_at: float
    turn: Turn | None
    payload: str


def is_turn_failure(exc: BaseException) -> bool:
    """Might this failure be this one turn's (an error that does not say whether to retry:
    a bug its words trigger)? Counted, and dead-lettered after `MAX_TURN_FAILURES`. An
    error that says it is retryable is an outage, retried for as long as it lasts (a
    read-only database during a failover, an API's 503 or 429, a lost connection): a dead
    letter is never written. Third-party errors are read once put into the tree."""
    return retryable(in_tree(exc)) is None


class Consumer:
    """The consumer of a `DurableWriteQueue`: the hold it waits at, the rows it writes."""

    def hold(self, seconds: float) -> None:
        """Hold the store writes for at most `seconds` from now, or until `release`.

        Why: on 2 cores a turn's write (its embedding and insert, GATED's extraction, the
        archive's insert) running beside the reply that is being made delayed that reply's
        first audio, though the reply never waited for it (docs/latency.md). The session
        holds the writes from the end of the user's speech to the reply's first audio
        frame. Only the store work waits: `enqueue` still puts each turn in the journal at
        once (a kill during a hold loses nothing), a write already running goes on, and a
        hold is bounded, so a reply that never comes holds nothing for long."""
        if self._loop is None or self._closed or seconds <= 0:
            return
        self._hold_until = max(self._hold_until, self._loop.time() + seconds)

    def release(self) -> None:
        """End a hold: the held writes go now."""
        self._hold_until = 0.0
        self._notify(self._released)

    @property
    def held(self) -> bool:
        return self._loop is not None and self._loop.time() < self._hold_until

    async def _wait_hold(self) -> None:
        assert self._loop is not None and self._released is not None
        if self._hold_until > self._loop.time():
            self.hold_waits += 1
        while (left := self._hold_until - self._loop.time()) > 0:
            self._released.clear()
            try:
                await asyncio.wait_for(self._released.wait(), left)
            except TimeoutError:
                if self._hold_until and self._loop.time() >= self._hold_until:
                    self.hold_timeouts += 1
                    self._hold_until = 0.0

    def backoff_delay(self, failures: int) -> float:
        """Seconds to wait after `failures` consecutive failures: exponential, capped, jittered.

        "Equal jitter": half the capped exponential plus a random part of the
        other half, so retries from many workers spread out but never collapse
        to a busy loop.
        """
        exp = self.base_backoff_s * (2 ** min(max(failures, 1) - 1, 32))
        cap = min(self.max_backoff_s, exp)
        return cap / 2 + random.uniform(0, cap / 2)

    def _flush_unsaved(self) -> None:
        had = bool(self._unsaved)
        while self._unsaved:
            turn_id, turn = next(iter(self._unsaved.items()))
            try:
                self._insert(turn)
            except Exception as exc:
                logger.warning("journal still refuses turn %s: %s", turn_id, describe_error(exc))
                return
            del self._unsaved[turn_id]
        if had:
            self._spilled_settled()

    def _spilled_settled(self) -> None:
        """Every turn the journal refused is in it now, or in the store: the spill file goes."""
        if not self._unsaved and self._spill is not None:
            self._spill.clear()

    def upcoming(self, kind: str, limit: int) -> list[Turn]:
        """Pending rows of `kind` this queue owns, oldest first, among its next `4 * limit`
        rows (a bounded read: it runs on the loop, and 40,000 turns may be waiting): a
        handler may write them with the row it was given (the archive's batches). Each
        still leaves the journal only after its own turn: nothing changes about loss or
        replays."""
        rows = self._execute(
            "SELECT payload FROM (SELECT seq, payload FROM pending_writes WHERE state = ? AND owner = ?"
            " ORDER BY seq LIMIT ?) WHERE json_extract(payload, '$.kind') = ? ORDER BY seq LIMIT ?",
            (PENDING, self.owner, 4 * limit, kind, limit),
        )
        out = []
        for (payload,) in rows:
            try:
                out.append(decode_turn(payload))
            except Exception:  # noqa: BLE001 - dead-lettered when its own turn comes
                continue
        return out

    def _next_row(self) -> tuple[int, str, str, int, str | None] | None:
        self._delete_written()
        skip = sorted(self._written_seqs)
        mine = "state = ? AND owner = ?"
        params: tuple[Any, ...] = (PENDING, self.owner)
        if self._borrowing and self.may_adopt():
            mine = f"(({mine}) OR ({self._BORROWABLE}))"
            params += self._borrowable_params()
        rows = self._execute(
            "SELECT seq, turn_id, payload, attempts, mode FROM pending_writes"
            f" WHERE {mine} AND seq NOT IN ({','.join('?' * len(skip))}) ORDER BY seq LIMIT 1",
            (*params, *skip),
        )
        return rows[0] if rows else None

    def _delete_written(self) -> None:
        """Best effort: the rows already written whose delete the journal refused."""
        for seq in sorted(self._written_seqs):
            try:
                self._execute("DELETE FROM pending_writes WHERE seq = ?", (seq,))
            except Exception:  # still full: they stay skipped
                return
            self._written_seqs.discard(seq)

    async def _consume(self) -> None:
        assert self._wake is not None
        while True:
            try:
                self._wake.clear()
                await self._wait_hold()  # before a row is read: a forget during the hold takes it
                self._flush_unsaved()
                try:
                    row = self._next_row()
                except Exception as exc:
                    if not self._unsaved:
                        raise
                    # The journal cannot be read (not opened, a read-only or full disk):
                    # the turns it refused must not wait for it. Straight to the store.
                    logger.warning("write journal unusable (%s): writing refused turns straight to the store",
                                   describe_error(exc))  # fmt: skip
                    row = None
                if row is None:
                    if self._unsaved:  # the journal refuses them: straight to the store
                        await self._write_unsaved()
                    else:
                        await self._wake.wait()
                    continue
                await self._process(*row)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # journal trouble: never let the consumer die
                logger.warning("write queue consumer error: %r", exc)
                await asyncio.sleep(self.backoff_delay(1))

    async def _process(self, seq: int, turn_id: str, payload: str, attempts: int, mode: str | None = None) -> None:
        try:
            turn = decode_turn(payload)
            if mode is not None:  # the row's column is the truth: written under that mode
                turn = dataclasses.replace(turn, mode=mode)
        except Exception as exc:
            self._dead_letter(seq, turn_id, attempts, f"undecodable journal row: {exc!r}")
            return
        attempt = attempts + 1
        self._unsettled_seq = seq
        try:
            await asyncio.wait_for(self.handler(turn), self.attempt_timeout_s)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # we are being stopped; the row stays on disk
            await self._retry(seq, turn_id, attempt, "handler was cancelled")
            return
        except TimeoutError:
            # Left unsettled: a thread behind the handler may still be writing.
            await self._retry(seq, turn_id, attempt, f"timed out after {self.attempt_timeout_s:g} s")
            return
        except Exception as exc:
            self._unsettled_seq = None
            exc = in_tree(exc)
            if retryable(exc) is False:  # bad input, a forgotten user's turn: never written
                self._dead_letter(seq, turn_id, attempt, str(exc))
                return
            if is_turn_failure(exc):
                # Counted apart from the outages the turn waited out: five of these, not
                # five attempts, before the turns behind it stop waiting for it.
                failed = self._turn_failures[seq] = self._turn_failures.get(seq, 0) + 1
                if failed >= MAX_TURN_FAILURES:
                    self._dead_letter(seq, turn_id, attempt, f"failed {failed} times: {describe_error(exc)}")
                    return
            await self._retry(seq, turn_id, attempt, describe_error(exc))
            return
        self._unsettled_seq = None
        self._turn_failures.pop(seq, None)
        await self._delete(seq)
        self._written(turn_id)

    def _written(self, turn_id: str) -> None:
        """The store has the turn (from the journal or straight from memory)."""
        self.written += 1
        if self._failures:
            logger.info("memory store is back after %d failed attempt(s)", self._failures)
        self._failures = 0
        self._done[turn_id] = None
        while len(self._done) > self._done_max:
            self._done.popitem(last=False)
        self._count_pending()
        self._notify(self._progress)

    async def _delete(self, seq: int) -> None:
        """The store has the write: the row goes, whoever holds its lease now. A journal
        that refuses (disk full) must not stop the writes behind it: the row is skipped
        and deleted later (a replay of it would be a NOOP)."""
        try:
            self._execute("DELETE FROM pending_writes WHERE seq = ?", (seq,))
        except Exception as exc:
            logger.warning("journal delete failed (the store write is done; skipped): %s", describe_error(exc))
            self._written_seqs.add(seq)

    async def _write_unsaved(self) -> None:
        """The oldest turn the journal refused (disk full), written straight to the store:
        held only in memory, it would be lost with the process."""
        turn_id, turn = next(iter(self._unsaved.items()))
        try:
            await asyncio.wait_for(self.handler(turn), self.attempt_timeout_s)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            exc = in_tree(exc)
            if retryable(exc) is False:  # bad input: never written
                del self._unsaved[turn_id]
                self._dead_letter(None, turn_id, 1, str(exc))
                return
            # The store too: wait, then the journal is tried first again.
            await self._retry(None, turn_id, 1, describe_error(exc))
            return
        del self._unsaved[turn_id]
        self._spilled_settled()
        self._written(turn_id)

    async def _retry(self, seq: int | None, turn_id: str, attempt: int, error: str) -> None:
        """A failed attempt: counted, recorded on the turn's journal row (`seq`, None for
        a turn the journal refused), then the backoff, growing with consecutive failures."""
        self.retried += 1
        metrics.WRITE_RETRIES.inc()
        self._failures += 1
        delay = self.backoff_delay(self._failures)
        logger.warning(
            "memory write failed for turn %s (attempt %d): %s; retrying in %.2f s",
            turn_id,
            attempt,
            error,
            delay,
            extra={"turn_id": turn_id, "attempt": attempt, "error": error, "retry_in_s": round(delay, 3)},
        )
        if seq is not None:
            try:
                self._execute(
                    "UPDATE pending_writes SET attempts = ?, last_error = ?, updated_at = ? WHERE seq = ?",
                    (attempt, error[:2000], time.time(), seq),
                )
            except Exception as exc:
                logger.warning("journal update failed: %s", describe_error(exc))
        await asyncio.sleep(delay)

    def _dead_letter(self, seq: int | None, turn_id: str, attempts: int, error: str) -> None:
        if seq is not None:
            self._turn_failures.pop(seq, None)
        self.dead_lettered += 1
        metrics.DEAD_LETTERS.inc()
        logger.error(
            "memory write for turn %s dead-lettered (never retried): %s",
            turn_id,
            error,
            extra={"turn_id": turn_id, "attempt": attempts, "error": error},
        )
        if seq is not None:  # a turn the journal refused has no row to keep it in
            try:
                self._execute(
                    "UPDATE pending_writes SET state = ?, attempts = ?, last_error = ?, owner = NULL,"
                    " lease_until = 0, updated_at = ? WHERE seq = ?",
                    (DEAD, attempts, error[:2000], time.time(), seq),
                )
            except Exception as exc:
                logger.warning("journal update failed: %s", describe_error(exc))
        self._count_pending()
        self._notify(self._progress)

    def keep(self, turn: Turn) -> None:
        """Update a waiting turn's journal row (GATED: the gatekeeper's verdict, made
        once), so that a replay after a crash writes what this attempt decided. Best
        effort: without it a replay asks the model again."""
        if turn.turn_id in self._unsaved:
            self._unsaved[turn.turn_id] = turn
            return
        try:
            self._execute(
                "UPDATE pending_writes SET payload = ?, updated_at = ? WHERE turn_id = ? AND state = ?",
                (encode_turn(turn), time.time(), turn.turn_id, PENDING),
            )
        except Exception as exc:
            logger.warning("journal update failed for turn %s: %s", turn.turn_id, describe_error(exc))

    def dead_letters(self) -> list[DeadLetter]:
        """Turns that will never be written, oldest first, with the reason (all processes)."""
        rows = self._execute(
            "SELECT turn_id, last_error, attempts, updated_at, payload FROM pending_writes"
            " WHERE state = ? ORDER BY seq",
            (DEAD,),
        )
        out = []
        for turn_id, error, attempts, failed_at, payload in rows:
            try:
                turn: Turn | None = decode_turn(payload)
            except Exception:
                turn = None
            out.append(DeadLetter(turn_id, error or "", int(attempts), float(failed_at), turn, payload))
        return out
