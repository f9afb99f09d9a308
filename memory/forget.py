"""`python -m memory.forget USER_ID [USER_ID ...]`: "forget me", for an operator.

A user's request to be forgotten usually reaches a person, not the voice agent (a
spoken "forget me" misheard would wipe everything, with no undo), so this is a
command to run with the worker's own configuration (.env): it removes the user's
memories, their Mem0 history and the user's turns still waiting in this machine's
write journal, and records the request so that turns said before it, still on
their way on other machines, are refused when they arrive (`MemoryService.forget`).
Run it on each machine whose data directory holds a journal, or let the record do it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import memory  # noqa: F401  (Mem0 telemetry off before mem0 is imported)
from memory.postgres import storage_problems
from memory.service import MemoryService
from memory.settings import ConfigError, load_settings
from memory.store import InvalidMemoryText, MemoryStore, describe_error, memory_user_id


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m memory.forget", description=__doc__.split("\n\n")[0])
    ap.add_argument("user_ids", nargs="+", metavar="USER_ID", help="LiveKit participant identity, as given to the agent")
    args = ap.parse_args(argv)
    try:
        settings = load_settings()
        problems = storage_problems(settings.data_dir, settings.database_url)
        store = None if problems else MemoryStore.open(settings)
    except ConfigError as exc:  # a table made for another embedder, among others
        problems = [str(exc)]
    except Exception as exc:  # the database went away after the check
        problems = [f"the memory store cannot be opened: {describe_error(exc)}"]
    if problems or store is None:
        print("memory.forget: nothing was forgotten:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 2
    try:
        service = MemoryService(store, settings)
        for user_id in args.user_ids:
            try:
                removed = service.forget(memory_user_id(user_id))  # as the sessions keep it
            except InvalidMemoryText as exc:
                print(f"{user_id!r}: {exc}", file=sys.stderr)
                return 2
            print(f"forgot {user_id}: {removed} memories")
    finally:
        store.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
