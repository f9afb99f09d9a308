"""What a command calls itself in its usage and messages: the name it was started by.

An installed package runs `memory-admin`; a checkout runs `python -m memory.admin`; help and
errors that name the other send the reader to a command they may not have."""

from __future__ import annotations

import os
import sys


def program_name(script: str, module: str) -> str:
    """`script` when this process was started as that console script, else `python -m module`."""
    started = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    return script if started == script else f"python -m {module}"
