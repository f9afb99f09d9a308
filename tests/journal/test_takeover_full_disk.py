"""Issue 30, finding 8: a worker started while the journal's disk is still full takes
over the rows of a worker that was killed, writes them, and its `drain()` says True only
once none of them is left (a real tmpfs filled to the last byte; the dead worker is a
real process killed with -9, so its journal is left as a crash leaves it)."""

from __future__ import annotations

import asyncio
import os
import sys
from collections import Counter
from pathlib import Path

import pytest

from bench.privacy.faults import can_mount, fill, tiny_tmpfs
from memory.journal.queue import DurableWriteQueue
from memory.settings import MemoryMode
from memory.storage.store import MemoryStore
from memory.types import StoreUnavailable, Turn
from tests.conftest import make_service
from tests.journal.test_write_queue import CHILD, ROOT, kill_when_ready, stored_write_ids

pytestmark = pytest.mark.skipif(not can_mount(), reason="no tmpfs can be mounted here (root and mount permission)")


async def killed_worker(journal: Path, user_id: str, n: int, tmp_path: Path) -> None:
    """A worker that journaled `n` turns of `user_id` and was killed before writing any."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    err_path = tmp_path / "child.stderr"
    with open(err_path, "wb") as err:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(CHILD), str(journal), user_id, str(n),
            stdout=asyncio.subprocess.PIPE, stderr=err, env=env, cwd=str(ROOT),
        )  # fmt: skip
    await kill_when_ready(proc, err_path)


async def test_a_worker_started_on_a_full_disk_writes_the_dead_workers_turns(
    tmp_path: Path, store: MemoryStore, user_id: str
) -> None:
    # Before: "journal take-over scan failed: database or disk is full"; the turns waited
    # while the store was up, and drain() returned True at once.
    n = 6
    mnt = tmp_path / "disk"
    with tiny_tmpfs(mnt, 4096):
        journal = mnt / "journal.sqlite3"
        await killed_worker(journal, user_id, n, tmp_path)
        filler = fill(mnt)
        queue = DurableWriteQueue(journal, make_service(store, MemoryMode.NORMAL).remember,
                                  base_backoff_s=0.05, max_backoff_s=0.2)  # fmt: skip
        queue.start()
        try:
            assert await queue.drain(30.0) is True
            assert stored_write_ids(store, user_id) == Counter({f"{user_id}-t{i}": 1 for i in range(n)})
            filler.unlink()  # space again: the written rows leave the journal too
            await queue.aclose(2.0)
        finally:
            await queue.aclose(0.1)
        reopened = DurableWriteQueue(journal, make_service(store, MemoryMode.NORMAL).remember)
        assert reopened.pending_count() == 0


async def test_drain_is_false_while_a_dead_workers_turn_is_still_unwritten(
    tmp_path: Path, store: MemoryStore, user_id: str
) -> None:
    mnt = tmp_path / "disk"
    with tiny_tmpfs(mnt, 4096):
        journal = mnt / "journal.sqlite3"
        await killed_worker(journal, user_id, 3, tmp_path)
        fill(mnt)
        down = True
        normal = make_service(store, MemoryMode.NORMAL)

        async def handler(turn: Turn) -> object:
            if down:
                raise StoreUnavailable("the store is down")
            return await normal.remember(turn)

        queue = DurableWriteQueue(journal, handler, base_backoff_s=0.05, max_backoff_s=0.1)
        queue.start()
        try:
            assert await queue.drain(0.5) is False  # three turns of the dead worker wait
            down = False
            assert await queue.drain(30.0) is True
        finally:
            await queue.aclose(0.1)
    assert stored_write_ids(store, user_id) == Counter({f"{user_id}-t{i}": 1 for i in range(3)})
