"""This process's memory runtime: the settings, the store, the retriever and the service that
every session of the process shares, made once (`warm_up`, or cold by the first `attach` or
plain function) and kept here.

The store, the service and the retriever (numpy, psycopg) and the metrics (prometheus_client,
which reads its directory when it is imported) are imported where a runtime is made, not when
this module is: `import memory` and `from memory import attach` load none of them
(tests/api/test_public_api.py), and the worker sets the variables they read first.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memory.language import lexical
from memory.ops import heap
from memory.settings import (
    ConfigError,
    EmbedderKind,
    MemorySettings,
    load_settings,
    prometheus_multiproc_dir,
    tell_libraries,
)
from memory.storage.embedder import local_model, write_model
from memory.types import describe_error

if TYPE_CHECKING:
    from memory.retrieval.retriever import Retriever
    from memory.service import MemoryService
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


def open_store(settings: MemorySettings, *, load_mem0: bool = True) -> MemoryStore | UnavailableStore:
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

    settings = settings or load_settings()
    tell_libraries()
    metrics.forget_dead_processes(prometheus_multiproc_dir())  # a killed job process's gauges
    _load_models(settings)
    return _with_store(settings, open_store(settings), warm=warm)


def _load_models(settings: MemorySettings) -> None:
    """The local embedder (both handles) and the language tables (jieba's dictionary, the
    word frequencies, the character tables)."""
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
    global _runtime
    tell_libraries()
    store = open_store(settings, load_mem0=False)
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
