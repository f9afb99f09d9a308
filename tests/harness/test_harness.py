"""The harness must behave like the real LiveKit pipeline.

These tests pin the LiveKit 1.8.9 behaviour the memory work relies on (one LLM
request per turn with preemptive generation, where an ``llm_node`` edit lands, what
events fire when), so a LiveKit upgrade that changes it fails here first.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable

import pytest
from livekit.agents import Agent, FlushSentinel, ModelSettings, StopResponse, llm
from pydantic import BaseModel

from harness.scripted import LLMRequest, RecordingLLM, TurnResult, VoiceHarness
from harness.scripted.fake_stt import SpeechEventType

MEMORY = "MEMORY: test"


class MemoryAgent(Agent):
    """Injects a memory message just before the newest user message, per request only."""

    def __init__(self, *, delay: float = 0.0) -> None:
        super().__init__(instructions="You are a helpful voice assistant.")
        self.delay = delay

    async def llm_node(
        self,
        chat_ctx: llm.ChatContext,
        tools: list[llm.Tool],
        model_settings: ModelSettings,
    ) -> AsyncIterable[llm.ChatChunk | str | FlushSentinel]:
        if self.delay:
            await asyncio.sleep(self.delay)  # e.g. a memory search
        ctx = chat_ctx.copy()
        last_user = max(
            i for i, item in enumerate(ctx.items) if isinstance(item, llm.ChatMessage) and item.role == "user"
        )
        ctx.items.insert(last_user, llm.ChatMessage(role="system", content=[MEMORY]))
        async for chunk in Agent.default.llm_node(self, ctx, tools, model_settings):
            yield chunk


def _texts(ctx: llm.ChatContext) -> list[str]:
    return [m.text_content or "" for m in ctx.messages()]


def _end_of_speech_at(h: VoiceHarness) -> float:
    return [t for kind, t, _ in h.stt.emitted if kind == SpeechEventType.END_OF_SPEECH][-1]


def _assert_preemptive(h: VoiceHarness, turn: TurnResult, *, used: bool) -> None:
    """One speech per turn; preemptive iff it was created before the user stopped speaking."""
    created = [e for e in turn.events if e.name == "speech_created"]
    assert len(created) == 1, created
    assert (created[0].at < _end_of_speech_at(h)) is used


def _assert_memory_before_user(req: LLMRequest, user_text: str) -> None:
    assert req.messages[-1] == ("user", user_text)
    assert req.messages[-2] == ("system", MEMORY)
    assert [m for m in req.messages if m[1] == MEMORY] == [("system", MEMORY)]


# --------------------------------------------------------------------------- plain agent


@pytest.mark.parametrize("preflight", [False, True], ids=["final-only", "preflight"])
async def test_spoken_turn_makes_one_request(preflight: bool) -> None:
    async with VoiceHarness(Agent(instructions="Be brief.")) as h:
        turn = await h.user_says("what's the weather", ["what's", "what is"], preflight=preflight)

        assert h.llm.count == 1
        assert turn.requests == h.llm.requests
        assert turn.requests[0].messages == [
            ("system", "Be brief."),
            ("user", "what's the weather"),
        ]
        assert turn.reply == "ok"
        # in turn_detection="stt" mode only a PREFLIGHT transcript starts preemptive
        # generation; a FINAL that arrives before END_OF_SPEECH does not
        _assert_preemptive(h, turn, used=preflight)
        assert h.session.agent_state == "listening"


async def test_preemptive_generation_off_still_one_request() -> None:
    async with VoiceHarness(Agent(instructions="x"), preemptive_generation=False) as h:
        turn = await h.user_says("hello", preflight=True)
        assert h.llm.count == 1
        _assert_preemptive(h, turn, used=False)


async def test_transcripts_fire_before_the_llm_request() -> None:
    async with VoiceHarness(Agent(instructions="x")) as h:
        turn = await h.user_says("book a table", ["book", "book a"])
        req_at = turn.requests[0].arrived_at
        transcribed = [e for e in turn.events if e.name == "user_input_transcribed"]
        assert [(e.payload["transcript"], e.payload["is_final"]) for e in transcribed] == [
            ("book", False),
            ("book a", False),
            ("book a table", True),
        ]
        assert all(e.at < req_at for e in transcribed)


async def test_preflight_request_arrives_before_the_final_transcript() -> None:
    async with VoiceHarness(Agent(instructions="x")) as h:
        turn = await h.user_says("book a table", ["book"], preflight=True)
        req_at = turn.requests[0].arrived_at
        transcribed = [e for e in turn.events if e.name == "user_input_transcribed"]
        # the preflight is reported as a non-final transcript of the full text
        assert [(e.payload["transcript"], e.payload["is_final"]) for e in transcribed] == [
            ("book", False),
            ("book a table", False),
            ("book a table", True),
        ]
        assert transcribed[1].at <= req_at < transcribed[2].at


async def test_conversation_items_for_user_and_assistant() -> None:
    llm_ = RecordingLLM(lambda req: f"you said {req.messages[-1][1]}")
    async with VoiceHarness(Agent(instructions="x"), llm=llm_) as h:
        turn = await h.user_says("hi there")
        items = [(e.payload["role"], e.payload["text"]) for e in turn.events if e.name == "conversation_item_added"]
        assert items == [("user", "hi there"), ("assistant", "you said hi there")]
        assert _texts(h.session.history)[-2:] == ["hi there", "you said hi there"]
        assert h.text_output.segments[-1] == "you said hi there"
        assert h.tts.texts and h.audio_output.played[-1][1] is False


async def test_typed_input_reaches_llm() -> None:
    async with VoiceHarness(Agent(instructions="x")) as h:
        run = await h.user_types("typed hello")
        assert h.llm.count == 1
        assert h.llm.requests[0].messages[-1] == ("user", "typed hello")
        run.expect.next_event().is_message(role="assistant")
        assert _texts(h.session.history)[-2:] == ["typed hello", "ok"]


# --------------------------------------------------------------------------- llm_node memory


@pytest.mark.parametrize("delay", [0.0, 0.1], ids=["instant", "slow-100ms"])
@pytest.mark.parametrize("preflight", [False, True], ids=["final-only", "preflight"])
async def test_llm_node_injection_one_request_per_turn(preflight: bool, delay: float) -> None:
    agent = MemoryAgent(delay=delay)
    async with VoiceHarness(agent) as h:
        first = await h.user_says("my name is Ada", ["my name"], preflight=preflight)
        assert len(first.requests) == 1
        _assert_preemptive(h, first, used=preflight)
        _assert_memory_before_user(first.requests[0], "my name is Ada")

        second = await h.user_says("what is my name", preflight=preflight)
        assert len(second.requests) == 1
        _assert_preemptive(h, second, used=preflight)
        req = second.requests[0]
        _assert_memory_before_user(req, "what is my name")
        assert ("user", "my name is Ada") in req.messages  # history carried, memory not

        # the injected message lived only in the request
        assert MEMORY not in _texts(agent.chat_ctx)
        assert MEMORY not in _texts(h.session.history)
        assert _texts(h.session.history)[-4:] == ["my name is Ada", "ok", "what is my name", "ok"]
        assert h.llm.count == 2


async def test_slow_llm_node_preemptive_request_precedes_commit() -> None:
    # preflight at t, END_OF_SPEECH at t+0.03, commit at t+0.33, request at t+0.1
    async with VoiceHarness(MemoryAgent(delay=0.1), min_endpointing_delay=0.3) as h:
        turn = await h.user_says("hello", preflight=True)
        (req,) = turn.requests
        user_item = next(e for e in turn.events if e.name == "conversation_item_added" and e.payload["role"] == "user")
        preflight_at = [t for k, t, _ in h.stt.emitted if k == SpeechEventType.PREFLIGHT_TRANSCRIPT]
        assert req.arrived_at - preflight_at[-1] >= 0.1
        assert req.arrived_at < user_item.at  # generated before the turn was committed


async def test_harness_default_preflight_and_spoken_then_typed() -> None:
    agent = MemoryAgent()
    async with VoiceHarness(agent, preflight=True) as h:
        spoken = await h.user_says("remember I like tea")
        _assert_preemptive(h, spoken, used=True)
        await h.user_types("what do I like")
        assert h.llm.count == 2
        _assert_memory_before_user(h.llm.requests[1], "what do I like")
        assert MEMORY not in _texts(h.session.history)


async def test_llm_node_injection_typed_input() -> None:
    agent = MemoryAgent()
    async with VoiceHarness(agent) as h:
        await h.user_types("typed question")
        assert h.llm.count == 1
        _assert_memory_before_user(h.llm.requests[0], "typed question")
        assert MEMORY not in _texts(agent.chat_ctx)
        assert MEMORY not in _texts(h.session.history)


async def test_on_user_turn_completed_edit_discards_the_preemptive_request() -> None:
    """Why memory goes in llm_node: editing turn_ctx invalidates preemptive generation."""

    class HookAgent(Agent):
        async def on_user_turn_completed(self, turn_ctx: llm.ChatContext, new_message: llm.ChatMessage) -> None:
            turn_ctx.add_message(role="system", content=MEMORY)

    async with VoiceHarness(HookAgent(instructions="x"), preflight=True) as h:
        turn = await h.user_says("hello")
        # LiveKit logs "preemptive generation invalidated after `on_user_turn_completed`"
        assert [r.messages for r in turn.requests] == [
            [("system", "x"), ("user", "hello")],  # preemptive, thrown away
            [("system", "x"), ("user", "hello"), ("system", MEMORY)],  # lands after the user
        ]
        assert len(turn.speech_handles) == 2
        assert MEMORY not in _texts(h.session.history)


# --------------------------------------------------------------------------- fakes standalone


class Facts(BaseModel):
    facts: list[str]


async def test_recording_llm_standalone_collects_streamed_text() -> None:
    async def respond(req: LLMRequest) -> str:
        return '{"facts": ["likes tea", "lives in Oslo"]}'

    rec = RecordingLLM(respond, ttft=0.01)
    ctx = llm.ChatContext.empty()
    ctx.add_message(role="system", content="extract facts")
    ctx.add_message(role="user", content="I like tea and live in Oslo")

    parts: list[str] = []
    async with rec.chat(chat_ctx=ctx, response_format=Facts) as stream:
        async for chunk in stream:
            if chunk.delta and chunk.delta.content:
                parts.append(chunk.delta.content)
    assert len(parts) > 1  # actually streamed
    assert Facts.model_validate_json("".join(parts)).facts == ["likes tea", "lives in Oslo"]

    collected = await rec.chat(chat_ctx=ctx).collect()
    assert collected.text == "".join(parts)

    assert rec.count == 2
    assert rec.requests[0].kwargs == {"response_format": Facts}
    assert rec.requests[0].messages == [
        ("system", "extract facts"),
        ("user", "I like tea and live in Oslo"),
    ]


async def test_harness_times_out_with_a_clear_error() -> None:
    class Silent(Agent):
        async def on_user_turn_completed(self, turn_ctx: llm.ChatContext, new_message: llm.ChatMessage) -> None:
            raise StopResponse()

    async with VoiceHarness(Silent(instructions="x"), timeout=0.5) as h:
        with pytest.raises(AssertionError, match="timed out .* user message 'hello'"):
            await h.user_says("hello")
        assert h.llm.count == 0


async def test_exit_leaves_no_running_tasks() -> None:
    before = asyncio.all_tasks()
    async with VoiceHarness(Agent(instructions="x")) as h:
        await h.user_says("hello", preflight=True)
        await h.user_types("typed")
    await asyncio.sleep(0)
    leaked = asyncio.all_tasks() - before
    assert not [t for t in leaked if not t.done()], leaked
