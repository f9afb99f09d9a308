"""`python -m memory.mcp`: the MCP server (see `memory.mcp.server`)."""

from memory.mcp import main

raise SystemExit(main())
