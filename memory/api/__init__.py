"""The public API: memory for a LiveKit agent someone already has, and for code outside a
session. `memory/__init__.py` exports these names (its `__all__` is the contract).

One process holds one memory runtime: the settings (`.env` and the environment, read once),
the store (an embedded Postgres under `MEMORY_DATA_DIR`, or `MEMORY_DATABASE_URL`), the
local embedder and the retriever that every session of the process shares. `warm_up` makes
it and warms every part of a look-up in the worker's prewarm; `attach` uses it (and makes
it, cold, with one warning, when nobody warmed it up); the plain functions open it on first
use. The plain functions run every text through the ways in the operator's import uses
(redaction, bounds, the journal, GATED's gatekeeper), so nothing reaches the store that a
spoken turn could not bring.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from memory import bodies
from memory.admin.tables import to_json
from memory.api.lifecycle import (
    _get_runtime,
    _Runtime,
    close,
    forget_runtime,
    runtime,
    use,
    warm_up,
    warm_up_behind,
)
from memory.ops.threads import run_read, run_write
from memory.settings import MemoryMode
from memory.types import InvalidMemoryText, MemoryRecord, memory_user_id

if TYPE_CHECKING:
    from livekit.agents import AgentSession

    from memory.livekit.session import MemorySession
    from memory.service import Forgotten

# The heavy parts (LiveKit, the store's and the admin's modules) are imported inside the
# functions that use them: `from memory import attach` loads none of them
# (tests/api/test_public_api.py), as `memory/__init__.py` promises.
__all__ = [
    "attach",
    "close",
    "export_user",
    "forget_runtime",
    "forget_user",
    "import_user",
    "memories",
    "recall",
    "remember",
    "runtime",
    "use",
    "warm_up",
    "warm_up_behind",
]


def attach(
    session: AgentSession,
    *,
    user_id: str,
    mode: Literal["NORMAL", "GATED"] | None = None,
    budget_ms: float | None = None,
    llm: Any | None = None,
    archive: bool | None = None,
    session_id: str | None = None,
) -> MemorySession:
    """Give `session` long-term memory of `user_id`; call it before `session.start(...)`.

    Every LLM request of every agent the session runs (spoken or typed, hand-offs included)
    gets the user's relevant memories, looked up while the user speaks and waited for at most
    `budget_ms`; every completed user turn is journaled on disk and stored in the background
    (NORMAL: as said; GATED: the durable facts in it). Nothing is awaited on the reply's path
    and no agent needs changing. What is written is drained when the session closes (and, in
    a LiveKit job, before the job's process exits).

    - `user_id`: who the memories belong to: the participant identity
      (`participant.identity`), stable across calls; never the room name.
    - `mode`: "NORMAL" or "GATED"; default `MEM0_SETTING` (NORMAL).
    - `budget_ms`: the longest a reply waits for memory; default `MEMORY_BUDGET_MS` (150).
    - `llm`: the model GATED extracts facts with and long talks are summarised with;
      default the session's own LLM.
    - `archive`: keep every message and summarise long talks ("what did we talk about last
      time?"); default `MEMORY_ARCHIVE` (on).
    - `session_id`: what the session's memories are grouped by; default the LiveKit job's id.

    Returns the session's memory (`MemorySession`): `await memory.aclose()` closes it early;
    `memory.turns` says what each reply was given. Raises `ValueError` for a blank
    `user_id`, and for GATED without an LLM.
    """
    from memory.livekit import attach as glue
    from memory.livekit.compose import attach_memory

    memory_user_id(user_id)  # a blank identity is a mistake to see now, not a turn later
    # A model URL that reaches a web page: LiveKit's retries and errors log the page's title, not the page.
    bodies.install("livekit.agents", "livekit.plugins.openai", "memory")
    runtime = _get_runtime(cold_warning=True)
    settings = runtime.settings
    if mode is not None:
        try:
            settings = dataclasses.replace(settings, mode=MemoryMode(str(mode).strip().upper()))
        except ValueError:
            raise ValueError(f"mode={mode!r}: use 'NORMAL' or 'GATED'") from None
    if archive is not None:
        settings = dataclasses.replace(settings, archive=archive)
    model = llm if llm is not None else getattr(session, "llm", None)
    model = glue.plain_llm(model)
    if settings.mode is MemoryMode.GATED and model is None:
        raise ValueError("GATED extracts facts with an LLM: give the AgentSession an LLM, or pass llm=")
    memory = attach_memory(
        session,
        store=runtime.store,
        settings=settings,
        retriever=runtime.retriever,
        user_id=user_id,
        session_id=session_id or glue.job_id(),
        memory_llm=model,
        summarizer=model,
        budget_s=None if budget_ms is None else max(0.0, budget_ms) / 1000,
    )
    _inject_into_agents(session, memory)
    glue.close_with_session(session, memory)
    glue.shutdown_with_job(memory)
    return memory


def _inject_into_agents(session: AgentSession, memory: MemorySession) -> None:
    """Memory given to every agent `session` activates (`memory/livekit/attach.py`)."""
    from memory.livekit.attach import inject_into_agents

    inject_into_agents(session, memory)


# ------------------------------------------------------------- outside a LiveKit session


def _user(user_id: str) -> str:
    """The stored id, by the one identity rule; each function calls it once, on what its
    caller gave (`InvalidIdentity` in the same words as every other door)."""
    return memory_user_id(user_id)


def _bounded(text: str, what: str, limit: int) -> str:
    """The same bound every way in has: a clear error naming the limit, never a silent cut."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidMemoryText(f"{what} is empty")
    if len(text) > limit:
        raise InvalidMemoryText(f"{what} is {len(text):,} characters long; at most {limit:,} are taken")
    return text


async def recall(user_id: str, query: str, *, limit: int | None = None) -> list[MemoryRecord]:
    """The user's memories most relevant to `query`, best first (at most `limit`, default
    `MEMORY_TOP_K`): what a reply to `query` would be given, without a session. In GATED,
    facts only. Raises `InvalidMemoryText` for an empty or oversized query."""
    runtime = _get_runtime(cold_warning=False)
    uid = _user(user_id)
    _bounded(query, "query", runtime.settings.max_turn_chars)
    records = await run_read(runtime.service.recall_sync, uid, query, wait_s=5.0)
    return records[:limit] if limit else records


async def memories(user_id: str, *, limit: int = 1000) -> list[MemoryRecord]:
    """What is stored for the user, newest first: NORMAL's turns, GATED's facts."""
    runtime = _get_runtime(cold_warning=False)
    return await run_read(runtime.store.list_user, _user(user_id), limit=limit, wait_s=5.0)


async def remember(user_id: str, text: str) -> dict[str, Any]:
    """Store `text` as something the user said, the way a spoken turn is stored: secrets
    redacted, bounded (one memory's length), through the operator's import; NORMAL keeps it
    as said, GATED keeps the durable facts its gatekeeper finds (its extraction model:
    `MEMORY_LLM_MODEL`). Returns what was written (`ImportReport.as_dict()`: turns, facts,
    dropped, refused). Raises `InvalidMemoryText` for empty or oversized text."""
    runtime = _get_runtime(cold_warning=False)
    uid = _user(user_id)
    _bounded(text, "text", runtime.settings.max_turn_chars)
    line = {"text": text, "said_at": datetime.now(UTC).isoformat()}  # a new turn, also when said before
    return await _import(runtime, [line], uid)


async def forget_user(user_id: str) -> Forgotten:
    """Delete everything kept about the user: memories with their history, archived
    messages, shared contexts, turns still waiting in this machine's journal. The result
    says what went from each place and what could not be done (`complete`); it can be
    repeated."""
    runtime = _get_runtime(cold_warning=False)
    return await run_write(runtime.service.forget, _user(user_id))


async def export_user(user_id: str) -> dict[str, Any]:
    """Everything kept about the user as one JSON-ready document (what `memory-admin export`
    writes; `import_user` reads it back). Raises `LookupError` when nothing is stored."""
    from memory.admin.documents import Admin

    runtime = _get_runtime(cold_warning=False)
    uid = _user(user_id)
    doc = await run_read(Admin(runtime.store, runtime.settings).export, uid, wait_s=5.0)
    return json.loads(to_json(doc))


async def import_user(
    document: dict[str, Any] | Sequence[dict[str, Any]] | str, *, user_id: str | None = None
) -> dict[str, Any]:
    """Write back what `export_user` gave (a dict), or turns and facts (a list of
    `{"text": ...}` / `{"fact": ..., "category": ...}`, or the same as JSON lines), through
    the worker's write path: redacted, bounded, journaled; running it twice adds nothing.
    `user_id`: the user to import into (default: the document's own). Returns the report
    (`turns`, `facts`, `unchanged`, `dropped`, ...). Raises `InvalidInput` (`ImportRefused`:
    every problem, one a line), naming what was wrong, before anything is written."""
    runtime = _get_runtime(cold_warning=False)
    return await _import(runtime, document, None if user_id is None else _user(user_id))


async def _import(
    runtime: _Runtime, document: dict[str, Any] | Sequence[dict[str, Any]] | str, uid: str | None
) -> dict[str, Any]:
    """`import_user` for a stored id already made (`uid`): never hashed again."""
    from memory.admin.importer import import_text

    if isinstance(document, str):
        text = document
    elif isinstance(document, dict):
        text = json.dumps(document, ensure_ascii=False)
    else:
        text = "".join(json.dumps(item, ensure_ascii=False) + "\n" for item in document)
    report = await import_text(runtime.store, runtime.settings, text, user_id=uid)
    return report.as_dict()
