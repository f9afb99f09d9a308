"""A LiveKit voice agent that remembers its users.

VAD -> STT -> LLM -> TTS in a LiveKit room, with long-term memory on Mem0
(`memory/`). Run `python agent.py dev` against LiveKit, `console` to try it in
a terminal, `start` in production, `download-files` at image build time.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from typing import Any

from memory.livekit import startup
from memory.settings import load_env_file, log_transcripts_mode, share_metrics_across_processes

load_env_file()  # the .env of the directory the worker starts in; empty variables unset
# Run as a command: the configuration, the store, the embedder and the LiveKit project are
# checked before LiveKit and the models are loaded (a mistake is named in a second), with a
# line for each as it is ready (memory/livekit/startup.py).
CHECKED = startup.check(sys.argv) if __name__ == "__main__" else startup.check_under_livekit_main()

from memory.livekit import transcript_log  # noqa: E402 - after the check: it loads the redaction rules

# Before LiveKit logs anything, in this process and (on import) in every job process:
# raw user transcripts never reach a log line (docs/hostile-input.md).
transcript_log.install(log_transcripts_mode())
# Before prometheus_client makes any metric (LiveKit's, at import): one directory for
# the metrics of every process (memory's are counted in the job processes).
share_metrics_across_processes()


from dataclasses import dataclass

from livekit.agents import AgentServer, AgentSession, JobContext, JobProcess, TurnHandlingOptions, cli, room_io
from livekit.agents import llm as lk_llm
from livekit.agents import stt as lk_stt
from livekit.agents import tts as lk_tts
from livekit.agents import vad as lk_vad
from livekit.plugins import openai, silero
from livekit.plugins.openai import stt as openai_stt

from memory import MemoryStore, Retriever, UnavailableStore, first_agent, start_retention
from memory.language import lexical
from memory.livekit.compose import attach_memory
from memory.ops import heap, metrics
from memory.prompts import load_prompt
from memory.settings import (
    ConfigError,
    EmbedderKind,
    MemorySettings,
    SttMode,
    cloud_models,
    idle_processes,
    load_settings,
    prometheus_multiproc_dir,
    prometheus_port,
)
from memory.storage.embedder import local_model, write_model
from memory.types import describe_error

logger = logging.getLogger("agent")  # by name: run as a script, __name__ is "__main__"


# Interim transcripts of OpenAI's realtime STT: the plugin sends at most one every 0.5 s
# and drops the deltas in between, so the words the user ended on were often known only
# from the final transcript, and memory's look-up for them started there, on the
# reply's path. Every delta as an interim lets the look-up for the whole utterance run
# before the turn ends (tests/agent/test_pipeline.py checks the plugin still has this knob).
INTERIM_INTERVAL_S = 0.0

# LiveKit kills a job process whose prewarm takes longer than this. Measured with
# `python -m bench.prewarm` (docs/latency.md): 4.9-8.3 s (p50 7.9 s) for two processes
# prewarming at once beside a busy process and the test suite on 2 cores, after 12 s of
# importing, and up to 10 s on a busier machine, where LiveKit's default of 10 s kills and
# respawns processes in a loop. 60 s is a wide margin over the worst measured: a slow process is
# still better than none, and a hung one still ends.
PREWARM_TIMEOUT_S = 60.0


@dataclass
class Plugins:
    """The cloud models of a session, made once per job process in prewarm: their
    constructors are slow (openai.TTS builds an SSL context, ~0.2 s) and would otherwise
    stall the event loop as the session starts. Tests and benchmarks put fakes here."""

    stt: lk_stt.STT
    llm: lk_llm.LLM
    tts: lk_tts.TTS
    memory_llm: lk_llm.LLM | None = None
    """GATED's fact extraction and the archive's summaries (`MEMORY_LLM_MODEL`)."""


def make_plugins(settings: MemorySettings, vad: lk_vad.VAD, env: Mapping[str, str] | None = None) -> Plugins:
    """OpenAI's STT, LLM and TTS as configured, sharing one HTTP client (one SSL context)."""
    models = cloud_models(env)
    client = openai_client(models.base_url, models.api_key)
    if models.stt_mode is SttMode.REALTIME:
        openai_stt._delta_transcript_interval = INTERIM_INTERVAL_S
    return Plugins(
        stt=openai.STT(
            model=models.stt_model,
            language=models.stt_language,
            use_realtime=models.stt_mode is SttMode.REALTIME,
            # Realtime: the same Silero VAD as the session commits each utterance (the
            # plugin would otherwise build LiveKit's cloud VAD, which needs credentials).
            vad=vad,
            client=client,
        ),
        llm=openai.LLM(model=models.llm_model, client=client),
        tts=openai.TTS(model=models.tts_model, voice=models.tts_voice, client=client),
        memory_llm=openai.LLM(model=models.memory_llm_model, client=client),
    )


def openai_client(base_url: str = "", api_key: str = "") -> Any:
    """One OpenAI client for the process's STT, LLM and TTS, as the plugins configure
    their own (no SDK retries: LiveKit retries; LiveKit's timeouts)."""
    import httpx
    import openai as openai_sdk

    return openai_sdk.AsyncClient(
        max_retries=0,
        api_key=api_key or None,
        base_url=base_url or None,
        http_client=httpx.AsyncClient(
            timeout=httpx.Timeout(connect=15.0, read=5.0, write=5.0, pool=5.0),
            follow_redirects=True,
            limits=httpx.Limits(max_connections=50, max_keepalive_connections=50, keepalive_expiry=120),
        ),
    )


