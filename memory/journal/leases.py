"""The journal's leases: a queue keeps the rows it holds, and takes over those of stopped workers.

Each row's lease is `memory/storage/lease.py`'s, on the queue's clock (`queue.py`,
"Leases", says who holds what). Part of `DurableWriteQueue`, kept apart: the queue's
state is its own (`queue.py`), these are the methods that take and keep rows.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from memory.journal.file import PENDING
from memory.ops import metrics
from memory.storage.lease import Sql
from memory.types import describe_error

logger = logging.getLogger("memory.journal.queue")  # the journal's one logger, whichever module logs


class LeaseKeeping:
    """The take-over and the lease keeper of a `DurableWriteQueue`."""

    def _take_over(self) -> None:
        """Claim the rows of stopped workers; when the journal refuses the claim (a full
        disk: the UPDATE needs room that reads do not), write them unclaimed instead
        (`_borrowing`) rather than leave them waiting while the store is up. Retried by
        the lease keeper every `lease_s / 3` until the claim works."""
        try:
            self.adopt_orphans()
        except Exception as exc:
            try:
                borrowable = bool(self._borrowable())
            except Exception:  # noqa: BLE001 - the journal cannot even be read: nothing to take
                borrowable = False
            if borrowable and not self._borrowing:
                logger.warning("journal take-over cannot claim a stopped worker's rows (%s): writing them "
                               "unclaimed until it can", describe_error(exc))  # fmt: skip
                self._notify(self._wake)
            elif not borrowable:
                logger.warning("journal take-over scan failed: %s", describe_error(exc))
            self._borrowing = borrowable
        else:
            self._borrowing = False

    # Rows a stopped worker of this host left (its pid is gone) or a closed queue released,
    # of this queue's mode: those it may write without claiming them. Not rows whose lease
    # merely ran out: on a full disk live workers cannot renew theirs either.
    _BORROWABLE = (
        " state = ? AND (owner IS NULL OR (owner <> ? AND owner_host = ? AND NOT pid_alive(owner_pid)))"
        " AND (mode IS NULL OR ? IS NULL OR mode = ?)"
    )

    def _borrowable_params(self) -> tuple[Any, ...]:
        return (PENDING, self.owner, self.host, self.mode, self.mode)

    def _borrowable(self) -> list[int]:
        """The seqs of the rows this queue may write unclaimed and has not written yet."""
        if not self.may_adopt():
            return []
        rows = self._execute(f"SELECT seq FROM pending_writes WHERE{self._BORROWABLE}", self._borrowable_params())
        return [seq for (seq,) in rows if seq not in self._written_seqs]

    def _borrowed_left(self, fresh: bool) -> int:
        """How many of a stopped worker's rows are left to write unclaimed. Counted at most
        once a second for the gauge (every enqueue, on the reply's path, asks), at once
        for `drain`."""
        now = time.monotonic()
        if fresh or now - self._borrowed_at > 1.0:
            self._borrowed_count, self._borrowed_at = len(self._borrowable()), now
        return self._borrowed_count

    def adopt_orphans(self) -> int:
        """Take over rows whose owner is gone (lease expired, or its pid is dead on this host).

        Called by `start()` and then every `lease_s / 3`; one UPDATE, so two
        queues can never both claim a row. Returns how many rows were taken.
        """
        if not self.may_adopt():
            return 0
        at = self._lease.at()
        # Free (nobody's, or its lease ran out), or its owner's pid is gone from this host;
        # never a row this queue holds already.
        query = (
            "UPDATE pending_writes SET " + at.take(self.owner)
            + Sql(", owner_host = ?, owner_pid = ?, updated_at = ?", (self.host, self.pid, at.now))
            + Sql(" WHERE state = ? AND owner IS NOT ? AND (", (PENDING, self.owner)) + at.free()
            + Sql(" OR (owner_host = ? AND NOT pid_alive(owner_pid)))", (self.host,))
            + Sql(" AND (mode IS NULL OR ? IS NULL OR mode = ?) RETURNING seq", (self.mode, self.mode))
        )  # fmt: skip
        rows = self._execute(query.text, query.params)
        if rows:
            self.replayed += len(rows)
            logger.info("taking over %d pending memory write(s) left by a stopped worker", len(rows))
            self._notify(self._wake)
            self._count_pending()
        return len(rows)

    def _renew_leases(self) -> None:
        """Every row this queue holds: `lease_s` more from now."""
        at = self._lease.at()
        mine = Sql(" WHERE state = ? AND ", (PENDING,)) + at.held_by(self.owner)
        query = "UPDATE pending_writes SET " + at.renew() + mine
        self._execute(query.text, query.params)

    def _release_leases(self) -> None:
        """Let other queues take our rows now; the interrupted one waits out its lease."""
        at = self._lease.at()
        query = (
            "UPDATE pending_writes SET " + at.vacate() + Sql(" WHERE state = ? AND ", (PENDING,))
            + at.held_by(self.owner) + Sql(" AND seq IS NOT ?", (self._unsettled_seq,))
        )  # fmt: skip
        self._execute(query.text, query.params)

    def import_spills(self) -> int:
        """Turns that a stopped queue kept in its spill file (its journal refused them,
        then it died): into the journal, or, while it still refuses, into this queue's own
        spill file and straight to the store. Replays are NOOPs (write ids). Returns how many."""
        if self._spill is None:
            return 0
        taken = 0
        for turns in self._spill.orphans():
            for turn in turns:
                if turn.turn_id in self._done or turn.turn_id in self._unsaved:
                    continue
                try:
                    self._insert(turn)
                except Exception:
                    self._spill.add(turn)
                    self._unsaved[turn.turn_id] = turn
                taken += 1
        if taken:
            self.replayed += taken
            logger.info("took over %d turn(s) from a stopped worker's spill file", taken)
            self._notify(self._wake)
        return taken

    async def _keep_leases(self) -> None:
        interval = self.lease_s / 3
        while True:
            await asyncio.sleep(interval)
            try:
                self.import_spills()
                self._renew_leases()
            except Exception as exc:
                logger.warning("journal lease renewal failed: %r", exc)
            self._take_over()

    def pending_count(self) -> int:
        """Rows waiting to be written, in the whole journal (all processes), plus unsaved ones."""
        try:
            (count,) = self._execute("SELECT COUNT(*) FROM pending_writes WHERE state = ?", (PENDING,))[0]
        except Exception as exc:
            logger.warning("journal count failed: %r", exc)
            count = 0
        return int(count) + len(self._unsaved)

    def owned_pending_count(self, *, fresh: bool = False) -> int:
        """Rows this queue is responsible for (its own and those it took over), less
        those already written whose delete the journal refused. Counted by the index, not
        read out: it runs at every enqueue, on the reply's path, and reading 40,000 waiting
        rows into Python took 10 ms there (an outage's backlog)."""
        where = "FROM pending_writes WHERE state = ? AND owner = ?"
        ((count,),) = self._execute(f"SELECT COUNT(*) {where}", (PENDING, self.owner))
        if self._written_seqs:  # written rows whose delete failed: few, unless the disk is full
            rows = self._execute(f"SELECT seq {where} AND seq >= ?", (PENDING, self.owner, min(self._written_seqs)))
            count -= sum(1 for (seq,) in rows if seq in self._written_seqs)
        if self._borrowing:  # a stopped worker's rows this queue writes unclaimed count as its own
            count += self._borrowed_left(fresh)
        return int(count) + len(self._unsaved)

    def _count_pending(self) -> None:
        """The backlog gauge: set whenever it may have changed, not only on success, so
        an outage shows as a growing number rather than the last good value."""
        try:
            metrics.QUEUE_PENDING.set(self.owned_pending_count())
        except Exception:  # noqa: BLE001 - a metric must never break the queue
            pass
