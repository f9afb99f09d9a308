"""A worker killed with -9 while its journal's disk is full (tests/journal/test_hostile_faults.py).

    python tests/journal/hostile_child.py JOURNAL SPILL_DIR USER_ID N [refuse]

Enqueues N turns (ids `<USER_ID>-t<i>`) into a queue whose handler never finishes,
so they are held only where the queue put them. With `refuse` the journal refuses
writes at its boundary (no tmpfs could be mounted); else the journal's disk is
really full. Prints "ready <durable count>" and waits to be killed.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.privacy.faults import RefusingJournalQueue  # noqa: E402 - after the repository root is put on sys.path
from memory.types import Turn  # noqa: E402 - after the repository root is put on sys.path
from tests.journal.write_queue_child import child_turns  # noqa: E402 - after the repository root is put on sys.path


async def main(argv: list[str]) -> None:
    journal, spill, user_id, n = Path(argv[0]), Path(argv[1]), argv[2], int(argv[3])

    async def handler(turn: Turn) -> None:
        await asyncio.Event().wait()  # the store never acknowledges

    queue = RefusingJournalQueue(journal, handler, attempt_timeout_s=3600, spill_dir=spill, mode="NORMAL")
    queue.refuse = len(argv) > 4 and argv[4] == "refuse"
    queue.start()
    durable = sum(
        queue.enqueue(turn)
        for turn in child_turns(
            user_id,
            n,
            said="said while the disk was full",
            first_locker=200,
            session_id="full-disk-session",
            minute=1,
            with_context=False,
        )
    )
    print(f"ready {durable}", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
