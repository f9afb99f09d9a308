"""`uv run python -m memory.admin COMMAND`: see, search, export, import and delete what is kept.

Commands: `users`, `show USER`, `search USER QUERY`, `export USER`, `import FILE`,
`forget USER`, `stats`, `dead-letters [--replay ID ... | --replay-all]`, `retention [--dry-run]`.
Tables for people, `--json` for scripts, before or after the command (`export` is always
one JSON document). The arguments are parsed by `args` before this module is loaded.
It runs with the worker's configuration (.env), like `python -m memory.forget`, and
says so clearly when there is no store or it cannot be reached (exit 2) or when
nothing is stored under a user (exit 1): identities are exact.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import sqlite3
import sys
import time
from collections.abc import Sequence
from contextlib import closing
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from memory.admin.args import PROG, parse
from memory.admin.tables import table, to_json
from memory.forget import exit_status, missing_store, quiet_logs, where
from memory.forget import report as report_forget
from memory.journal.codec import decode_turn
from memory.journal.queue import DEAD, PENDING
from memory.journal.spill import read_user
from memory.ops.printable import printable
from memory.settings import ConfigError, MemorySettings, load_settings
from memory.storage.archive import ArchiveStore, archive_for
from memory.storage.contexts import ContextStore
from memory.storage.postgres import storage_problems
from memory.storage.store import MemoryStore
from memory.types import InvalidMemoryText, describe_error, memory_user_id, validate_user_id

if TYPE_CHECKING:  # loaded by the commands that recall, forget or import, not by those that list
    from memory.service import MemoryService


class Unknown(LookupError):
    """Nothing is stored under this user."""


class Admin:
    """The commands, over one opened store."""

    def __init__(self, store: MemoryStore, settings: MemorySettings) -> None:
        self.store = store
        self.settings = settings
        self.archive: ArchiveStore = archive_for(store)

    @functools.cached_property
    def service(self) -> MemoryService:
        """The service, for the commands that recall or forget: made on first use (its
        retriever loads the Chinese segmenter, about a second, that listing never needs)."""
        from memory.service import MemoryService

        return MemoryService(self.store, self.settings)

    # ------------------------------------------------------------- helpers
    def journal_rows(self, user_id: str | None = None) -> list[dict[str, Any]]:
        """The journal's rows on this machine (pending and dead letters), text included."""
        path = self.settings.journal_path
        if not path.exists():
            return []
        with closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=2.0)) as conn:
            rows = conn.execute(
                "SELECT seq, turn_id, payload, state, attempts, last_error, updated_at FROM pending_writes ORDER BY seq"
            ).fetchall()
        out = []
        for seq, turn_id, payload, state, attempts, error, updated in rows:
            try:
                turn = decode_turn(payload)
                doc: dict[str, Any] = {"user_id": turn.user_id, "kind": turn.kind, "text": turn.text,
                                       "session_id": turn.session_id, "said_at": turn.created_at}  # fmt: skip
            except Exception as exc:  # noqa: BLE001 - shown as it is
                doc = {"user_id": None, "kind": "?", "text": payload[:200], "decode_error": describe_error(exc)}
            if user_id is not None and doc["user_id"] != user_id:
                continue
            out.append({"seq": seq, "turn_id": turn_id, "state": state, "attempts": attempts, "error": error,
                        "updated_at": datetime.fromtimestamp(updated, UTC), **doc})  # fmt: skip
        return out

    def memory_counts(self) -> dict[str, tuple[int, int, str | None]]:
        """user -> (raw turns, facts, newest time)."""
        return self.store.rows.user_summaries()

    def contexts(self, user_id: str) -> list[dict[str, Any]]:
        """The user's shared contexts with their notes (memory/storage/contexts.py)."""
        return ContextStore(self.store.pool, self.store.table, self.settings.context_max_chars).export_user(user_id)

    def spilled(self, user_id: str) -> list[dict[str, Any]]:
        """The user's turns in this machine's spill files (a journal that refused them)."""
        if self.settings.spill_dir is None:
            return []
        return [{"turn_id": t.turn_id, "kind": t.kind, "text": t.text, "session_id": t.session_id,
                 "said_at": t.created_at} for t in read_user(self.settings.spill_dir, self.settings.journal_path,
                                                             user_id)]  # fmt: skip

    def require_known(self, user_id: str) -> None:
        if (
            self.store.rows.has_user(user_id)
            or self.archive.messages(user_id, limit=1)
            or self.journal_rows(user_id)
            or self.contexts(user_id)
            or self.spilled(user_id)
        ):
            return
        raise Unknown(user_id)

    # ------------------------------------------------------------ commands
    def users(self) -> list[dict[str, Any]]:
        mem = self.memory_counts()
        arch = self.archive.per_user()
        out = []
        for uid in sorted(set(mem) | set(arch)):
            raw, facts, mem_last = mem.get(uid, (0, 0, None))
            msgs, sums, arch_last = arch.get(uid, (0, 0, None))
            times = [t for t in (_when(mem_last), arch_last) if t is not None]
            out.append({"user_id": uid, "raw_turns": raw, "facts": facts, "archived_messages": msgs,
                        "summaries": sums, "last_activity": max(times) if times else None})  # fmt: skip
        return sorted(out, key=lambda u: u["last_activity"] or datetime.min.replace(tzinfo=UTC), reverse=True)

    def show(self, user_id: str, recent: int = 20) -> dict[str, Any]:
        self.require_known(user_id)
        memories = []
        for rec in self.store.list_user(user_id, limit=10_000):
            doc = {"id": rec.id, "text": rec.text, "category": rec.category, "slot": rec.slot,
                   "created_at": rec.created_at, "updated_at": rec.updated_at,
                   "session_id": rec.metadata.get("session_id"), "seq": rec.metadata.get("seq")}  # fmt: skip
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
        rows = self.archive.messages(user_id)
        return {
            "user_id": user_id,
            "memories": memories,
            "summaries": [r for r in rows if r["message_type"] == "summary"],
            "recent_archive": [r for r in rows if r["message_type"] != "summary"][-recent:],
            "journal": self.journal_rows(user_id),
            "spilled": self.spilled(user_id),
            "shared_contexts": self.contexts(user_id),
        }

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
        """Everything kept about the user, in one document (a data-access request)."""
        self.require_known(user_id)
        shown = self.show(user_id, recent=10**9)
        archive = self.archive.messages(user_id)
        return {
            "user_id": user_id,
            "exported_at": datetime.now(UTC),
            "store": where(self.settings),
            "forgotten_at": self.store.forgotten_at(user_id),
            "memories": shown["memories"],
            "archive": archive,
            "journal": shown["journal"],
            "spilled": shown["spilled"],
            "shared_contexts": shown["shared_contexts"],
            "counts": {"memories": len(shown["memories"]), "archive": len(archive), "journal": len(shown["journal"]),
                       "spilled": len(shown["spilled"]), "shared_contexts": len(shown["shared_contexts"])},
        }  # fmt: skip

    def stats(self) -> dict[str, Any]:
        mem = self.memory_counts()
        sizes = {}
        with self.store.pool.connection() as conn:
            for name in (self.store.table, self.archive.table):
                sizes[name] = conn.execute(
                    "SELECT pg_size_pretty(pg_total_relation_size(to_regclass(quote_ident(%s))))", [name]
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
        path = self.settings.journal_path
        if not path.exists():
            return 0
        with closing(sqlite3.connect(str(path), timeout=2.0, isolation_level=None)) as conn:
            where_ids = "" if turn_ids is None else f" AND turn_id IN ({','.join('?' * len(turn_ids))})"
            return conn.execute(
                "UPDATE pending_writes SET state = ?, attempts = 0, owner = NULL, owner_host = NULL, owner_pid = NULL,"
                f" lease_until = 0, updated_at = ? WHERE state = ?{where_ids}",
                (PENDING, time.time(), DEAD, *(turn_ids or ())),
            ).rowcount


def _when(value: str | None) -> datetime | None:
    try:
        when = datetime.fromisoformat(value) if value else None
    except ValueError:
        return None
    return when.replace(tzinfo=UTC) if when and when.tzinfo is None else when


# Commands that need Mem0 (an embedding, its history file): the others open the store
# without loading it, and answer in a second.
_WITH_MEM0 = ("search", "import", "forget")


def open_store(settings: MemorySettings, command: str = "") -> tuple[MemoryStore | None, list[str]]:
    """The store these settings name, opened; or None and why not (without making an empty one).
    Mem0 is loaded only for `command`s that embed or forget (`_WITH_MEM0`), else on first use."""
    try:
        problems = [p] if (p := missing_store(settings)) else storage_problems(settings.data_dir, settings.database_url)
        if problems:
            return None, problems
        return MemoryStore.open(settings, load_mem0=command in _WITH_MEM0), []
    except ConfigError as exc:
        return None, [str(exc)]
    except Exception as exc:  # noqa: BLE001 - the database went away after the check
        return None, [f"the memory store cannot be opened: {describe_error(exc)}"]


def main(argv: Sequence[str] | None = None) -> int:
    return run(parse(argv))


def run(args: argparse.Namespace) -> int:
    """Run one parsed command (`python -m memory.admin` parses first: `args`)."""
    quiet_logs()
    user_id = None
    if getattr(args, "user", None) is not None:
        try:
            user_id = validate_user_id(args.user) if args.stored_id else memory_user_id(args.user)
        except InvalidMemoryText as exc:
            print(f"{PROG}: {exc}", file=sys.stderr)
            return 2
    try:
        settings = load_settings()
    except ConfigError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    store, problems = open_store(settings, args.command)
    if store is None:
        print(f"{PROG}: no memory store to work on:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 2
    try:
        return _run(Admin(store, settings), args, user_id)
    except Unknown as exc:
        print(f"{PROG}: nothing is stored under {args.user!r} in {where(settings)} (identities are exact: case, "
              "spaces and accents count; an lk-... id from the logs needs --stored-id)", file=sys.stderr)  # fmt: skip
        del exc
        return 1
    finally:
        store.close()


def _run(admin: Admin, args: argparse.Namespace, user_id: str | None) -> int:
    out = print
    cmd = args.command
    if cmd == "users":
        rows = admin.users()
        out(to_json(rows) if args.json else table(
            ["user", "raw turns", "facts", "messages", "summaries", "last activity"],
            [[u["user_id"], u["raw_turns"], u["facts"], u["archived_messages"], u["summaries"], u["last_activity"]]
             for u in rows]))  # fmt: skip
    elif cmd == "show":
        doc = admin.show(user_id, args.recent)
        if args.json:
            out(to_json(doc))
        else:
            out(f"user {printable(doc['user_id'])}\n\nmemories ({len(doc['memories'])})")
            out(
                table(
                    ["category", "slot", "text", "updated", "earlier values"],
                    [
                        [
                            m["category"],
                            m["slot"],
                            m["text"],
                            m["updated_at"] or m["created_at"],
                            "; ".join(h["old"] for h in m.get("history", []) if h.get("old")),
                        ]
                        for m in doc["memories"]
                    ],
                )
            )
            out(f"\nsummaries ({len(doc['summaries'])})")
            out(
                table(
                    ["time", "chat", "summary"],
                    [[s["created_at"], s["chat_id"], s["content"]] for s in doc["summaries"]],
                    width=120,
                )
            )
            out(f"\nrecent archive ({len(doc['recent_archive'])})")
            out(
                table(
                    ["time", "chat", "type", "text", "summarised"],
                    [
                        [
                            r["created_at"],
                            r["chat_id"],
                            r["message_type"],
                            r["content"],
                            "yes" if r["covered_by"] else "",
                        ]
                        for r in doc["recent_archive"]
                    ],
                )
            )
            if doc["journal"]:
                out(f"\nwaiting in this machine's journal ({len(doc['journal'])})")
                out(
                    table(
                        ["state", "kind", "text", "error"],
                        [[j["state"], j["kind"], j["text"], j["error"]] for j in doc["journal"]],
                    )
                )
            if doc["spilled"]:
                out(f"\nwaiting in this machine's spill files ({len(doc['spilled'])})")
                out(table(["said", "kind", "text"], [[t["said_at"], t["kind"], t["text"]] for t in doc["spilled"]]))
            out(f"\nshared contexts ({len(doc['shared_contexts'])})")
            notes = [[c["id"], n["agent"], n["at"], n["note"]] for c in doc["shared_contexts"] for n in c["notes"]]
            out(table(["context", "agent", "time", "note"], notes))
    elif cmd == "search":
        doc = admin.search(user_id, args.query)
        if args.json:
            out(to_json(doc))
        else:
            out(f"memories recalled for {args.query!r}")
            # The fused score, in [0, 1] (memory/retrieval/ranking.py: above 0.75 compressed towards 1).
            rows = [[m["score"], m["category"], m["text"]] for m in doc["memories"]]
            out(table(["score (0-1)", "category", "text"], rows))
            out(f"\narchive matches (similarity >= {doc['archive_min_similarity']:g})")
            out(
                table(
                    ["similarity (-1-1)", "time", "type", "text"],
                    [[a["similarity"], a["created_at"], a["type"], a["text"]] for a in doc["archive"]],
                )
            )
    elif cmd == "export":
        text = to_json(admin.export(user_id))
        if args.output:
            with open(args.output, "w", encoding="utf-8") as fh:
                fh.write(text + "\n")
            print(f"exported {args.user} to {args.output}", file=sys.stderr)
        else:
            out(text)
    elif cmd == "forget":
        gone = admin.service.forget(user_id)
        if not args.json:
            return report_forget(args.user, gone, prog=PROG)
        out(to_json({"user_id": user_id, **gone.as_dict(), "journal": gone.waiting_turns}))
        return exit_status(gone)
    elif cmd == "import":
        return _import(admin, args, user_id)
    elif cmd == "stats":
        doc = admin.stats()
        out(to_json(doc) if args.json else table(["", "value"], [
            ["store", doc["store"]], ["users", doc["users"]], ["raw turns (NORMAL)", doc["raw_turns"]],
            ["facts (GATED)", doc["facts"]], ["archived user messages", doc["archive"]["user"]],
            ["archived assistant messages", doc["archive"]["assistant"]], ["summaries", doc["archive"]["summary"]],
            ["messages covered by a summary", doc["archive"]["covered"]], ["journal: waiting", doc["journal_pending"]],
            ["journal: dead letters", doc["dead_letters"]], ["retention (days)", doc["retention_days"]],
            *[[f"size of {k}", v] for k, v in doc["sizes"].items()]], width=100))  # fmt: skip
    elif cmd == "dead-letters":
        if args.replay or args.replay_all:
            n = admin.replay(None if args.replay_all else args.replay)
            out(to_json({"replayed": n}) if args.json else
                f"{n} dead letter(s) back in the queue: a running worker writes them within about 10 s, "
                "else the next worker to start")  # fmt: skip
            return 0 if n else 1
        rows = [r for r in admin.journal_rows() if r["state"] == DEAD]
        out(
            to_json(rows)
            if args.json
            else table(
                ["turn id", "user", "kind", "attempts", "failed at", "error", "text"],
                [
                    [r["turn_id"], r["user_id"], r["kind"], r["attempts"], r["updated_at"], r["error"], r["text"]]
                    for r in rows
                ],
                width=50,
            )
        )
    elif cmd == "retention":
        from memory.archive.retention import run_retention

        report = run_retention(admin.store, days=args.days, dry_run=args.dry_run)
        if not report.ran:
            print(f"{PROG}: another process is running retention now; try again later", file=sys.stderr)
            return 1
        doc = report.as_dict()
        verb = "would delete" if report.dry_run else "deleted"
        out(to_json(doc) if args.json else
            f"older than {report.cutoff[:10]}: {verb} {report.archived_messages} archived messages and "
            f"{report.raw_turns} raw-turn memories; kept {report.summaries_kept} summaries and "
            f"{report.facts_kept} facts")  # fmt: skip
    return 0


def _import(admin: Admin, args: argparse.Namespace, user_id: str | None) -> int:
    """`import FILE`: what it wrote, and what it refused (exit 1); exit 2 when the file
    is not one it reads (nothing written)."""
    from memory.admin.importer import import_file

    try:
        report = asyncio.run(import_file(admin.store, admin.settings, args.file, user_id=user_id))
    except InvalidMemoryText as exc:
        print(f"{PROG}: nothing was imported: {exc}", file=sys.stderr)
        return 2
    print(to_json(report.as_dict()) if args.json else report.summary())
    for problem in report.refused[:20]:
        print(f"{PROG}: not imported: {problem}", file=sys.stderr)
    return 1 if report.refused else 0


if __name__ == "__main__":
    raise SystemExit(main())
