"""A user's memory for other agents and tools, over MCP (the official `mcp` SDK):
`memory-mcp` (stdio) or `memory-mcp --http` (streamable HTTP, with keys of its own that name
the identities each may touch). See `server`."""
