"""A LiveKit voice agent that remembers its users.

VAD -> STT -> LLM -> TTS in a LiveKit room, with long-term memory on Mem0
(`memory/`). Run `python agent.py dev` against LiveKit, `console` to try it in
a terminal, `start` in production, `download-files` at image build time.
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import sys
import tempfile
from collections.abc import Mapping
from typing import Any

from memory.settings import load_env_file

load_env_file()  # the .env of the directory the worker starts in; empty variables unset


def _share_metrics_across_processes() -> None:
    """Memory's metrics are counted in the job processes, and LiveKit's /metrics shows
    only its own process's unless every process writes to one directory. Runs before
    prometheus_client makes any metric (LiveKit's and memory/metrics.py's alike, at
    import): one directory per data directory, not one per start (LiveKit empties it
    when it starts)."""
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR", "").strip():
        os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)  # empty, as .env.example has it: unset
        if not os.environ.get("PROMETHEUS_PORT", "").strip():
            return
        data_dir = os.path.abspath(os.environ.get("MEMORY_DATA_DIR", "").strip() or ".data")
        tag = hashlib.sha256(data_dir.encode()).hexdigest()[:12]
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = os.path.join(tempfile.gettempdir(), f"memory-prometheus-{tag}")
    try:
        os.makedirs(os.environ["PROMETHEUS_MULTIPROC_DIR"], exist_ok=True)
    except OSError:  # metrics of this process only, rather than no worker
        os.environ.pop("PROMETHEUS_MULTIPROC_DIR")


_share_metrics_across_processes()

from livekit.agents import AgentServer, AgentSession, JobContext, JobProcess, cli, room_io  # noqa: E402
from livekit.plugins import openai, silero  # noqa: E402

from memory import heap, lexical, metrics  # noqa: E402
from memory.embedder import local_model, write_model  # noqa: E402
from memory.archive.retention import start_background as start_retention  # noqa: E402
from memory.archive.session import ArchiveSession  # noqa: E402
from memory.gatekeeper import Gatekeeper  # noqa: E402
from memory.livekit_glue import MemoryAgent, MemorySession  # noqa: E402
from memory.postgres import stop_if_unused, storage_problems  # noqa: E402
from memory.prompts import load_prompt  # noqa: E402
from memory.retrieval import Retriever  # noqa: E402
from memory.service import MemoryService  # noqa: E402
from memory.settings import ConfigError, EmbedderKind, MemoryMode, MemorySettings, load_settings, startup_problems  # noqa: E402
from memory.store import MemoryStore, UnavailableStore, describe_error, schema_problems  # noqa: E402

logger = logging.getLogger("agent")


def _openai_kwargs() -> dict[str, str]:
    base_url = os.environ.get("OPENAI_BASE_URL", "").strip()
    return {"base_url": base_url} if base_url else {}


def prewarm(proc: JobProcess) -> None:
    """Once per worker process: the VAD, the local embedder, the Chinese segmenter and
    the memory store; then everything they made is frozen out of the garbage
    collector's full passes (memory/heap.py), which would otherwise stall replies."""
    settings = load_settings()
    metrics.forget_dead_processes()
    proc.userdata["vad"] = silero.VAD.load()
    if settings.embedder is EmbedderKind.LOCAL:
        local_model()
        write_model()
    lexical.warm_up()
    proc.userdata["settings"] = settings
    proc.userdata["store"] = store = _open_store(settings)
    # One per process, shared by its sessions: its per-user densities are then
    # computed once per process and user (as the README says), not once per session.
    proc.userdata["retriever"] = Retriever(store, settings)
    start_retention(store)  # the archive's schema now; retention in a thread, once per fleet at a time
    heap.settle()


def _open_store(settings: MemorySettings) -> MemoryStore | UnavailableStore:
    """The memory store, or a stand-in when it cannot be opened now (a fleet database
    down while this process starts). Failing here would fail the process, and LiveKit
    would give up on the job after three: the user would get no agent at all. With the
    stand-in the session runs without memory, its turns wait in the journal, and the
    stand-in opens the store once it can. Configuration errors are raised, not stood in
    for: `main` checks most at start-up, and a table of the wrong dimensions only here."""
    try:
        return MemoryStore.open(settings)
    except ConfigError:  # a mistake to fix (a table made for another embedder), not an outage
        raise
    except Exception as exc:  # noqa: BLE001 - any failure to open means "no memory", never "no agent"
        reason = describe_error(exc)
        logger.error("memory store unavailable; sessions run without memory until it can be opened (%s)", reason)
        return UnavailableStore(settings, reason)


def _env(name: str, default: str) -> str:
    """A variable, or its default when unset or empty (as the memory variables read)."""
    return os.environ.get(name, "").strip() or default


def _prometheus_port() -> int | None:
    raw = os.environ.get("PROMETHEUS_PORT", "").strip()
    try:
        return int(raw) if raw else None
    except ValueError:  # a fraction or a word: start-up refuses it, naming the variable
        return None


class _Server(AgentServer):
    """LiveKit's CLI logs "worker failed" and returns normally when the worker stops on an
    error (a port in use, LiveKit unreachable after its retries), so the process exited 0
    and a supervisor restarting on failure (Docker, systemd, Kubernetes) took it for a
    clean stop. This remembers the failure so that `main` can exit non-zero."""

    failed: bool = False

    async def run(self, *args: Any, **kwargs: Any) -> None:
        try:
            await super().run(*args, **kwargs)
        except Exception:
            self.failed = True
            raise


# With PROMETHEUS_PORT set, LiveKit serves its metrics and ours (memory/metrics.py) there.
server = _Server(setup_fnc=prewarm, prometheus_port=_prometheus_port())


