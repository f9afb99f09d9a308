"""Archived messages through the write journal: a backlog is embedded in batches of at
most 100 texts and each message is stored once, also when a worker dies between a batch
and the journal's deletes; a message that arrives after the summary covering it (another
worker took its row over) is still marked as covered. Real store and embedder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from memory.archive.writer import archive_turn, write_archived
from memory.journal.queue import DurableWriteQueue
from memory.storage.archive import ArchivedMessage, archive_for
from memory.storage.store import MemoryStore
from memory.types import Turn, now_iso
from tests.conftest import HANG_GUARD_S


def _backlog(path: Path, user_id: str, n: int) -> list[Turn]:
    """`n` archived messages left in the journal by a worker that stopped (rows owned by nobody)."""
    left = DurableWriteQueue(path, lambda _t: None)  # never started: its rows wait
    turns = [archive_turn(message_id=f"{user_id}:m{i:03d}", chat_id=f"{user_id}-chat", user_id=user_id,
                          text=f"message {i} about the garden", message_type="user" if i % 2 == 0 else "assistant",
                          created_at=now_iso()) for i in range(n)]  # fmt: skip
    for turn in turns:
        assert left.enqueue(turn)
    left._release_leases()  # as a stopped worker's rows are: anyone may take them
    return turns


@pytest.fixture
def embed_calls(store: MemoryStore, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size of every batch the archive asks the embedder for."""
    model: Any = archive_for(store)._model
    real = model.embed_batch
    sizes: list[int] = []

    def counted(texts: list[str], memory_action: Any = "add") -> list[list[float]]:
        sizes.append(len(texts))
        return real(texts, memory_action)

    monkeypatch.setattr(model, "embed_batch", counted)
    return sizes


def _stored(store: MemoryStore, user_id: str) -> dict[str, int]:
    archive = archive_for(store)
    with store.pool.connection() as conn:
        rows = conn.execute(f'SELECT id, count(*) FROM "{archive.table}" WHERE user_id = %s GROUP BY id',
                            [user_id]).fetchall()  # fmt: skip
    return dict(rows)


async def test_a_backlog_of_250_messages_is_embedded_in_3_batches_and_each_is_stored_once(
    store: MemoryStore, user_id: str, tmp_path: Path, embed_calls: list[int]
) -> None:
    journal = tmp_path / "journal.sqlite3"
    turns = _backlog(journal, user_id, 250)
    queue = DurableWriteQueue(journal, lambda t: write_archived(store, t, queue), attempt_timeout_s=600)
    queue.start()  # takes the stopped worker's rows over
    assert await queue.drain(300.0)
    await queue.aclose()
    assert embed_calls == [100, 100, 50]  # ceil(250 / 100) calls, none over 100
    assert _stored(store, user_id) == {t.turn_id: 1 for t in turns}
    assert queue.pending_count() == 0 and queue.dead_letters() == []


async def test_a_worker_killed_after_a_batch_loses_nothing_and_stores_nothing_twice(
    store: MemoryStore, user_id: str, tmp_path: Path
) -> None:
    journal = tmp_path / "journal.sqlite3"
    turns = _backlog(journal, user_id, 130)
    first = DurableWriteQueue(journal, lambda t: None)
    assert first.adopt_orphans() == 130
    # Its handler writes the first row with the 99 behind it, then the worker dies
    # before the journal's deletes: all 130 rows are still in the journal.
    await write_archived(store, turns[0], first)
    assert len(_stored(store, user_id)) == 100
    first._release_leases()
    second = DurableWriteQueue(journal, lambda t: write_archived(store, t, second), attempt_timeout_s=600)
    second.start()
    assert await second.drain(300.0)
    await second.aclose()
    assert _stored(store, user_id) == {t.turn_id: 1 for t in turns}
    assert second.written == 130 and second.dead_letters() == []


async def test_a_damaged_row_in_a_backlog_is_dead_lettered_alone(
    store: MemoryStore, user_id: str, tmp_path: Path
) -> None:
    journal = tmp_path / "journal.sqlite3"
    left = DurableWriteQueue(journal, lambda _t: None)
    good = [archive_turn(message_id=f"{user_id}:ok{i}", chat_id="c", user_id=user_id, text=f"fine message {i}",
                         message_type="user", created_at=now_iso()) for i in range(4)]  # fmt: skip
    bad = archive_turn(message_id=f"{user_id}:bad", chat_id="c", user_id=user_id, text="a damaged row",
                       message_type="user", created_at=now_iso())  # fmt: skip
    bad.extra["message_type"] = "system"
    for turn in (good[0], good[1], bad, good[2], good[3]):
        left.enqueue(turn)
    left._release_leases()
    queue = DurableWriteQueue(journal, lambda t: write_archived(store, t, queue), attempt_timeout_s=600)
    queue.start()
    assert await queue.drain(HANG_GUARD_S)
    await queue.aclose()
    assert set(_stored(store, user_id)) == {t.turn_id for t in good}
    assert [d.turn_id for d in queue.dead_letters()] == [bad.turn_id]


async def test_messages_that_arrive_after_their_summary_are_marked_as_covered(store: MemoryStore, user_id: str) -> None:
    """The summary rows were written by one worker while the messages' rows waited out
    another's lease: the messages, and the older summary, come last."""
    archive = archive_for(store)
    chat = f"{user_id}-chat"
    ids = [f"{chat}:m{i}" for i in range(4)]
    old = f"{chat}:summary:0001"
    new = f"{chat}:summary:0002"
    archive.add([ArchivedMessage(new, chat, user_id, "The user planned a garden with roses and tulips.", "summary",
                                 now_iso(), covers=(*ids[:3], old))])  # fmt: skip
    archive.add([ArchivedMessage(mid, chat, user_id, f"message {i} about roses", "user", now_iso())
                 for i, mid in enumerate(ids)])  # fmt: skip
    archive.add([ArchivedMessage(old, chat, user_id, "The user wants roses.", "summary", now_iso(), covers=ids[:1])])
    covered = {r["id"]: r["covered_by"] for r in archive.messages(user_id)}
    assert covered == {ids[0]: new, ids[1]: new, ids[2]: new, ids[3]: None, old: new, new: None}
    # what the next session picks the thread up from: the newest summary, not the stale one
    assert [m.id for m in archive.last_summaries(user_id, limit=2)] == [new]
