"""A LiveKit voice agent that remembers its users.

VAD -> STT -> LLM -> TTS in a LiveKit room, with long-term memory on Mem0
(`memory/`). Run `python agent.py dev` against LiveKit, `console` to try it in
a terminal, `start` in production, `download-files` at image build time.
"""

from __future__ import annotations

import sys

import memory

# Before LiveKit is imported: the .env read, the configuration, the store, the embedder, the
# LLM server and the LiveKit project checked (a mistake is named in one line), raw user
# transcripts kept out of the logs, one metrics directory for every process.
CHECKED = memory.prepare_worker(sys.argv if __name__ == "__main__" else None)

import logging  # noqa: E402
from collections.abc import Mapping  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from typing import Any  # noqa: E402

from livekit.agents import AgentServer, AgentSession, JobContext, JobProcess, TurnHandlingOptions, cli, room_io
from livekit.agents import llm as lk_llm
from livekit.agents import stt as lk_stt
from livekit.agents import tts as lk_tts
from livekit.agents import vad as lk_vad
from livekit.plugins import openai, silero
from livekit.plugins.openai import stt as openai_stt

logger = logging.getLogger("agent")  # by name: run as a script, __name__ is "__main__"


# Interim transcripts of OpenAI's realtime STT: the plugin sends at most one every 0.5 s
# and drops the deltas in between, so the words the user ended on were often known only
# from the final transcript, and memory's look-up for them started there, on the
# reply's path. Every delta as an interim lets the look-up for the whole utterance run
# before the turn ends (tests/agent/test_pipeline.py checks the plugin still has this knob).
INTERIM_INTERVAL_S = 0.0

# LiveKit kills a job process whose prewarm takes longer than this (memory.server_options
# says why 60 s).
PREWARM_TIMEOUT_S: float = memory.server_options()["initialize_process_timeout"]


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


def make_plugins(settings: Any, vad: lk_vad.VAD, env: Mapping[str, str] | None = None) -> Plugins:
    """OpenAI's STT, LLM and TTS as configured (OPENAI_*), sharing one HTTP client (one SSL
    context). A local OpenAI-compatible server needs no key (OPENAI_BASE_URL)."""
    models = memory.cloud_models(env)
    client = openai_client(models.base_url, models.api_key or ("unused" if models.base_url else ""))
    if models.realtime_stt:
        openai_stt._delta_transcript_interval = INTERIM_INTERVAL_S
    return Plugins(
        stt=openai.STT(
            model=models.stt_model,
            language=models.stt_language,
            use_realtime=models.realtime_stt,
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
    """The voice pipeline every session runs (tests and bench.latency.run run this one too)."""
    return AgentSession(vad=vad, stt=plugins.stt, llm=plugins.llm, tts=plugins.tts, turn_handling=turn_handling())


def _warm_first_use_imports() -> None:
    """Modules the first turn would import on the event loop (0.12-0.16 s measured):
    anyio (httpx's first request), jiter (the OpenAI SDK's streaming parser)."""
    import anyio  # noqa: F401 - loaded in prewarm, not on the event loop
    import anyio._backends._asyncio  # noqa: F401 - loaded in prewarm, not on the event loop
    import jiter  # noqa: F401 - loaded in prewarm, not on the event loop
    import openai.lib.streaming.chat  # noqa: F401 - loaded in prewarm, not on the event loop


def prewarm(proc: JobProcess) -> None:
    """Once per job process: the VAD and the cloud plugins, then memory (its embedder, store
    and a first look-up, and the heap frozen out of the collector's full passes)."""
    proc.userdata["vad"] = vad = silero.VAD.load()
    models = memory.cloud_models()
    if models.api_key or models.base_url:  # `download-files` and tests run without either
        proc.userdata["plugins"] = make_plugins(None, vad)
    _warm_first_use_imports()
    memory.warm_up()


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


# Fleet sizing (docs/scaling.md): memory's modules and data loaded once in LiveKit's
# forkserver (preload_modules), AGENT_IDLE_PROCESSES prewarmed job processes, the prewarm's
# time-out, PROMETHEUS_PORT (memory's metrics beside LiveKit's).
server = _Server(setup_fnc=prewarm, **memory.server_options())


@server.rtc_session()
async def entrypoint(ctx: JobContext) -> None:
    plugins: Plugins = ctx.proc.userdata.get("plugins") or make_plugins(None, ctx.proc.userdata["vad"])
    ctx.log_context_fields = {"room": ctx.room.name}

    await ctx.connect()
    participant = await ctx.wait_for_participant()
    # The participant identity is the user id: stable per user, unlike the room name.
    user_id = participant.identity
    ctx.log_context_fields = {"room": ctx.room.name, "user_id": user_id}

    session = build_session(ctx.proc.userdata["vad"], plugins)
    mem = memory.attach(session, user_id=user_id, session_id=ctx.job.id, llm=plugins.memory_llm or plugins.llm)
    await session.start(
        agent=memory.first_agent(ctx.room, mem, identity=user_id),  # forms RPC, shared contexts, hand-off
        room=ctx.room,
        room_options=room_io.RoomOptions(participant_identity=user_id),
    )
    # The first reply: it waits for the user's profile within the recall budget, so a
    # returning user is greeted as someone known (MemorySession.prepare_chat_ctx).
    session.generate_reply(instructions=memory.load_prompt("greeting"))


def main() -> None:
    memory.run_worker(cli.run_app, server, CHECKED)


if __name__ == "__main__":
    main()
