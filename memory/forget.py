"""`python -m memory.forget USER_ID [USER_ID ...]`: "forget me", for an operator.

A user's request to be forgotten usually reaches a person, not the voice agent (a
spoken "forget me" misheard would wipe everything, with no undo), so this is a
command to run with the worker's own configuration (.env): it removes the user's
memories, their Mem0 history, their contexts shared between agents and the user's turns
still waiting in this machine's write journal, and records the request so that turns said before it, still on
their way on other machines, are refused when they arrive (`MemoryService.forget`).
Run it on each machine whose data directory holds a journal, or let the record do it.

It says where it looked, and exits 1 when nothing was stored under an identity:
identities are exact (case, spaces and accents count), and "forgot alcie: 0" with
exit 0 would tell the operator a request was carried out that matched nobody.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

import psycopg
from psycopg.conninfo import conninfo_to_dict

from memory.settings import ConfigError, MemorySettings, load_settings
from memory.storage.postgres import CONNECT_TIMEOUT_S, storage_problems
from memory.storage.store import MemoryStore
from memory.types import InvalidMemoryText, describe_error, memory_user_id, validate_user_id

if TYPE_CHECKING:  # `where` and `missing_store` serve every admin command: the service loads only to forget
    from memory.service import Forgotten, MemoryService


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
        with psycopg.connect(settings.database_url, connect_timeout=CONNECT_TIMEOUT_S) as conn:
            query = "SELECT to_regclass(quote_ident(%s))"  # the name as created, capitals kept
            (table,) = conn.execute(query, [settings.collection]).fetchone()
    except psycopg.Error:
        return None  # storage_problems names the variable
    return None if table else f"no table MEMORY_COLLECTION={settings.collection!r} in that database"


def forgot_line(identity: str, gone: Forgotten) -> str:
    """What one forget removed, in the words both commands print (`memory.forget` and
    `memory.admin forget`)."""
    return (
        f"forgot {identity}: {gone.memories} memories, {gone.waiting_turns} turns waiting to be written, "
        f"{gone.contexts} shared contexts, {gone.archived} archived messages and summaries"
    )


def forgot_doc(user_id: str, gone: Forgotten) -> dict[str, object]:
    """The same, for `--json`."""
    return {"user_id": user_id, "memories": gone.memories, "journal": gone.waiting_turns,
            "contexts": gone.contexts, "archived": gone.archived}  # fmt: skip


def nothing_stored(identity: str) -> str:
    """Said (on standard error, exit 1) when a forget matched nothing."""
    return (
        f"nothing was stored under {identity!r} (identities are exact: case, spaces and accents count; "
        "an lk-... id from the logs needs --stored-id). The request is recorded."
    )


def forget_users(service: MemoryService, users: Sequence[tuple[str, str]], *, prog: str, as_json: bool = False) -> int:
    """Forget each (identity, stored id) and print what went, one line each (a JSON document
    each with `as_json`); 1 when one of them matched nothing, else 0."""
    if not as_json:
        print(f"memory store: {where(service.settings)}")
    status = 0
    for identity, user_id in users:
        gone = service.forget(user_id)
        print(json.dumps(forgot_doc(user_id, gone), ensure_ascii=False) if as_json else forgot_line(identity, gone))
        if not (gone.memories or gone.waiting_turns or gone.contexts or gone.archived):
            status = 1
            print(f"{prog}: {nothing_stored(identity)}", file=sys.stderr)
    return status


def store_ids(identities: Sequence[str], *, stored: bool) -> list[str]:
    """The ids the store keeps these users under, all checked before any is forgotten."""
    return [validate_user_id(i) if stored else memory_user_id(i) for i in identities]


def main(argv: Sequence[str] | None = None) -> int:
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
    from memory.service import MemoryService

    try:
        return forget_users(MemoryService(store, settings), list(zip(args.user_ids, ids, strict=True)),
                            prog="memory.forget")  # fmt: skip
    finally:
        store.close()


if __name__ == "__main__":
    raise SystemExit(main())
