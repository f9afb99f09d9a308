"""Long-term memory for LiveKit voice agents, on Mem0 and Postgres.

Adding memory to an agent you already have (docs/integrate.md):

    import memory

    def prewarm(proc: JobProcess) -> None:
        proc.userdata["vad"] = silero.VAD.load()
        memory.warm_up()                                  # once per process, last

    @server.rtc_session()
    async def entrypoint(ctx: JobContext) -> None:
        await ctx.connect()
        participant = await ctx.wait_for_participant()
        session = AgentSession(vad=..., stt=..., llm=..., tts=...)
        memory.attach(session, user_id=participant.identity)   # before session.start
        await session.start(agent=Assistant(), room=ctx.room)

Outside a session: `await memory.recall(user, query)`, `remember`, `memories`, `forget_user`,
`export_user`, `import_user`. Configuration comes from the environment and `.env`
(MEM0_SETTING, MEMORY_*: `.env.example`).

`__all__` is the contract; every other module of the package is internal. Each name loads
its module on first use, so `import memory` loads neither LiveKit nor Mem0.

The packages inside, each importing only from those below it (`lint-imports` checks):

    web | mcp | chat | preload   the operator's web page; the MCP server; the typed chat;
                                 what LiveKit's forkserver loads once
    api                          this public API
    admin                        the operator's command line
    working                      forms, shared contexts and hand-offs between agents
    livekit | forget             the glue to LiveKit's AgentSession; "forget me"
    rows | commands              the journal's handler: what a journaled row becomes; what
                                 the operator's commands share
    service | archive            what each MEM0_SETTING does on a turn; the archive
    userdata                     every place that holds a user's data (`PLACES`)
    journal                      the durable write journal
    gatekeeper | retrieval
    storage                      Postgres, the embedder, Mem0's table and the tables beside it
    language | ops               text in English and Chinese (pure); threads, metrics, heap
    settings | types | prompts
    errors | progname | bodies   the error tree; a command's own name; no HTTP body in a log

The same stack as the `layers` contract in pyproject.toml, checked by
`tests/package/test_drawings.py`.
"""

from importlib import import_module
from typing import Any

_EXPORTS = {
    # Adding memory to a LiveKit agent.
    "warm_up": "memory.api",
    "attach": "memory.api",
    "MemorySession": "memory.livekit.session",
    "MemoryAgent": "memory.livekit.agent",
    "first_agent": "memory.working",
    # Outside a session.
    "recall": "memory.api",
    "remember": "memory.api",
    "memories": "memory.api",
    "forget_user": "memory.api",
    "export_user": "memory.api",
    "import_user": "memory.api",
    "close": "memory.api",
    # Running a worker like this repository's agent.py.
    "prepare_worker": "memory.livekit.startup",
    "run_worker": "memory.livekit.startup",
    "server_options": "memory.livekit.startup",
    "cloud_models": "memory.settings",
    "load_prompt": "memory.prompts",
    # Values and errors.
    "MemoryRecord": "memory.types",
    "MemoryMode": "memory.settings",
    "MemorySettings": "memory.settings",
    "load_settings": "memory.settings",
    "ConfigError": "memory.settings",
    "InvalidMemoryText": "memory.types",
    "InvalidInput": "memory.errors",
    "AgentMemoryError": "memory.errors",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'memory' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
