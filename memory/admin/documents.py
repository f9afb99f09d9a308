"""`Admin`: each operator command's answer as a document, over one opened store.

The command line prints these documents (`cli`), the operator's pages show them
(`memory/web/views.py`): one answer whichever door asks. What each command counts,
exports and forgets is the places' (`memory/userdata.py`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memory.journal.file import DEAD, PENDING
from memory.journal.operator import journal_rows, replay_dead
from memory.settings import MemorySettings
from memory.storage.archive import ArchiveStore
from memory.storage.locate import where
from memory.storage.store import MemoryStore
from memory.userdata import SPAN_KEYS, UnknownUser, UserData

if TYPE_CHECKING:  # loaded by the command that recalls, not by those that list
    from memory.service import MemoryService


# `show` lists the newest memories (the counts are of all of them; `export` has every one).
SHOW_MEMORIES = 200


class Admin:
    """The commands, over one opened store."""

    def __init__(self, store: MemoryStore, settings: MemorySettings) -> None:
        self.store = store
        self.settings = settings
        self.data = UserData(store, settings)

    @property
    def archive(self) -> ArchiveStore:
        return self.data.archive

    @functools.cached_property
    def service(self) -> MemoryService:
        """The service, for the command that recalls: made on first use (its retriever
        loads the Chinese segmenter, about a second, that listing never needs)."""
        from memory.service import MemoryService

        return MemoryService(self.store, self.settings)

    # ------------------------------------------------------------- helpers
    def journal_rows(self, user_id: str | None = None) -> list[dict[str, Any]]:
        """The journal's rows on this machine (pending and dead letters), text included."""
        return journal_rows(self.settings.journal_path, user_id)

    def contexts(self, user_id: str) -> list[dict[str, Any]]:
        """The user's shared contexts with their notes (memory/storage/contexts.py)."""
        return self.data.contexts.export_user(user_id)

    def spilled(self, user_id: str) -> list[dict[str, Any]]:
        """The user's turns in this machine's spill files (a journal that refused them)."""
        return self.data.place_rows("spilled", user_id)

    def require_known(self, user_id: str) -> None:
        self.data.require_known(user_id)

    # ------------------------------------------------------------ commands
    def users(self) -> list[dict[str, Any]]:
        """Every user with their counts (the places' own, `memory/userdata.py`), newest first."""
        return self.data.users()

    def counts(self, user_id: str) -> dict[str, int]:
        """What every place holds of the user, as every command and page counts it."""
        return self.data.counts(user_id)

    def show(self, user_id: str, recent: int = 20) -> dict[str, Any]:
        counts = self.data.counts(user_id)
        if not any(counts[name] for name in self.data_places()):
            raise UnknownUser(user_id)
        memories = []
        for rec in self.store.list_user(user_id, limit=SHOW_MEMORIES):
            doc = {"id": rec.id, "text": rec.text, "category": rec.category, "slot": rec.slot,
                   "mode": "GATED" if rec.category else "NORMAL", "created_at": rec.created_at,
                   "updated_at": rec.updated_at, "session_id": rec.metadata.get("session_id"),
                   "seq": rec.metadata.get("seq")}  # fmt: skip
            for key in SPAN_KEYS:  # GATED's span, where the fact has one
                if rec.metadata.get(key):
                    doc[key] = rec.metadata[key]
            if rec.category:  # a fact: its earlier values
                doc["history"] = [
                    {
                        "event": h.get("event"),
                        "old": h.get("old_memory"),
                        "new": h.get("new_memory"),
                        "at": h.get("created_at"),
                    }  # fmt: skip
                    for h in self.store.history(rec.id)
                ]
            memories.append(doc)
        rows = self.archive.messages(user_id, limit=recent + SHOW_MEMORIES, newest_first=True)[::-1]
        return {
            "user_id": user_id,
            "counts": counts,
            "unreadable": dict(self.data.unreadable),  # places not read, counted 0 (why)
            "memories": memories,
            "summaries": [r for r in rows if r["message_type"] == "summary"],
            "recent_archive": [r for r in rows if r["message_type"] != "summary"][-recent:],
            "journal": self.journal_rows(user_id),
            "spilled": self.spilled(user_id),
            "shared_contexts": self.contexts(user_id),
        }

    def data_places(self) -> list[str]:
        return [p.name for p in self.data.places]

    def search(self, user_id: str, query: str) -> dict[str, Any]:
        """What a new session of the user would recall for `query`, with every candidate's
        scores and what became of it (`considered`), and the archive's matches."""
        self.require_known(user_id)
        # A session computes the user's memory densities when it starts (MemoryService.prepare),
        # so its look-ups are corrected by them; without this the answer was not the agent's.
        self.service.retriever.prepare(user_id)
        explained = self.service.explain_sync(user_id, query)
        matches = self.archive.match(user_id, query, count=10)
        return {
            "user_id": user_id,
            "query": query,
            "mode": self.settings.mode.value,
            # GATED looks memory up only for messages that need it; NORMAL for every one.
            "would_look_up": self.service.wants_recall(query),
            "memories": [
                {"text": r.text, "score": round(r.score, 4), "category": r.category, "created_at": r.created_at}
                for r in explained.recalled
            ],  # fmt: skip
            "keywords": [{"word": w, "weight": round(x, 4)} for w, x in explained.keywords],
            "threshold": explained.threshold,
            "top_k": explained.top_k,
            # What each score of `memories` and `considered` ranges over (and the archive's similarity).
            "ranges": {"score": [0, 1], "lexical": [0, 1], "vector": [0, 1], "cosine": [-1, 1], "similarity": [-1, 1]},
            "considered": [
                {
                    "id": c.record.id,
                    "text": c.record.text,
                    "category": c.record.category,
                    "created_at": c.record.updated_at or c.record.created_at,
                    "score": round(c.record.score, 4),
                    "lexical": round(c.lexical, 4),
                    "vector": round(c.vector, 4),
                    "cosine": None if c.cosine is None else round(c.cosine, 4),
                    "stages": list(c.stages),
                    "outcome": c.outcome,
                }
                for c in explained.considered
            ],
            "archive": [
                {
                    "text": m.content,
                    "similarity": round(m.similarity, 4),
                    "type": m.message_type,
                    "chat_id": m.chat_id,
                    "created_at": m.created_at,
                }
                for m in matches
            ],  # fmt: skip
            "archive_min_similarity": self.settings.archive_min_similarity,
        }

    def export(self, user_id: str) -> dict[str, Any]:
        """Everything kept about the user, in one document (a data-access request); for a
        large user, `write_export` streams it."""
        return self.data.export(user_id)

    def write_export(self, user_id: str, write: Any) -> dict[str, int]:
        """The export written as it is read, a page at a time; its counts."""
        return self.data.write_export(user_id, write)

    def stats(self) -> dict[str, Any]:
        mem = self.store.rows.user_counts()
        sizes = {}
        with self.store.pool.connection() as conn:
            for name in (self.store.table, self.archive.table):
                # A partitioned table's own size is 0: its rows, indexes and TOAST are its partitions'.
                sizes[name] = conn.execute(
                    "SELECT pg_size_pretty(COALESCE(SUM(pg_total_relation_size(relid)), 0)) "
                    "FROM pg_partition_tree(to_regclass(quote_ident(%s)))",
                    [name],
                ).fetchone()[0]
        journal = self.journal_rows()
        return {
            "store": where(self.settings),
            "users": len(set(mem) | set(self.archive.per_user())),
            "raw_turns": sum(v[0] for v in mem.values()),
            "facts": sum(v[1] for v in mem.values()),
            "archive": self.archive.counts(),
            "journal_pending": sum(1 for r in journal if r["state"] == PENDING),
            "dead_letters": sum(1 for r in journal if r["state"] == DEAD),
            "sizes": sizes,
            "retention_days": self.settings.retention_days,
        }

    def replay(self, turn_ids: Sequence[str] | None) -> int:
        """Dead letters back to pending, owned by nobody: a running worker takes them over
        within `lease_s / 3` (10 s), or the next one to start does."""
        return replay_dead(self.settings.journal_path, turn_ids)
