"""The operator's command line, as arguments: parsed before anything heavy is imported,
so `--help` and a mistyped command answer at once (the store, Mem0 and numpy load only
for a command that runs). `--json` and `--stored-id` go before or after the command."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from memory.progname import program_name

PROG = program_name("memory-admin", "memory.admin")
DESCRIPTION = "See, search, export, import and delete what the agent keeps about its users."
EPILOG = (
    "It runs with the worker's configuration (.env): run it where the worker runs. "
    "Exit 1: nothing is stored under that user (identities are exact); exit 2: no store, bad input, "
    "or a forget not confirmed (on a terminal it asks for the identity; --yes in scripts)."
)


def _options(default: object) -> argparse.ArgumentParser:
    """The options every command takes, before or after its name. The command's own copy
    defaults to SUPPRESS, so an option given before the command is not reset by it (two
    copies: argparse shares an action between a parser and the parsers it is a parent of)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", default=default, help="JSON instead of tables")
    common.add_argument(
        "--stored-id",
        action="store_true",
        default=default,
        help="USER is the id as the store and logs give it (lk-... for identities with spaces)",
    )
    return common


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog=PROG, description=DESCRIPTION, epilog=EPILOG, parents=[_options(False)])
    common = _options(argparse.SUPPRESS)
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help, description=help, parents=[common])

    command("users", "users with counts and last activity")
    p = command("show", "memories, facts with their history, summaries, recent archive")
    p.add_argument("user", metavar="USER")
    p.add_argument("--recent", type=int, default=20, help="archived messages shown (default 20)")
    p = command("search", "what the agent would recall for QUERY")
    p.add_argument("user", metavar="USER")
    p.add_argument("query", metavar="QUERY")
    p = command("export", "everything kept about USER, one JSON document (`import` reads it back)")
    p.add_argument("user", metavar="USER")
    p.add_argument("-o", "--output", help="write to this file instead of standard output")
    p = command(
        "import",
        "read back what `export` wrote, or a JSON-lines file of turns, through the worker's write path",
    )
    p.add_argument("file", metavar="FILE", help="an export document, or JSON lines of turns ('-': standard input)")
    p.add_argument(
        "--user",
        metavar="USER",
        help="the user to import into (for turns that name none; for an export, another identity than its own)",
    )
    p = command("forget", "delete everything kept about USER (asks for USER to be typed, unless --yes)")
    p.add_argument("user", metavar="USER")
    p.add_argument("--yes", action="store_true", help="do not ask (scripts; required when not on a terminal)")
    command("stats", "totals and sizes")
    p = command("dead-letters", "list the journal's dead letters, or replay them")
    p.add_argument("--replay", nargs="+", metavar="TURN_ID", help="put these back in the queue")
    p.add_argument("--replay-all", action="store_true", help="put every dead letter back in the queue")
    p = command("redact", "apply today's secret rules to what is stored already, and to Mem0's history of it")
    p.add_argument("user", metavar="USER", nargs="?", help="only this user (default: every user)")
    p = command("retention", "delete what is older than MEMORY_RETENTION_DAYS")
    p.add_argument("--dry-run", action="store_true", help="count only, delete nothing")
    p.add_argument("--days", type=float, help="the period in days (default: MEMORY_RETENTION_DAYS)")
    return ap


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    return parser().parse_args(argv)
