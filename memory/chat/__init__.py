"""`python -m memory.chat USER`: the worker's own agent, session and memory in a terminal,
typed (no LiveKit server, no sound card; an OpenAI key, or any OpenAI-compatible server)."""
