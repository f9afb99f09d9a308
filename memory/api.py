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

import asyncio
import dataclasses
import inspect
import json
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal

from memory import bodies
from memory.settings import ConfigError, EmbedderKind, MemoryMode, MemorySettings, load_settings
from memory.types import InvalidMemoryText, MemoryRecord, describe_error, memory_user_id

if TYPE_CHECKING:
    from livekit.agents import AgentSession

    from memory.livekit.session import MemorySession
    from memory.retrieval.retriever import Retriever
    from memory.service import Forgotten, MemoryService
    from memory.storage.store import MemoryStore, UnavailableStore

logger = logging.getLogger("memory")

# The user id a warm-up's look-up runs under: nothing is ever stored for it.
_WARM_UP_USER = "memory-warm-up"


@dataclass
class _Runtime:
    settings: MemorySettings
    store: MemoryStore | UnavailableStore
    retriever: Retriever
    service: MemoryService
    warmed: bool


_runtime: _Runtime | None = None
_lock = threading.Lock()
_warned_cold = False


def _open_store(settings: MemorySettings, *, load_mem0: bool = True) -> MemoryStore | UnavailableStore:
    """The memory store, or a stand-in when it cannot be opened now (a fleet database down
    while this process starts): failing would fail the job process, and LiveKit gives up on
    a job after three, so the user would get no agent at all. With the stand-in the session
    runs without memory, its turns wait in the journal, and the store is opened once it can
    be. A configuration error (a table made for another embedder) is raised."""
    from memory.storage.store import MemoryStore, UnavailableStore

    try:
        return MemoryStore.open(settings, load_mem0=load_mem0)
    except ConfigError:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure to open means "no memory", never "no agent"
        reason = describe_error(exc)
        logger.error("memory store unavailable; sessions run without memory until it can be opened (%s)", reason)
        return UnavailableStore(settings, reason)


def _make_runtime(settings: MemorySettings | None, *, warm: bool) -> _Runtime:
    from memory.ops import metrics
    from memory.settings import prometheus_multiproc_dir, tell_libraries

    settings = settings or load_settings()
    tell_libraries()
    metrics.forget_dead_processes(prometheus_multiproc_dir())  # a killed job process's gauges
    _load_models(settings)
    return _with_store(settings, _open_store(settings), warm=warm)


def _load_models(settings: MemorySettings) -> None:
    """The local embedder (both handles) and the language tables (jieba's dictionary, the
    word frequencies, the character tables)."""
    from memory.language import lexical
    from memory.storage.embedder import local_model, write_model

    if settings.embedder is EmbedderKind.LOCAL:
        local_model()
        write_model()
    lexical.warm_up()


def _with_store(settings: MemorySettings, store: Any, *, warm: bool) -> _Runtime:
    from memory.archive.retention import start_background
    from memory.retrieval.retriever import Retriever
    from memory.service import MemoryService

    # One per process, shared by its sessions: the per-user densities are computed once
    # per process and user, not once per session. Its segmenter is loaded by `_load_models`
    # (before this, or behind the chat's prompt), not beside the chat's start.
    retriever = Retriever(store, settings, load_segmenter=False)
    service = MemoryService(store, settings, retriever=retriever)
    start_background(store)  # the archive's schema now; retention in a thread, once per fleet at a time
    if warm:
        _warm_read_path(service)
    return _Runtime(settings, store, retriever, service, warm)


def warm_up_behind(settings: MemorySettings) -> Callable[[], Future[None]]:
    """The text chat's start (not exported): the store opened now, without Mem0, so that a
    session can be attached and greet. Returns what loads the rest (Mem0, the embedder, the
    language tables, a first look-up) in a thread, for the caller to start once its prompt
    is shown (loaded beside it, they took the CPU the prompt needed); its future is done when
    they are: the chat waits for it before its first look-up."""
    from memory.settings import tell_libraries

    global _runtime
    tell_libraries()
    store = _open_store(settings, load_mem0=False)
    with _lock:
        _runtime = runtime = _with_store(settings, store, warm=False)
    done: Future[None] = Future()

    def load() -> None:
        try:
            _load_models(settings)
            if getattr(store, "available", True):
                store.mem0  # noqa: B018 - built now, off the first look-up
                store.mem0_history.purge_forgotten()  # as `MemoryStore.open` does when it builds Mem0
            _warm_read_path(runtime.service)
            runtime.warmed = True
            done.set_result(None)
        except BaseException as exc:  # noqa: BLE001 - the chat says it and stops
            done.set_exception(exc)

    def start() -> Future[None]:
        threading.Thread(target=load, name="memory-warm-up", daemon=True).start()
        return done

    return start