def turn_handling() -> TurnHandlingOptions:
    """Turn handling, explicit. Left to LiveKit, it picks its cloud turn detector and
    "adaptive" interruptions, which need LiveKit credentials (`console` with only an
    OpenAI key would crash) and ask the network every turn. The Silero VAD ends the turn
    after `min_delay` of silence; the reply is prepared from the final transcript on
    (preemptive generation), and memory's injection in `llm_node` keeps that to one
    LLM request per turn."""
    return TurnHandlingOptions(
        turn_detection="vad",
        endpointing={"min_delay": 0.5, "max_delay": 3.0},
        interruption={"mode": "vad"},
        preemptive_generation={"enabled": True},
    )


def build_session(vad: lk_vad.VAD, plugins: Plugins) -> AgentSession:
    """The voice pipeline every session runs (tests and bench.latency run this one too)."""
    return AgentSession(vad=vad, stt=plugins.stt, llm=plugins.llm, tts=plugins.tts, turn_handling=turn_handling())


def _warm_first_use_imports() -> None:
    """Modules the first turn would import on the event loop (0.12-0.16 s measured):
    anyio (httpx's first request), jiter (the OpenAI SDK's streaming parser)."""
    import anyio  # noqa: F401 - loaded in prewarm, not on the event loop
    import anyio._backends._asyncio  # noqa: F401 - loaded in prewarm, not on the event loop
    import jiter  # noqa: F401 - loaded in prewarm, not on the event loop
    import openai.lib.streaming.chat  # noqa: F401 - loaded in prewarm, not on the event loop


def prewarm(proc: JobProcess) -> None:
    """Once per worker process: the VAD, the local embedder, the Chinese segmenter, the
    memory store and the cloud plugins; then everything they made is frozen out of the
    garbage collector's full passes (memory/ops/heap.py), which would otherwise stall replies."""
    settings = load_settings()
    metrics.forget_dead_processes(prometheus_multiproc_dir())
    proc.userdata["vad"] = vad = silero.VAD.load()
    if settings.embedder is EmbedderKind.LOCAL:
        local_model()
        write_model()
    lexical.warm_up()
    proc.userdata["settings"] = settings
    proc.userdata["store"] = store = _open_store(settings)
    # One per process, shared by its sessions: its per-user densities are then
    # computed once per process and user (as the README says), not once per session.
    proc.userdata["retriever"] = Retriever(store, settings)
    if cloud_models().api_key:  # `download-files` and tests run without one
        proc.userdata["plugins"] = make_plugins(settings, vad)
    _warm_first_use_imports()
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


class _Server(AgentServer):
    """LiveKit's CLI logs "worker failed" and returns normally when the worker stops on an
    error (a port in use, LiveKit unreachable after its retries), so the process would exit
    0 and a supervisor restarting on failure (Docker, systemd, Kubernetes) would take it
    for a clean stop. This remembers the failure so that `main` can exit non-zero."""

    failed: bool = False

    async def run(self, *args: Any, **kwargs: Any) -> None:
        try:
            await super().run(*args, **kwargs)
        except Exception:
            self.failed = True
            raise


# Fleet sizing (docs/scaling.md). Memory's modules and data (Mem0, jieba's dictionary, the
# embedder's weights) are imported once in LiveKit's forkserver and shared copy-on-write by
# every job process (memory/preload.py); AGENT_IDLE_PROCESSES prewarmed job processes wait
# for calls, each with at most MEMORY_DB_MAX_CONNECTIONS database connections.
_FLEET: dict[str, Any] = {"preload_modules": ["memory.preload"]}
if (_idle := idle_processes()) is not None:
    _FLEET["num_idle_processes"] = _idle

# With PROMETHEUS_PORT set, LiveKit serves its metrics and ours (memory/ops/metrics.py) there.
server = _Server(
    setup_fnc=prewarm, prometheus_port=prometheus_port(), initialize_process_timeout=PREWARM_TIMEOUT_S, **_FLEET
)


@server.rtc_session()
async def entrypoint(ctx: JobContext) -> None:
    settings = ctx.proc.userdata["settings"]
    store = ctx.proc.userdata["store"]  # a MemoryStore, or UnavailableStore when it could not be opened
    plugins: Plugins = ctx.proc.userdata.get("plugins") or make_plugins(settings, ctx.proc.userdata["vad"])
    ctx.log_context_fields = {"room": ctx.room.name}

    await ctx.connect()
    participant = await ctx.wait_for_participant()
    # The participant identity is the user id: stable per user, unlike the room name.
    user_id = participant.identity
    ctx.log_context_fields = {"room": ctx.room.name, "user_id": user_id}

    session = build_session(ctx.proc.userdata["vad"], plugins)
    memory = attach_memory(session, store=store, settings=settings, retriever=ctx.proc.userdata["retriever"],
                           user_id=user_id, session_id=ctx.job.id, memory_llm=plugins.memory_llm,
                           summarizer=plugins.memory_llm or plugins.llm)  # fmt: skip
    ctx.add_shutdown_callback(memory.aclose)

    await session.start(
        agent=first_agent(ctx.room, memory, store, user_id),  # forms RPC, shared contexts, hand-off
        room=ctx.room,
        room_options=room_io.RoomOptions(participant_identity=user_id),
    )
    # The first reply: it waits for the user's profile within the recall budget, so a
    # returning user is greeted as someone known (MemorySession.prepare_chat_ctx).
    session.generate_reply(instructions=load_prompt("greeting"))


def main() -> None:
    startup.run(cli.run_app, server, CHECKED or startup.check(sys.argv))


if __name__ == "__main__":
    main()
