"""`python -m memory.admin`: the operator's command line (see `cli`)."""

from memory.admin.args import parse

args = parse()  # `--help` and usage errors answer before the store and Mem0 are loaded

from memory.admin.cli import run  # noqa: E402 - only once the arguments are known

raise SystemExit(run(args))
