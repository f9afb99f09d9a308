"""Memory off, as a worker runs it: `agent.py` without memory, for `bench.fleet.job_memory`.

The same LiveKit server options, plugins (OpenAI's STT, LLM and TTS on one client, the
Silero VAD, made in prewarm), turn handling and prewarm time-out as `agent.py`, and no
memory module: nothing of `memory/` beyond its settings reader is imported. What a job
process of it holds is what LiveKit and the voice pipeline cost; `agent.py`'s job process
minus this one is what memory costs a call.

`python bench/common/plain_agent.py start` (with LIVEKIT_URL and the keys set), never deployed.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # run as a script, as agent.py is

from livekit.agents import Agent, AgentServer, AgentSession, JobContext, JobProcess, TurnHandlingOptions, cli
from livekit.plugins import openai, silero

from memory.settings import idle_processes

PREWARM_TIMEOUT_S = 60.0  # as agent.py


def _client() -> Any:
    import httpx
    import openai as openai_sdk

    return openai_sdk.AsyncClient(
        max_retries=0,
        http_client=httpx.AsyncClient(
            timeout=httpx.Timeout(connect=15.0, read=5.0, write=5.0, pool=5.0),
            follow_redirects=True,
            limits=httpx.Limits(max_connections=50, max_keepalive_connections=50, keepalive_expiry=120),
        ),
    )


def prewarm(proc: JobProcess) -> None:
    proc.userdata["vad"] = vad = silero.VAD.load()
    client = _client()
    proc.userdata["plugins"] = (
        openai.STT(model="gpt-4o-mini-transcribe", use_realtime=True, vad=vad, client=client),
        openai.LLM(model="gpt-4o-mini", client=client),
        openai.TTS(model="gpt-4o-mini-tts", voice="alloy", client=client),
    )
    import anyio._backends._asyncio  # noqa: F401 - as agent.py warms its first-use imports
    import jiter  # noqa: F401
    import openai.lib.streaming.chat as _streaming  # noqa: F401


_extra: dict[str, Any] = {}
if (_idle := idle_processes()) is not None:
    _extra["num_idle_processes"] = _idle
server = AgentServer(setup_fnc=prewarm, initialize_process_timeout=PREWARM_TIMEOUT_S, **_extra)


@server.rtc_session()
async def entrypoint(ctx: JobContext) -> None:
    stt, llm, tts = ctx.proc.userdata["plugins"]
    await ctx.connect()
    session = AgentSession(
        vad=ctx.proc.userdata["vad"],
        stt=stt,
        llm=llm,
        tts=tts,
        turn_handling=TurnHandlingOptions(turn_detection="vad", preemptive_generation={"enabled": True}),
    )
    await session.start(agent=Agent(instructions="You are a helpful voice assistant."), room=ctx.room)


if __name__ == "__main__":
    cli.run_app(server)