def _warm_read_path(service: MemoryService) -> None:
    """One look-up end to end, for a user who has nothing: the query's embedding, every SQL
    statement of the retrieval (the pool's connections, the server's plans), the scoring's
    numpy and the modules a session imports. The first look-up of a cold process otherwise
    pays all of it, and missed its budget (it recalled nothing)."""
    import memory.livekit.archive  # noqa: F401 - imported now, not when the first session starts
    import memory.livekit.session  # noqa: F401 - imported now, not when the first session starts
    import memory.working  # noqa: F401 - imported now, not when the first session starts

    if not getattr(service.store, "available", True):
        return
    started = time.perf_counter()
    for text in ("What is my sister's name?", "我妹妹叫什么名字？"):
        try:
            service.recall_sync(_WARM_UP_USER, text, context=["warm up"])
        except Exception as exc:  # noqa: BLE001 - a warm-up that fails leaves the first look-up cold, no worse
            logger.warning("memory warm-up look-up failed: %s", describe_error(exc))
            return
    logger.debug("memory read path warmed", extra={"elapsed": round(time.perf_counter() - started, 3)})


def warm_up(*, settings: MemorySettings | None = None, freeze: bool = True) -> None:
    """Load and warm everything memory needs in this process, so that the first look-up of
    a new process meets its budget. Call it in the worker's prewarm (`setup_fnc`), last:

        def prewarm(proc: JobProcess) -> None:
            proc.userdata["vad"] = silero.VAD.load()
            memory.warm_up()

    It reads the settings (`.env`, the environment), loads the local embedder and the
    Chinese segmenter, opens the store (an embedded Postgres under `MEMORY_DATA_DIR`, or
    `MEMORY_DATABASE_URL`), runs one look-up end to end and, with `freeze`, takes everything
    loaded so far out of the garbage collector's full passes (they stalled replies by about
    130 ms). Idempotent. A store that cannot be opened (a database down) is not an error:
    sessions run without memory and it is opened once it can be; a configuration mistake
    raises `ConfigError` naming the variable. Add `"memory.preload"` to `AgentServer`'s
    `preload_modules` as well to load the libraries once in LiveKit's forkserver."""
    global _runtime
    with _lock:
        if _runtime is None or not _runtime.warmed:
            if _runtime is not None:
                _warm_read_path(_runtime.service)
                _runtime.warmed = True
            else:
                _runtime = _make_runtime(settings, warm=True)
    if freeze:
        from memory.ops import heap

        heap.settle()


def _get_runtime(*, cold_warning: bool) -> _Runtime:
    global _runtime, _warned_cold
    with _lock:
        if _runtime is None:
            if cold_warning and not _warned_cold:
                _warned_cold = True
                logger.warning(
                    "memory.warm_up() was not called in this process (the worker's prewarm): memory loads now, "
                    "as the session starts, and its first look-ups may miss their budget and recall nothing "
                    "(docs/integrate.md)"
                )
            _runtime = _make_runtime(None, warm=False)
        return _runtime


def _job_id() -> str | None:
    """The LiveKit job's id, when running inside one: a session's memories carry it."""
    try:
        from livekit.agents import get_job_context

        return get_job_context().job.id
    except Exception:  # noqa: BLE001 - not in a job (a test, a script, the text chat)
        return None


def _shutdown_with_job(memory: MemorySession) -> None:
    try:
        from livekit.agents import get_job_context

        ctx = get_job_context()
    except Exception:  # noqa: BLE001 - not in a job: the session's close drains memory
        return

    async def close(_reason: str = "") -> None:
        await memory.aclose()

    ctx.add_shutdown_callback(close)


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
    from livekit.agents import llm as lk_llm

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
    model = model if isinstance(model, lk_llm.LLM) else None
    if settings.mode is MemoryMode.GATED and model is None:
        raise ValueError("GATED extracts facts with an LLM: give the AgentSession an LLM, or pass llm=")
    memory = attach_memory(
        session,
        store=runtime.store,
        settings=settings,
        retriever=runtime.retriever,
        user_id=user_id,
        session_id=session_id or _job_id(),
        memory_llm=model,
        summarizer=model,
        budget_s=None if budget_ms is None else max(0.0, budget_ms) / 1000,
    )
    _inject_into_agents(session, memory)
    _close_with_session(session, memory)
    _shutdown_with_job(memory)
    return memory


# ------------------------------------------------------------- every agent of the session