@server.rtc_session()
async def entrypoint(ctx: JobContext) -> None:
    settings = ctx.proc.userdata["settings"]
    store = ctx.proc.userdata["store"]  # a MemoryStore, or UnavailableStore when it could not be opened
    ctx.log_context_fields = {"room": ctx.room.name}

    await ctx.connect()
    participant = await ctx.wait_for_participant()
    # The participant identity is the user id: stable per user, unlike the room name.
    user_id = participant.identity
    ctx.log_context_fields = {"room": ctx.room.name, "user_id": user_id}

    chat_model = _env("OPENAI_LLM_MODEL", "gpt-4.1-mini")
    gatekeeper = None
    if settings.mode is MemoryMode.GATED:
        gatekeeper = Gatekeeper(
            openai.LLM(model=_env("MEMORY_LLM_MODEL", chat_model), **_openai_kwargs())
        )
    service = MemoryService(store, settings, gatekeeper=gatekeeper, retriever=ctx.proc.userdata["retriever"])
    memory = MemorySession(service, user_id=user_id, session_id=ctx.job.id)

    session = AgentSession(
        vad=ctx.proc.userdata["vad"],
        stt=openai.STT(
            model=_env("OPENAI_STT_MODEL", "gpt-4o-mini-transcribe"),
            language=_env("OPENAI_STT_LANGUAGE", "en"),
            **_openai_kwargs(),
        ),
        llm=openai.LLM(model=chat_model, **_openai_kwargs()),
        tts=openai.TTS(
            model=_env("OPENAI_TTS_MODEL", "gpt-4o-mini-tts"),
            voice=_env("OPENAI_TTS_VOICE", "ash"),
            **_openai_kwargs(),
        ),
    )
    memory.attach(session)
    if settings.archive:  # both sides archived, long talks summarised (docs/archive.md)
        summarizer = openai.LLM(model=_env("MEMORY_LLM_MODEL", chat_model), **_openai_kwargs())
        ArchiveSession(memory, summarizer=summarizer).attach(session)
    ctx.add_shutdown_callback(memory.aclose)

    await session.start(
        agent=MemoryAgent(memory),
        room=ctx.room,
        room_options=room_io.RoomOptions(participant_identity=user_id),
    )
    # The first reply: it waits for the user's profile within the recall budget, so a
    # returning user is greeted as someone known (MemorySession.prepare_chat_ctx).
    session.generate_reply(instructions=load_prompt("greeting"))


# LiveKit's CLI takes these flags in place of the variables.
_CLI_FLAGS = {"--url": "LIVEKIT_URL", "--api-key": "LIVEKIT_API_KEY", "--api-secret": "LIVEKIT_API_SECRET"}


def _cli_env(argv: list[str]) -> dict[str, str]:
    """The environment as the command will see it: a flag counts as its variable."""
    env = dict(os.environ)
    for i, arg in enumerate(argv):
        flag, eq, value = arg.partition("=")
        if flag in _CLI_FLAGS and (eq or i + 1 < len(argv)):
            env[_CLI_FLAGS[flag]] = value if eq else argv[i + 1]
    return env


def _audio_problems() -> list[str]:
    """`console` talks through this machine's microphone and speaker, via PortAudio.
    Without it LiveKit stops with a long traceback from deep inside its console."""
    try:
        import sounddevice  # noqa: F401
    except OSError as exc:
        return [f"'console' needs PortAudio for the microphone ({exc}): apt install libportaudio2"]
    return []


# LiveKit's `start` serves its health check here (AgentServer's production default).
_START_HTTP_PORT = 8081


def _port_problems(command: str | None, env: Mapping[str, str]) -> list[str]:
    """The ports the worker will listen on must be free. LiveKit finds out only after
    start-up, logs a traceback and exits 0 (a second worker on the machine, a metrics
    port another service took); checked here, the message names the variable."""
    wanted: list[tuple[str, int]] = []
    raw = env.get("PROMETHEUS_PORT", "").strip()
    if raw and command in ("dev", "start", "connect"):
        wanted.append((f"PROMETHEUS_PORT={raw}", int(raw)))
    if command == "start":
        wanted.append((f"port {_START_HTTP_PORT} (LiveKit's health check in 'start')", _START_HTTP_PORT))
    problems = []
    if command == "start" and raw and int(raw) == _START_HTTP_PORT:
        problems.append(f"PROMETHEUS_PORT={raw} is LiveKit's health check port in 'start': choose another")
    for what, port in wanted:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as asyncio binds
            try:
                sock.bind(("", port))
            except OSError as exc:
                problems.append(f"{what} cannot be listened on ({exc.strerror or exc}): is another worker running?")
    return problems


def main() -> None:
    command = sys.argv[1] if len(sys.argv) > 1 else None
    if {"-h", "--help"} & set(sys.argv[1:]):  # help needs no configuration
        cli.run_app(server)
        return
    env = _cli_env(sys.argv[2:])
    problems = startup_problems(command, env)
    busy = [] if problems else _port_problems(command, env)  # once PROMETHEUS_PORT is a number
    if not problems and command == "console":
        problems = _audio_problems()
    settings = None
    if not problems and command in ("dev", "start", "connect", "console"):
        settings = load_settings(env, dotenv=False)
        problems = storage_problems(settings.data_dir, settings.database_url) or schema_problems(settings)
    problems += busy
    if problems:
        sys.exit("agent.py: cannot start:\n  " + "\n  ".join(problems))
    try:
        cli.run_app(server)
    finally:
        if settings is not None and not settings.database_url:
            # A job process LiveKit killed never left the embedded server's users.
            stop_if_unused(settings.pgdata)
        if server.failed:  # in place of the SystemExit(0) that LiveKit's CLI (click) ends with
            sys.exit("agent.py: the worker stopped on an error (logged above)")


if __name__ == "__main__":
    main()
