"""An existing LiveKit voice agent, with long-term memory added (docs/integrate.md).

Everything here is the plain LiveKit agent from LiveKit's quick start; the three lines marked
`# memory` are all that memory adds. Run it as any LiveKit worker:

    pip install livekit-agent-memory
    python my_agent.py dev        # LIVEKIT_URL, LIVEKIT_API_KEY, LIVEKIT_API_SECRET, OPENAI_API_KEY set

Or typed, without LiveKit, with memory attached as in a call (OPENAI_API_KEY, or a local
OPENAI_BASE_URL):

    memory-chat alice --agent my_agent.py

A local model server (OPENAI_BASE_URL) still needs some OPENAI_API_KEY for the plugins below
(`OPENAI_API_KEY=local`): LiveKit's OpenAI plugin refuses to start without one.

Each participant identity gets its own memory: what a caller said in one call, the agent
knows in the next.
"""

from livekit.agents import Agent, AgentServer, AgentSession, JobContext, JobProcess, cli
from livekit.plugins import openai, silero

import memory  # memory


class Assistant(Agent):
    def __init__(self) -> None:
        super().__init__(instructions="You are a friendly voice assistant. Keep your answers short.")


def prewarm(proc: JobProcess) -> None:
    proc.userdata["vad"] = silero.VAD.load()
    memory.warm_up()  # memory: the store, the embedder and a first look-up, once per process


# memory (optional): a prewarm time-out that suits memory, its libraries preloaded once.
server = AgentServer(setup_fnc=prewarm, **memory.server_options())


@server.rtc_session()
async def entrypoint(ctx: JobContext) -> None:
    await ctx.connect()
    participant = await ctx.wait_for_participant()
    session = AgentSession(
        vad=ctx.proc.userdata["vad"],
        stt=openai.STT(model="gpt-4o-mini-transcribe"),
        llm=openai.LLM(model="gpt-4.1-mini"),
        tts=openai.TTS(model="gpt-4o-mini-tts", voice="ash"),
    )
    memory.attach(session, user_id=participant.identity)  # memory: this caller's memory, before start
    await session.start(agent=Assistant(), room=ctx.room)
    await session.generate_reply(instructions="Greet the user.")


if __name__ == "__main__":
    cli.run_app(server)
