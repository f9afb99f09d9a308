"""`python -m memory.working export USER_ID`: the user's shared contexts as JSON.

For a data-access request: every context of the user with its notes (who wrote each
and when), read with the worker's configuration (.env). Forms are never stored (they
live in the session's process only), so there are none to export. "Forget me"
(`python -m memory.forget`) removes these contexts with the user's memories.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from memory.errors import InvalidIdentity
from memory.ops.printable import terminal_json
from memory.settings import ConfigError, load_settings
from memory.storage.contexts import ContextStore
from memory.storage.locate import missing_store
from memory.storage.postgres import embedded_url, open_pool, storage_problems
from memory.types import describe_error, memory_user_id


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m memory.working", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    export = sub.add_parser("export", help="print the user's shared contexts as JSON")
    export.add_argument("user_id", metavar="USER_ID", help="LiveKit participant identity, as given to the agent")
    export.add_argument("--stored-id", action="store_true", help="the id is as the store and the logs give it (lk-...)")
    args = ap.parse_args(argv)
    try:
        user = memory_user_id(args.user_id, stored=args.stored_id)
        settings = load_settings()
    except (InvalidIdentity, ConfigError) as exc:
        print(f"memory.working: {exc}", file=sys.stderr)
        return 2
    problems = [p] if (p := missing_store(settings)) else storage_problems(settings.data_dir, settings.database_url)
    if problems:
        print("memory.working: nothing exported:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 2
    try:
        pool = open_pool(settings.database_url or embedded_url(settings.pgdata), max_size=1)
    except Exception as exc:  # noqa: BLE001 - the database went away after the check
        print(f"memory.working: the store cannot be opened: {describe_error(exc)}", file=sys.stderr)
        return 2
    try:
        contexts = ContextStore(pool, settings.collection, settings.context_max_chars).export_user(user)
    finally:
        pool.close()
    print(terminal_json({"user_id": user, "shared_contexts": contexts}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
