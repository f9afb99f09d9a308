"""What the operator's commands share (`memory.forget`, `memory.admin`, `memory.web`),
below them: opening the store they name without making an empty one, the ids they are
given, the forget's confirmation and its report. Nothing here is a command."""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from typing import TextIO

from memory.ops.printable import printable
from memory.settings import ConfigError, MemorySettings
from memory.storage.locate import missing_store
from memory.storage.postgres import storage_problems
from memory.storage.store import MemoryStore
from memory.types import describe_error, memory_user_id
from memory.userdata import Forgotten

EXIT_NOTHING_STORED = 1
EXIT_INCOMPLETE = 3


def quiet_logs() -> None:
    """A command's report is its output. Without a handler of its own, Python prints every
    library warning on standard error (its last resort), and "one line" would become many."""
    root = logging.getLogger()
    if not root.handlers:
        root.addHandler(logging.NullHandler())


def store_ids(identities: Sequence[str], *, stored: bool) -> list[str]:
    """The ids the store keeps these users under, all checked before any is used."""
    return [memory_user_id(i, stored=stored) for i in identities]


def open_store(settings: MemorySettings, *, load_mem0: bool = False) -> tuple[MemoryStore | None, list[str]]:
    """The store these settings name, opened; or None and why not (without making an empty
    one). Mem0 is loaded only with `load_mem0` (a command that writes memories), else on
    the first use that needs it: importing it alone costs seconds."""
    try:
        problems = [p] if (p := missing_store(settings)) else storage_problems(settings.data_dir, settings.database_url)
        if problems:
            return None, problems
        return MemoryStore.open(settings, load_mem0=load_mem0), []
    except ConfigError as exc:  # a table made for another embedder, among others
        return None, [str(exc)]
    except Exception as exc:  # noqa: BLE001 - the database went away after the check
        return None, [f"the memory store cannot be opened: {describe_error(exc)}"]


def confirm_forget(
    identities: Sequence[str], *, yes: bool, prog: str, stdin: TextIO | None = None, stderr: TextIO | None = None
) -> bool:
    """May these users be forgotten? With `yes` (a script), at once; on a terminal, once the
    operator has typed each identity as it is (the web page asks the same); anywhere else,
    never: a forget has no undo, and a pipe cannot show what it is about to delete."""
    stdin = stdin or sys.stdin
    stderr = stderr or sys.stderr
    if yes:
        return True
    try:
        terminal = stdin.isatty()
    except (AttributeError, OSError, ValueError):  # no standard input at all (closed, replaced)
        terminal = False
    if not terminal:
        print(f"{prog}: nothing was forgotten: not on a terminal, so nobody typed the identity; "
              "pass --yes to forget without asking", file=stderr)  # fmt: skip
        return False
    for identity in identities:
        print(f"This deletes everything kept about {printable(identity)}, everywhere, with no undo.\n"
              "Type the identity to confirm: ", end="", file=stderr, flush=True)  # fmt: skip
        typed = stdin.readline().rstrip("\r\n")
        if typed != identity:
            print(f"{prog}: that is not the identity: nothing was forgotten", file=stderr)
            return False
    return True


def exit_status(gone: Forgotten) -> int:
    """0 forgotten, 1 nothing was stored (and every place was searched), 3 not finished."""
    return EXIT_INCOMPLETE if not gone.complete else EXIT_NOTHING_STORED if gone.nothing_stored else 0


def report(identity: str, gone: Forgotten, *, prog: str) -> int:
    """Say what a forget did, in the words every command uses; its exit status."""
    shown = printable(identity)
    if not gone.complete:
        print(f"{prog}: {printable(gone.problem(identity))}", file=sys.stderr)
    else:
        print(f"forgot {shown}: {gone.counts()}")
    if gone.nothing_stored:
        print(
            f"{prog}: nothing was stored under '{shown}' (identities are exact: case, spaces and accents "
            "count; an lk-... id from the logs needs --stored-id). The request is recorded.",
            file=sys.stderr,
        )
    return exit_status(gone)
