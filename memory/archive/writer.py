"""Archived messages through the memory write journal (memory/journal/queue.py).

A message is a journal row like a user turn (`Turn.kind == "archive"`), so it has the
same guarantees: on disk before the reply goes on, written by a background task,
retried through outages, taken over from a killed worker, never written twice (the
message id is the row's key in the archive). `extra` holds its type and, for a
summary, the ids it covers. The live path writes one message per row, as it comes;
`ArchiveStore.add` embeds any list in batches of at most 100.
"""

from __future__ import annotations

from memory.service import run_write
from memory.storage.archive import ArchivedMessage, archive_for
from memory.storage.archive_schema import MESSAGE_TYPES
from memory.storage.store import MemoryStore
from memory.types import InvalidMemoryText, Turn

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
) -> Turn:
    """The journal row for one archived message."""
    extra: dict[str, object] = {"message_type": message_type}
    if covers:
        extra["covers"] = list(covers)
    if metadata:
        extra["metadata"] = dict(metadata)
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
    )


async def write_archived(store: MemoryStore, turn: Turn) -> int:
    """The journal's handler for an archive row (on the write pool, off the loop)."""
    return await run_write(lambda: archive_for(store).add([message_of(turn)]))