def _inject_into_agents(session: AgentSession, memory: MemorySession) -> None:
    """Each agent the session runs gets memory in its `llm_node` (the one place that sees
    every request, spoken or typed, inside LiveKit's preemptive generation): the agent's own
    node runs on a copy of the context with memory's blocks added, for that request only.
    Agents are reached as the session activates them (`start`, `update_agent`, a tool's
    hand-off all go through `AgentSession._update_activity`), so an agent made anywhere, at
    any time, is covered. The product's own `MemoryAgent`s already inject: left alone."""
    from livekit.agents import AgentSession

    update = getattr(session, "_update_activity", None)
    if update is None:
        if isinstance(session, AgentSession):  # a LiveKit that moved it: say so, never recall nothing silently
            raise RuntimeError(
                "memory.attach cannot reach this LiveKit version's agents: make your agent a memory.MemoryAgent"
            )
        return  # a stand-in for a session (tests)

    async def update_activity(agent: Any, *args: Any, **kwargs: Any) -> Any:
        _give_memory(agent, memory)
        return await update(agent, *args, **kwargs)

    session._update_activity = update_activity  # type: ignore[method-assign]
    current = getattr(session, "_agent", None)
    if current is not None:
        _give_memory(current, memory)


def _give_memory(agent: Any, memory: MemorySession) -> None:
    from livekit.agents import llm as lk_llm

    from memory.livekit.agent import MemoryAgent

    if isinstance(agent, MemoryAgent) or getattr(agent, "_memory_session", None) is not None:
        return
    node = agent.llm_node  # the agent's own (its class's override, or LiveKit's default)

    async def llm_node(chat_ctx: Any, tools: Any, model_settings: Any) -> AsyncIterator[Any]:
        ctx = await memory.prepare_chat_ctx(chat_ctx)
        result = node(ctx, tools, model_settings)
        if inspect.isawaitable(result):
            result = await result
        if result is None:
            return
        if isinstance(result, str | lk_llm.ChatChunk):
            yield result
            return
        async for chunk in result:
            yield chunk

    agent._memory_session = memory
    agent.llm_node = llm_node


def _close_with_session(session: AgentSession, memory: MemorySession) -> None:
    tasks: set[asyncio.Task[None]] = set()

    def on_close(_ev: Any) -> None:
        task = asyncio.ensure_future(memory.aclose())
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    session.on("close", on_close)


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
    from memory.ops.threads import run_read

    runtime = _get_runtime(cold_warning=False)
    uid = _user(user_id)
    _bounded(query, "query", runtime.settings.max_turn_chars)
    records = await run_read(runtime.service.recall_sync, uid, query, wait_s=5.0)
    return records[:limit] if limit else records


async def memories(user_id: str, *, limit: int = 1000) -> list[MemoryRecord]:
    """What is stored for the user, newest first: NORMAL's turns, GATED's facts."""
    from memory.ops.threads import run_read

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
    from memory.ops.threads import run_write

    runtime = _get_runtime(cold_warning=False)
    return await run_write(runtime.service.forget, _user(user_id))


async def export_user(user_id: str) -> dict[str, Any]:
    """Everything kept about the user as one JSON-ready document (what `memory-admin export`
    writes; `import_user` reads it back). Raises `LookupError` when nothing is stored."""
    from memory.admin.documents import Admin
    from memory.admin.tables import to_json
    from memory.ops.threads import run_read

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


def runtime() -> _Runtime | None:
    """This process's memory runtime, if made (for tests, benchmarks and tools; not exported)."""
    return _runtime


def use(settings: MemorySettings, store: Any, retriever: Retriever | None = None) -> _Runtime:
    """Make this process's runtime from parts made elsewhere (the test harness's store, a
    benchmark's settings), as if warmed up; `attach` and the plain functions then use them.
    Not exported: an integrator calls `warm_up`."""
    from memory.retrieval.retriever import Retriever
    from memory.service import MemoryService

    global _runtime
    retriever = retriever or Retriever(store, settings)
    with _lock:
        _runtime = _Runtime(settings, store, retriever, MemoryService(store, settings, retriever=retriever), True)
        return _runtime


def forget_runtime() -> None:
    """Drop this process's runtime without closing its store (tests that prewarm again)."""
    global _runtime, _warned_cold
    with _lock:
        _runtime, _warned_cold = None, False


def close() -> None:
    """Close this process's store (its connections; the embedded server stops when its last
    user leaves). For scripts and tools; a LiveKit worker never needs it."""
    global _runtime
    with _lock:
        runtime, _runtime = _runtime, None
    if runtime is not None:
        runtime.store.close()
        if not runtime.settings.database_url:
            from memory.storage.postgres import stop_if_unused

            stop_if_unused(runtime.settings.pgdata)
