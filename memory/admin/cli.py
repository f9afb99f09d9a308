"""`uv run python -m memory.admin COMMAND`: see, search, export, import and delete what is kept.

Commands: `users`, `show USER`, `search USER QUERY`, `export USER`, `import FILE`,
`forget USER`, `stats`, `dead-letters [--replay ID ... | --replay-all]`, `retention [--dry-run]`.
Tables for people, `--json` for scripts, before or after the command (`export` is always
one JSON document, streamed). The arguments are parsed by `args` before this module is
loaded. What each command counts, exports and forgets is the places' (`memory/userdata.py`);
`forget` asks for the identity to be typed on a terminal (`--yes` in scripts).
It runs with the worker's configuration (.env), like `python -m memory.forget`, and
says so clearly when there is no store or it cannot be reached (exit 2) or when
nothing is stored under a user (exit 1): identities are exact.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence

from memory.admin.args import PROG, parse
from memory.admin.documents import Admin
from memory.admin.tables import table, to_json
from memory.commands import confirm_forget, exit_status, open_store, quiet_logs
from memory.commands import report as report_forget
from memory.errors import InvalidIdentity
from memory.journal.file import DEAD
from memory.ops.printable import printable
from memory.settings import ConfigError, load_settings
from memory.storage.locate import where
from memory.types import InvalidMemoryText, memory_user_id
from memory.userdata import UnknownUser, count_names, counts_line

# Commands that write memories (import, redact) need Mem0: the others open the store without loading it
# (2 s of imports alone); `search` embeds its query with the embedder itself.
_WITH_MEM0 = ("import", "redact")


def main(argv: Sequence[str] | None = None) -> int:
    return run(parse(argv))


def run(args: argparse.Namespace) -> int:
    """Run one parsed command (`python -m memory.admin` parses first: `args`)."""
    quiet_logs()
    user_id = None
    if getattr(args, "user", None) is not None:
        try:
            user_id = memory_user_id(args.user, stored=args.stored_id)
        except InvalidIdentity as exc:
            print(f"{PROG}: {exc}", file=sys.stderr)
            return 2
    try:
        settings = load_settings()
    except ConfigError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    store, problems = open_store(settings, load_mem0=args.command in _WITH_MEM0)
    if store is None:
        print(f"{PROG}: no memory store to work on:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 2
    try:
        return _run(Admin(store, settings), args, user_id)
    except UnknownUser:
        print(f"{PROG}: nothing is stored under '{printable(args.user)}' in {where(settings)} (identities are "
              "exact: case, spaces and accents count; an lk-... id from the logs needs --stored-id)",
              file=sys.stderr)  # fmt: skip
        return 1
    finally:
        store.close()


def _run(admin: Admin, args: argparse.Namespace, user_id: str | None) -> int:
    out = print
    cmd = args.command
    if cmd == "users":
        rows = admin.users()
        names = [n for n in count_names() if n in (rows[0] if rows else {})]
        out(to_json(rows) if args.json else table(
            ["user", *names, "last_activity"],
            [[u["user_id"], *(u[n] for n in names), u["last_activity"]] for u in rows]))  # fmt: skip
    elif cmd == "show":
        doc = admin.show(user_id, args.recent)
        if args.json:
            out(to_json(doc))
        else:
            shown = "" if len(doc["memories"]) >= doc["counts"]["memories"] else f", the newest {len(doc['memories'])}"
            unread = "".join(f"\nunreadable: {name}: {printable(why)}" for name, why in doc["unreadable"].items())
            out(f"user {printable(doc['user_id'])}\n{counts_line(doc['counts'])}{unread}\n\nmemories{shown}")
            out(
                table(
                    ["mode", "category", "slot", "text", "updated", "earlier values"],
                    [
                        [
                            m["mode"],
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
        if args.output:
            with open(args.output, "w", encoding="utf-8") as fh:
                counts = admin.write_export(user_id, fh.write)
            print(f"exported {printable(args.user)} to {printable(args.output)}: {counts_line(counts)}",
                  file=sys.stderr)  # fmt: skip
        else:
            admin.write_export(user_id, sys.stdout.write)
    elif cmd == "forget":
        if not confirm_forget([args.user], yes=args.yes, prog=PROG):
            return 2
        gone = admin.data.forget(user_id)
        if not args.json:
            return report_forget(args.user, gone, prog=PROG)
        out(to_json({"user_id": user_id, **gone.as_dict()}))
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
    elif cmd == "redact":
        rows, history = admin.store.redact_stored(user_id)
        out(to_json({"rows_rewritten": rows, "history_entries_rewritten": history}) if args.json else
            f"rewrote {rows} memories and {history} entries of Mem0's history on this machine without the secrets "
            "the rules now find")  # fmt: skip
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


def _progress(done: int, of: int, seconds: float) -> None:
    """The import's progress line, on standard error (the report is standard output)."""
    rate = done / seconds if seconds > 0 else 0.0
    end = "\n" if done >= of else "\r"
    print(f"{PROG}: imported {done:,} of {of:,} turns ({rate:,.0f} a second)", end=end, file=sys.stderr, flush=True)


def _import(admin: Admin, args: argparse.Namespace, user_id: str | None) -> int:
    """`import FILE`: what it wrote, and what it refused (exit 1); exit 2 when the file
    is not one it reads (nothing written)."""
    from memory.admin.importer import ImportRefused, import_file

    try:
        # A command serves no call: the embeddings may take every core.
        report = asyncio.run(import_file(admin.store, admin.settings, args.file, user_id=user_id,
                                         progress=_progress, cores=os.cpu_count() or 1))  # fmt: skip
    except ImportRefused as exc:  # the whole file was checked: one line per problem, nothing written
        for problem in exc.problems:
            print(f"{PROG}: {printable(problem)}", file=sys.stderr)
        print(f"{PROG}: nothing was imported ({len(exc.problems)} problem(s) above)", file=sys.stderr)
        return 2
    except InvalidMemoryText as exc:
        print(f"{PROG}: nothing was imported: {printable(str(exc))}", file=sys.stderr)
        return 2
    print(to_json(report.as_dict()) if args.json else report.summary())
    for problem in report.refused[:20]:  # what the store refused while writing (dead letters)
        print(f"{PROG}: not written: {printable(problem)}", file=sys.stderr)
    return 1 if report.refused else 0


if __name__ == "__main__":
    raise SystemExit(main())
