"""`python -m memory.mcp`: the MCP server (see `memory.mcp.server`)."""

from memory.mcp.server import main

raise SystemExit(main())
