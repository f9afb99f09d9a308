"""A worker process that is killed with memory writes pending (for tests/journal/test_write_queue.py).

    python tests/journal/write_queue_child.py JOURNAL USER_ID N [DATABASE_URL DATA_DIR]

Enqueues N turns (turn ids `<USER_ID>-t<i>`) into a DurableWriteQueue on
JOURNAL and starts it with a handler that never completes. Given a database
URL, the handler first really writes turn 0 to the store, so that write has
reached the store but its journal row is never deleted. Prints "ready" when
all rows are on disk (and turn 0 is in the store), then waits to be killed.

With WRITE_QUEUE_CHILD_HOLD=1 the queue is started and its writes held (as a session
holds them while a reply is being made) before the turns are enqueued, and the
handler is the real write: the process is killed with every turn held.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from memory.journal.queue import DurableWriteQueue  # noqa: E402 - after the repository root is put on sys.path
from memory.types import Turn  # noqa: E402 - after the repository root is put on sys.path


def child_turns(
    user_id: str,
    n: int,
    *,
    said: str = "before the crash",
    first_locker: int = 100,
    session_id: str = "killed-session",
    minute: int = 0,
    with_context: bool = True,
) -> list[Turn]:
    """N numbered turns (ids `<user_id>-t<i>`), each naming its own locker number."""
    return [
        Turn(
            user_id=user_id,
            text=f"Note {i} {said}: my locker number is {first_locker + i}",
            session_id=session_id,
            turn_id=f"{user_id}-t{i}",
            created_at=f"2026-01-01T00:{minute:02d}:{i:02d}+00:00",
            context=(f"assistant: question {i}",) if with_context else (),
        )
        for i in range(n)
    ]


async def main(argv: list[str]) -> None:
    journal, user_id, n = Path(argv[0]), argv[1], int(argv[2])
    service = None
    if len(argv) >= 4:
        from memory.service import MemoryService
        from memory.settings import load_settings
        from memory.storage.store import MemoryStore

        settings = load_settings({"MEMORY_DATA_DIR": argv[4], "MEMORY_DATABASE_URL": argv[3]}, dotenv=False)
        service = MemoryService(MemoryStore.open(settings), settings)

    turns = child_turns(user_id, n)
    wrote_first = asyncio.Event()

    async def handler(turn: Turn) -> None:
        if service is not None and turn.turn_id == turns[0].turn_id:
            await service.remember(turn)  # reaches the store...
            wrote_first.set()
        await asyncio.Event().wait()  # ...but the acknowledgement never comes back

    if os.environ.get("WRITE_QUEUE_CHILD_HOLD") == "1":
        assert service is not None
        queue = DurableWriteQueue(journal, service.remember, attempt_timeout_s=3600)
        queue.start()
        queue.hold(3600)
        for turn in turns:
            queue.enqueue(turn)
        print("ready", flush=True)
        await asyncio.Event().wait()
    queue = DurableWriteQueue(journal, handler, attempt_timeout_s=3600)
    for turn in turns:
        queue.enqueue(turn)
    queue.start()
    if service is not None:
        await wrote_first.wait()
    print("ready", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
