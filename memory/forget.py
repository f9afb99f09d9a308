"""`python -m memory.forget USER_ID [USER_ID ...]`: "forget me", for an operator.

A user's request to be forgotten usually reaches a person, not the voice agent (a
spoken "forget me" misheard would wipe everything, with no undo), so this is a
command to run with the worker's own configuration (.env): it removes the user's
memories, their Mem0 history, their contexts shared between agents and the user's turns
still waiting in this machine's write journal, and records the request so that turns said before it, still on
their way on other machines, are refused when they arrive (`MemoryService.forget`).
Run it on each machine whose data directory holds a journal, or let the record do it.

It says where it looked and how many went from each place. Exit status: 0 forgotten;
1 nothing was stored under an identity (identities are exact: case, spaces and accents
count, and "forgot alcie: 0" with exit 0 would tell the operator a request was carried
out that matched nobody); 2 nothing done (a blank id, no store where it looked); 3 it
could not finish (a place it could not reach: one line says which and why, and what
was removed; run it again once that is fixed).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

import psycopg
from psycopg.conninfo import conninfo_to_dict

from memory.settings import ConfigError, MemorySettings, load_settings
from memory.storage.postgres import connect, storage_problems
from memory.storage.store import MemoryStore
from memory.types import InvalidMemoryText, describe_error, memory_user_id, validate_user_id

if TYPE_CHECKING:  # `where` and `missing_store` serve every admin command: the service loads only to forget
    from memory.service import Forgotten


def where(settings: MemorySettings) -> str:
    """The store the command works on, in words (a database URL may hold a password)."""
    if settings.database_url:
        info = conninfo_to_dict(settings.database_url)
        place = f"database {info.get('dbname', '?')} on {info.get('host', 'localhost')}"
    else:
        place = f"MEMORY_DATA_DIR={str(settings.data_dir)!r}"
    return f"{place}, MEMORY_COLLECTION={settings.collection!r}"


def missing_store(settings: MemorySettings) -> str | None:
    """Why there is no memory store to forget from, if there is none. Checked before
    opening: opening makes an empty one (a new embedded server in the directory the
    command happens to run in, or a new table), and forgetting from that finds nothing."""
    if not settings.database_url:
        if not (settings.pgdata / "PG_VERSION").exists():
            return f"no memory store in MEMORY_DATA_DIR={str(settings.data_dir)!r} (is it the worker's?)"
        return None
    try:
        with connect(settings.database_url) as conn:
            query = "SELECT to_regclass(quote_ident(%s))"  # the name as created, capitals kept
            (table,) = conn.execute(query, [settings.collection]).fetchone()
    except psycopg.Error:
        return None  # storage_problems names the variable
    return None if table else f"no table MEMORY_COLLECTION={settings.collection!r} in that database"


def store_ids(identities: Sequence[str], *, stored: bool) -> list[str]:
    """The ids the store keeps these users under, all checked before any is forgotten."""
    return [validate_user_id(i) if stored else memory_user_id(i) for i in identities]


def quiet_logs() -> None:
    """A command's report is its output. Without a handler of its own, Python prints every
    library warning on standard error (its last resort), and "one line" would become many."""
    root = logging.getLogger()
    if not root.handlers:
        root.addHandler(logging.NullHandler())


def main(argv: Sequence[str] | None = None) -> int:
    quiet_logs()
    ap = argparse.ArgumentParser(prog="python -m memory.forget", description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "user_ids", nargs="+", metavar="USER_ID", help="LiveKit participant identity, as given to the agent"
    )
    ap.add_argument(
        "--stored-id",
        action="store_true",
        help="the ids are as the store and the worker's logs give them (an identity with spaces is kept as lk-...)",
    )
    args = ap.parse_args(argv)
    try:
        ids = store_ids(args.user_ids, stored=args.stored_id)
    except InvalidMemoryText as exc:
        print(f"memory.forget: nothing was forgotten: {exc}", file=sys.stderr)
        return 2
    store = None
    try:
        settings = load_settings()
        problems = [p] if (p := missing_store(settings)) else storage_problems(settings.data_dir, settings.database_url)
        store = None if problems else MemoryStore.open(settings)
    except ConfigError as exc:  # a table made for another embedder, among others
        problems = [str(exc)]
    except Exception as exc:  # the database went away after the check
        problems = [f"the memory store cannot be opened: {describe_error(exc)}"]
    if problems or store is None:
        print("memory.forget: nothing was forgotten:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 2
    print(f"memory store: {where(settings)}")
    status = 0
    from memory.service import MemoryService

    try:
        service = MemoryService(store, settings)
        for identity, user_id in zip(args.user_ids, ids, strict=True):
            status = max(status, report(identity, service.forget(user_id), prog="memory.forget"))
    finally:
        store.close()
    return status


EXIT_NOTHING_STORED = 1
EXIT_INCOMPLETE = 3


def exit_status(gone: Forgotten) -> int:
    """0 forgotten, 1 nothing was stored (and every place was searched), 3 not finished."""
    return EXIT_INCOMPLETE if not gone.complete else EXIT_NOTHING_STORED if gone.nothing_stored else 0


def report(identity: str, gone: Forgotten, *, prog: str) -> int:
    """Say what a forget did, in the words both commands use; its exit status."""
    if not gone.complete:
        print(f"{prog}: {gone.problem(identity)}", file=sys.stderr)
    else:
        print(f"forgot {identity}: {gone.counts()}")
    if gone.nothing_stored:
        print(
            f"{prog}: nothing was stored under {identity!r} (identities are exact: case, spaces and accents "
            "count; an lk-... id from the logs needs --stored-id). The request is recorded.",
            file=sys.stderr,
        )
    return exit_status(gone)


if __name__ == "__main__":
    raise SystemExit(main())
