"""`python -m memory.admin`: the operator's command line (see `cli`)."""

from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """The `memory-admin` command: the arguments parsed first (help and usage errors answer at
    once, `args`), then the command run over the store (`cli`)."""
    from memory.admin.args import parse

    args = parse(argv)
    from memory.admin.cli import run

    return run(args)
