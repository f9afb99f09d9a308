"""A user's memory for other agents and tools, over MCP (the official `mcp` SDK):
`memory-mcp` (stdio) or `memory-mcp --http` (streamable HTTP, with keys of its own that name
the identities each may touch). See `server`.

The SDK is an extra (`livekit-agent-memory[mcp]`): without it, the command says so in one
line and an import of `memory.mcp.server` raises an ImportError that names the extra."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence

MISSING = (
    "memory-mcp needs the MCP SDK, an extra: pip install 'livekit-agent-memory[mcp]' "
    "(uv: uv add 'livekit-agent-memory[mcp]')"
)


def require() -> None:
    """Raise an ImportError naming the extra when the MCP SDK is not installed."""
    if importlib.util.find_spec("mcp") is None:
        raise ImportError(MISSING, name="mcp")


def main(argv: Sequence[str] | None = None) -> int:
    """The `memory-mcp` command: one line and exit 2 without the extra."""
    try:
        require()
    except ImportError as exc:
        print(f"memory-mcp: cannot start: {exc}", file=sys.stderr)
        return 2
    from memory.mcp.server import main as serve

    return serve(argv)
