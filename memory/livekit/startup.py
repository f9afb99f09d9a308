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
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from memory import bodies
from memory.livekit.conditions import HandledConditions
from memory.livekit.problems import (
    LIVEKIT_COMMANDS,
    audio_problems,
    llm_models,
    memory_problems,
    other_worker,
    port_problems,
    release_worker_lock,
)
from memory.settings import (
    MemorySettings,
    cloud_models,
    console_without_livekit,
    env_file_note,
    idle_processes,
    llm_check,
    load_env_file,
    load_settings,
    process_env,
    prometheus_port,
    startup_problems,
)

PROG = "agent.py"
# The commands that run sessions: their store is checked; those that join a LiveKit
# project: their project is checked too.
SESSION_COMMANDS = ("dev", "start", "connect", "console")
# LiveKit's CLI takes these flags in place of the variables.
CLI_FLAGS = {"--url": "LIVEKIT_URL", "--api-key": "LIVEKIT_API_KEY", "--api-secret": "LIVEKIT_API_SECRET"}

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Checked:
    """What the start-up check found: the command, and the settings it runs with. `finish`:
    the checks still running (the store, the embedder, the LLM server, the LiveKit project),
    waited for by `wait` before the worker starts; they run while LiveKit is imported."""

    command: str | None
    settings: MemorySettings | None = None
    help: bool = False
    livekit_url: str = ""
    finish: Callable[[], None] | None = None

    def wait(self) -> None:
        """Until the checks still running are done; stops the process naming any problem."""
        if self.finish is not None:
            self.finish()


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
    """Exit non-zero naming what to fix: one problem on one line, which also says which
    `.env` was read (or where one was looked for): run from another directory, a command
    reads another `.env`, or none."""
    if len(problems) == 1:
        sys.exit(f"{PROG}: cannot start: {problems[0]} ({env_file_note()})")
    sys.exit(f"{PROG}: cannot start ({env_file_note()}):\n  " + "\n  ".join(problems))


# ---------------------------------------------------------------- checks


def cli_env(argv: list[str]) -> dict[str, str]:
    """The environment as the command will see it: a flag counts as its variable."""
    env = process_env()
    for i, arg in enumerate(argv):
        flag, eq, value = arg.partition("=")
        if flag in CLI_FLAGS and (eq or i + 1 < len(argv)):
            env[CLI_FLAGS[flag]] = value if eq else argv[i + 1]
    return env


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


def _llm_check(env: Mapping[str, str], settings: MemorySettings | None) -> tuple[threading.Thread, list[str]]:
    """The LLM server's check (`preflight.llm_problems`), on a thread of its own beside the others."""
    found: list[str] = []

    def run() -> None:
        from memory.livekit.preflight import llm_problems

        models = cloud_models(env)
        try:
            found.extend(llm_problems(models.base_url, models.api_key, llm_models(env, settings)))
        except Exception as exc:  # noqa: BLE001 - a check that fails leaves it to the first reply
            logging.getLogger(__name__).debug("LLM pre-flight check failed: %r", exc)

    thread = threading.Thread(target=run, name="llm-preflight", daemon=True)
    if llm_check(env):
        thread.start()
    return thread, found


def check_llm(env: Mapping[str, str], settings: MemorySettings | None) -> list[str]:
    """The LLM server's check, at once (the text chat's, before its first prompt)."""
    thread, found = _llm_check(env, settings)
    if thread.is_alive():
        thread.join()
    return found


def _joined(checks: list[tuple[threading.Thread, list[str]] | None]) -> list[str]:
    """What the checks found, once each has ended."""
    problems: list[str] = []
    for thread, found in filter(None, checks):
        if thread.is_alive():
            thread.join()
        problems += found
    return problems


def check(argv: list[str], *, wait: bool = True) -> Checked:
    """Every problem that would stop `argv`'s command, as lines naming what to fix (exit
    non-zero), else the settings it runs with. Loads neither LiveKit's agents nor a model
    until the configuration has passed. With `wait=False` the configuration is checked now
    and the rest (the store, the embedder, the LLM server, the LiveKit project: mostly
    waiting on a server or a subprocess) goes on in threads while the caller imports LiveKit;
    `Checked.wait` joins them before the worker starts."""
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
    store_found: list[str] = []
    store = threading.Thread(target=lambda: store_found.extend(memory_problems(settings)), name="memory-check")
    store.start()  # the slow one (the database starts, the embedder loads): it may go on while LiveKit loads
    checks = [_llm_check(env, settings)]  # the LLM server and the LiveKit project: waited for now
    if command in LIVEKIT_COMMANDS:
        checks.append(_livekit_check(env))
    found = _joined(checks)
    if found:  # a mistake no retry fixes: said before LiveKit (and its retries) is loaded
        store.join()
        _stop(store_found + found + busy)

    def finish() -> None:
        problems = _joined([(store, store_found)])
        if problems + busy:
            _stop(problems + busy)
        if (other := other_worker(settings)) is not None:
            logger.warning(other)

    checked = Checked(command, settings, livekit_url=env.get("LIVEKIT_URL", "").strip(), finish=finish)
    if wait:
        checked.wait()
    return checked


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


