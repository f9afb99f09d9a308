"""Long-term memory for a LiveKit voice agent, on Mem0 and Postgres.

The packages, each importing only from those below it (`lint-imports` checks):

    web                   the operator's web page and LiveKit's token endpoint
    preload               what every job process loads, once in LiveKit's forkserver
    admin | chat          the operator's command line; the agent in a terminal, typed
    working               forms, shared contexts and hand-offs between agents
    livekit | forget      the glue to LiveKit's AgentSession (the door for every block
                          memory adds to a request: livekit/blocks.py); "forget me"
    rows                  the journal's handler: what a journaled row becomes
    service | archive     what each MEM0_SETTING does on a turn; every message kept,
                          summaries of long talks, retention
    journal               the durable write journal
    gatekeeper | retrieval
    storage               Postgres, the embedder, Mem0's table and the tables beside it
    language | ops        text in English and Chinese (pure); thread pools, metrics, heap
    settings | types | prompts

The names `agent.py` composes are exported here; each loads its module on first use,
so importing one part (the language tools, say) does not load LiveKit or Mem0.
"""

from importlib import import_module
from typing import Any

_EXPORTS = {
    "ArchiveSession": "memory.livekit.archive",
    "ConfigError": "memory.settings",
    "Gatekeeper": "memory.gatekeeper.gatekeeper",
    "MemoryAgent": "memory.livekit.agent",
    "MemoryMode": "memory.settings",
    "MemoryService": "memory.service",
    "MemorySession": "memory.livekit.session",
    "MemorySettings": "memory.settings",
    "MemoryStore": "memory.storage.store",
    "Retriever": "memory.retrieval.retriever",
    "UnavailableStore": "memory.storage.store",
    "first_agent": "memory.working",
    "load_settings": "memory.settings",
    "start_retention": "memory.archive.retention",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'memory' has no attribute {name!r}")
    value = getattr(import_module(module), "start_background" if name == "start_retention" else name)
    globals()[name] = value
    return value
