"""`python -m memory.forget USER_ID [USER_ID ...]`: "forget me", for an operator.

A user's request to be forgotten usually reaches a person, not the voice agent (a
spoken "forget me" misheard would wipe everything, with no undo), so this is a
command to run with the worker's own configuration (.env): it removes the user's
memories, their Mem0 history, their archived conversations, their contexts shared between
agents and the user's turns still waiting in this machine's write journal and spill files,
and records the request so that turns said before it, still on their way on other
machines, are refused when they arrive.
Run it on each machine whose data directory holds a journal, or let the record do it.

It asks for each identity to be typed on a terminal (`--yes` in a script; off a terminal
without it, nothing is done), then says where it looked and how many went from each
place (`memory/userdata.py`: one list of places, the same for every command and page).
Exit status: 0 forgotten; 1 nothing was stored under an identity (identities are exact:
case, spaces and accents count, and "forgot alcie: 0" with exit 0 would tell the operator
a request was carried out that matched nobody); 2 nothing done (a blank id, no store where
it looked, no confirmation); 3 it could not finish (a place it could not reach: one line
says which and why, and what was removed; run it again once that is fixed).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from memory.commands import confirm_forget, open_store, quiet_logs, report, store_ids
from memory.errors import InvalidIdentity
from memory.ops.printable import printable
from memory.progname import program_name
from memory.settings import ConfigError, load_settings
from memory.storage.locate import where
from memory.userdata import UserData

# Names code imported from here before `memory.commands` and `memory.storage.locate` held them.
__all__ = ["exit_status", "main", "missing_store", "report", "where"]
from memory.commands import exit_status  # noqa: E402
from memory.storage.locate import missing_store  # noqa: E402

PROG = program_name("memory-forget", "memory.forget")


def main(argv: Sequence[str] | None = None) -> int:
    quiet_logs()
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "user_ids", nargs="+", metavar="USER_ID", help="LiveKit participant identity, as given to the agent"
    )
    ap.add_argument(
        "--stored-id",
        action="store_true",
        help="the ids are as the store and the worker's logs give them (an identity with spaces is kept as lk-...)",
    )
    ap.add_argument(
        "--yes", action="store_true", help="forget without typing each identity (scripts; required off a terminal)"
    )
    args = ap.parse_args(argv)
    try:
        ids = store_ids(args.user_ids, stored=args.stored_id)
    except InvalidIdentity as exc:
        print(f"{PROG}: nothing was forgotten: {printable(str(exc))}", file=sys.stderr)
        return 2
    try:
        settings = load_settings()
    except ConfigError as exc:
        print(f"{PROG}: nothing was forgotten:\n  {exc}", file=sys.stderr)
        return 2
    store, problems = open_store(settings)
    if store is None:
        print(f"{PROG}: nothing was forgotten:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 2
    try:
        print(f"memory store: {where(settings)}")
        if not confirm_forget(args.user_ids, yes=args.yes, prog=PROG):
            return 2
        data = UserData(store, settings)
        status = 0
        for identity, user_id in zip(args.user_ids, ids, strict=True):
            status = max(status, report(identity, data.forget(user_id), prog=PROG))
        return status
    finally:
        store.close()


if __name__ == "__main__":
    raise SystemExit(main())