def run(run_app: Callable[[Any], None], server: Any, checked: Checked) -> None:
    """LiveKit's CLI on `server`, with a line when it registers; exits non-zero when the
    worker stopped on an error (LiveKit's CLI returns normally then)."""
    if checked.help:
        run_app(server)
        return
    checked.wait()
    talk(checked.command)

    handled = HandledConditions(checked.livekit_url)

    def registered(worker_id: str, *_: object) -> None:
        handled.registered()
        logger.info(
            "worker %s registered with LiveKit at %s: every new room of the project gets the agent (a link "
            "for a stable identity: uv run python -m memory.livekit.token alice)",
            worker_id,
            checked.livekit_url,
        )

    server.on("worker_registered", registered)
    logging.getLogger("livekit.agents").addFilter(handled)
    bodies.install("livekit.agents", "livekit.plugins.openai", "memory")  # a web page's title, not the page
    try:
        run_app(server)
    finally:
        logging.getLogger("livekit.agents").removeFilter(handled)
        release_worker_lock()
        settings = checked.settings
        if settings is not None and not settings.database_url:
            from memory.storage.postgres import stop_if_unused

            stop_if_unused(settings.pgdata)  # a job process LiveKit killed never left the embedded server
        if getattr(server, "failed", False):  # in place of the SystemExit(0) that LiveKit's CLI ends with
            sys.exit(f"{PROG}: the worker stopped on an error (logged above)")


# ---------------------------------------------------------------- for any worker script

# LiveKit kills a job process whose prewarm takes longer than `initialize_process_timeout`
# (10 s by default). Measured with `python -m bench.ops.prewarm` (docs/latency.md): 4.9-8.3 s
# (p50 7.9 s) for two processes prewarming at once beside a busy process and the test suite
# on 2 cores, after 12 s of importing, and up to 10 s on a busier machine, where LiveKit's
# default kills and respawns processes in a loop. 60 s is a wide margin over the worst
# measured: a slow process is still better than none, and a hung one still ends.
PREWARM_TIMEOUT_S = 60.0


def server_options(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Keyword arguments for LiveKit's `AgentServer` that suit a worker with memory:

        server = AgentServer(setup_fnc=prewarm, **memory.server_options())

    - `preload_modules=["memory.preload"]`: memory's libraries and data (Mem0, jieba's
      dictionary, the word lists, the embedder) loaded once in LiveKit's forkserver and
      shared copy-on-write by every job process (docs/scaling.md);
    - `initialize_process_timeout=60`: a prewarm with memory took up to 10 s on a busy 2-core
      machine, LiveKit's default time-out;
    - `num_idle_processes` (AGENT_IDLE_PROCESSES) and `prometheus_port` (PROMETHEUS_PORT),
      when set."""
    options: dict[str, Any] = {
        "preload_modules": ["memory.preload"],
        "initialize_process_timeout": PREWARM_TIMEOUT_S,
    }
    if (idle := idle_processes(env)) is not None:
        options["num_idle_processes"] = idle
    if (port := prometheus_port(env)) is not None:
        options["prometheus_port"] = port
    return options


def prepare_worker(argv: list[str] | None = None) -> Checked | None:
    """At the top of a worker script, before LiveKit is imported:

        CHECKED = memory.prepare_worker(sys.argv if __name__ == "__main__" else None)

    With `argv` (the script run as a command): reads `.env`, then checks the configuration,
    the data directory or database, the store, the embedder, the LLM server and the LiveKit
    project, and stops in one line naming what to fix (which `.env` was read included);
    says when each is ready. Without (the module imported: LiveKit's job processes, tests):
    only the checks `python -m livekit.agents start` needs. Either way it keeps raw user
    transcripts out of LiveKit's logs (MEMORY_LOG_TRANSCRIPTS) and points every process's
    metrics at one directory (PROMETHEUS_PORT): both must happen before LiveKit loads."""
    from memory.livekit import transcript_log
    from memory.settings import log_transcripts_mode, share_metrics_across_processes

    load_env_file()
    checked = check(list(argv), wait=False) if argv is not None else check_under_livekit_main()
    transcript_log.install(log_transcripts_mode())
    share_metrics_across_processes()
    return checked


def run_worker(run_app: Callable[[Any], None], server: Any, checked: Checked | None = None) -> None:
    """LiveKit's CLI (`cli.run_app`) on `server`, with a line when the worker registers, the
    worker's handled conditions said in one line, and a non-zero exit when it stopped on an
    error (LiveKit's CLI returns normally then). `checked`: what `prepare_worker` returned."""
    run(run_app, server, checked or check(sys.argv))
