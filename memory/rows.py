"""What a journaled row becomes: a memory (through the mode's write path) or an archived
message. The journal's handler, beside the write path it feeds.

A turn's write only goes down: the LiveKit glue puts the turn in the journal
(`memory/journal/queue.py`); the journal's consumer hands each row to a `RowHandler`,
which calls `MemoryService.remember` (gatekeeper, store) or the archive's writer, and
counts and logs what was done. Nothing here calls back up into the session: a session
that shows a profile learns that a write changed the user's facts from `changed`, an
event it waits on in its own task (`memory/livekit/reader.py`).
"""

from __future__ import annotations

import asyncio
import logging

from memory.archive.writer import write_archived
from memory.journal.queue import DurableWriteQueue
from memory.ops import metrics
from memory.service import MemoryService, RememberReport
from memory.types import Turn

logger = logging.getLogger(__name__)


class RowHandler:
    """The journal's handler for one session's queue: raises on a transient failure so
    the row is retried (the queue's backoff), returns when the row is done."""

    def __init__(self, service: MemoryService) -> None:
        self.service = service
        self.queue: DurableWriteQueue | None = None  # the queue whose rows these are (`open_queue`)
        self.reports: list[RememberReport] = []
        # Set when a write stored, changed or superseded a memory: a profile shown to the
        # session may be out of date. Whoever shows one clears it and reads again.
        self.changed = asyncio.Event()
        self.writes = 0  # rows written as memories (changed or not)

    def open_queue(self, **kwargs: object) -> DurableWriteQueue:
        """The session's write journal, with this handler for its rows."""
        service = self.service
        self.queue = DurableWriteQueue(
            service.settings.journal_path,
            self,
            # Turns that stopped workers left go to a queue whose store can take them.
            may_adopt=lambda: getattr(service.store, "available", True),
            mode=service.mode.value,
            spill_dir=service.settings.spill_dir,
            **kwargs,  # type: ignore[arg-type]
        )
        return self.queue

    async def __call__(self, turn: Turn) -> RememberReport:
        if turn.kind != "memory":  # an archived message (any session's: a replay)
            await write_archived(self.service.store, turn, self.queue)  # with the rows behind it
            return RememberReport()
        keep = self.queue.keep if self.queue is not None else None
        report = await self.service.remember(turn, keep_verdict=keep)
        self.reports.append(report)
        self.writes += 1
        gate = report.gate
        if gate is not None:
            metrics.GATE.labels(gate.decision.action.value, gate.decision.reason).inc()
        for write in report.writes:
            metrics.WRITES.labels(write.event).inc()
        if any(w.event != "NOOP" for w in report.writes):
            self.changed.set()
        logger.info(
            "memory write",
            extra={
                "writes": [w.event for w in report.writes],
                "gate": gate.decision.action.value if gate else None,
                "gate_reason": gate.decision.reason if gate else None,
                "extraction_called": gate.extraction_called if gate else None,
                "dropped": report.dropped,
            },
        )
        return report
