"""What each LLM request carries and how turns are logged: tool calls, a reply's own
instructions, preemptive replies LiveKit throws away, hand-offs, metrics."""

from __future__ import annotations

import asyncio
import json
import logging

from livekit.agents import function_tool

from harness.scripted import LLMRequest, RecordingLLM, ToolCall, VoiceHarness
from harness.scripted.fake_stt import SpeechEventType
from memory.livekit.agent import MemoryAgent
from memory.livekit.session import MemorySession
from memory.settings import MemoryMode
from memory.storage.store import MemoryStore
from tests.conftest import make_service, wait_until
from tests.livekit.sessions import BUDGET_S, CountingService, recalled_text, turn_logs, voice_session


class ToolMemoryAgent(MemoryAgent):
    """A product agent with a tool, as users build on MemoryAgent."""

    @function_tool
    async def get_time(self) -> str:
        """The current time."""
        return "It is 10:00"


async def test_the_reply_after_a_tool_call_still_has_this_turns_memories(store: MemoryStore, user_id: str) -> None:
    # LiveKit asks the LLM again once the tool has answered; that second request is the
    # reply the user hears, and it went out without the memories recalled for the turn.
    store.add_raw(user_id, "My dog is called Rex")
    service = CountingService(store, make_service(store, MemoryMode.NORMAL).settings)
    memory = MemorySession(service, user_id=user_id, budget_s=BUDGET_S)

    def respond(request: LLMRequest) -> str | ToolCall:
        fresh_turn = request.chat_ctx.items[-1].type == "message"
        return ToolCall("get_time") if fresh_turn else "It is ten, and your dog is Rex."

    harness = VoiceHarness(ToolMemoryAgent(memory), llm=RecordingLLM(respond))
    memory.attach(harness.session)
    await memory.wait_profile()
    async with harness:
        await harness.user_types("What time is it, and what is my dog called?")
        assert await memory.drain(10.0)
    await memory.aclose()
    first, after_tool = harness.llm.requests
    assert "It is 10:00" in json.dumps([i.model_dump(mode="json") for i in after_tool.chat_ctx.items])
    for request in (first, after_tool):
        assert "My dog is called Rex" in "".join(t for _, t in request.messages if t.startswith("<recalled_memories>"))
    assert service.recalls == 1  # the second request found the first one's look-up
    assert len(memory.turns) == 1


async def test_a_reply_with_its_own_instructions_still_gets_memory(store: MemoryStore, user_id: str) -> None:
    # generate_reply(user_input=..., instructions=...) puts the instructions after the
    # user's message, as a system message: the request used to go without memory.
    store.add_raw(user_id, "My dog is called Rex")
    async with voice_session(store, MemoryMode.NORMAL, user_id) as run:
        handle = run.harness.session.generate_reply(
            user_input="What is my dog called?", instructions="Answer in one short sentence."
        )
        await asyncio.wait_for(handle.wait_for_playout(), run.harness.timeout)
        (request,) = run.requests
        assert request.messages[-1] == ("system", "Answer in one short sentence.")
        assert "My dog is called Rex" in request.messages[-3][1]  # right before the user's message


async def test_a_preemptive_reply_thrown_away_is_not_a_turn_of_its_own(store: MemoryStore, user_id: str) -> None:
    # The preemptive reply for "Book a table" is discarded when the user goes on; it was
    # logged and counted as a turn of its own beside the real one.
    async with voice_session(store, MemoryMode.NORMAL, user_id) as run:
        await run.harness.user_says_after_preflight("Book a table", "Book a table for my sister and me")
        assert [r.messages[-1][1] for r in run.requests] == ["Book a table", "Book a table for my sister and me"]
    assert [t.text for t in run.memory.turns] == ["Book a table for my sister and me"]


async def test_words_of_a_turn_livekit_threw_away_do_not_spoil_the_next_prefetch(
    store: MemoryStore, user_id: str
) -> None:
    # Push-to-talk "cancel" (clear_user_turn) drops the words said so far; they stayed
    # in front of the next turn's look-up, which then never matched what was committed,
    # and the reply waited out its budget for a fresh one.
    store.add_raw(user_id, "My dog is called Rex")
    memory = MemorySession(make_service(store, MemoryMode.NORMAL), user_id=user_id, budget_s=BUDGET_S)
    harness = VoiceHarness(MemoryAgent(memory), preflight=False)  # the look-up starts from the final
    memory.attach(harness.session)
    await memory.wait_profile()
    async with harness:
        stream = await harness.stt.wait_for_stream()
        harness.stt._emit(stream, SpeechEventType.START_OF_SPEECH)
        harness.stt._emit(stream, SpeechEventType.FINAL_TRANSCRIPT, "never mind")
        await wait_until(lambda: memory.reader._turn_finals == ["never mind"], what="the final transcript")
        harness.session.clear_user_turn()
        await harness.user_says("Remind me, what is my dog called?")
        log = memory.turns[-1]
        assert log.text == "Remind me, what is my dog called?"
        assert log.recall is not None and log.recall.prefetched  # found ready, not fetched at reply time
        assert "My dog is called Rex" in recalled_text(harness.llm.requests[-1])
    await memory.aclose()


async def test_a_preemptive_reply_used_for_words_that_differ_in_case_is_logged_once(
    store: MemoryStore, user_id: str, caplog
) -> None:
    # LiveKit uses a preemptive reply when the final words differ only in case or
    # punctuation; the turn was then never logged nor counted.
    caplog.set_level(logging.INFO, logger="memory")
    store.add_raw(user_id, "My cat is called Miso")
    async with voice_session(store, MemoryMode.NORMAL, user_id) as run:
        await run.harness.user_says_after_preflight("what is my cat called", "What is my cat called?")
        assert run.harness.llm.count == 1  # the preemptive reply was the one used
    assert [(t.text, t.provisional, t.injected) for t in run.memory.turns] == [("What is my cat called?", False, 1)]
    assert len(turn_logs(caplog)) == 1


class GatedRecall(CountingService):
    """Look-ups that finish only when the test says so."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.release = asyncio.Event()
        self.asked = 0

    async def recall(self, *args, **kwargs):
        self.asked += 1
        await self.release.wait()
        return await super().recall(*args, **kwargs)


async def test_a_turn_stays_logged_when_the_user_speaks_again_during_its_look_up(
    store: MemoryStore, user_id: str, caplog
) -> None:
    # Any transcript of the next utterance made the turn being answered look
    # uncommitted; the next turn's commit then threw its log away.
    caplog.set_level(logging.INFO, logger="memory")
    store.add_raw(user_id, "My cat is called Miso")
    service = GatedRecall(store, make_service(store, MemoryMode.NORMAL).settings)
    memory = MemorySession(service, user_id=user_id, budget_s=BUDGET_S)
    harness = VoiceHarness(MemoryAgent(memory), preflight=False)
    memory.attach(harness.session)
    await memory.wait_profile()
    async with harness:
        stream = await harness.stt.wait_for_stream()
        committed = harness._future(lambda e: e.name == "conversation_item_added" and e.payload["role"] == "user")
        harness.stt._emit(stream, SpeechEventType.START_OF_SPEECH)
        harness.stt._emit(stream, SpeechEventType.FINAL_TRANSCRIPT, "What is my cat called?")
        harness.stt._emit(stream, SpeechEventType.END_OF_SPEECH)
        await harness._await(committed, "the user's words to be committed")
        assert service.asked >= 1 and harness.llm.count == 0  # the reply waits on its look-up
        harness.stt._emit(stream, SpeechEventType.START_OF_SPEECH)  # the user goes on meanwhile
        harness.stt._emit(stream, SpeechEventType.INTERIM_TRANSCRIPT, "and")
        await wait_until(
            lambda: any(
                e.name == "user_input_transcribed" and e.payload["transcript"] == "and" for e in harness.events
            ),
            what="the interim",
        )
        service.release.set()
        await wait_until(lambda: harness.llm.count >= 1, what="the reply's request")
        await harness.user_says("And what about my dog?")
        assert await memory.drain(10.0)
    await memory.aclose()
    assert [t.text for t in memory.turns] == ["What is my cat called?", "And what about my dog?"]
    assert not any(t.provisional for t in memory.turns) and len(turn_logs(caplog)) == 2


class Billing(MemoryAgent):
    async def on_enter(self) -> None:
        self.session.generate_reply()


class FrontDesk(MemoryAgent):
    @function_tool
    async def transfer_to_billing(self) -> Billing:
        """Transfer the user to billing."""
        return Billing(self.memory, instructions="You are billing.", chat_ctx=self.chat_ctx)


async def test_a_hand_off_keeps_memory_and_its_first_reply_is_no_second_turn(
    store: MemoryStore, user_id: str, caplog
) -> None:
    caplog.set_level(logging.INFO, logger="memory")
    store.add_raw(user_id, "My dog is called Rex")
    memory = MemorySession(make_service(store, MemoryMode.NORMAL), user_id=user_id, budget_s=BUDGET_S)

    def respond(request: LLMRequest) -> str | ToolCall:
        return "Billing here." if request.messages[0][1] == "You are billing." else ToolCall("transfer_to_billing")

    harness = VoiceHarness(FrontDesk(memory), llm=RecordingLLM(respond))
    memory.attach(harness.session)
    await memory.wait_profile()
    async with harness:
        await harness.user_types("Put me through to billing about insurance for my dog Rex")
        await wait_until(
            lambda: any(m.role == "assistant" and m.text_content == "Billing here."
                        for m in harness.session.history.messages()),
            what="billing's first reply",
        )  # fmt: skip
        assert await memory.drain(10.0)
    await memory.aclose()
    billing = harness.llm.requests[-1]
    assert billing.messages[0][1] == "You are billing."
    assert "My dog is called Rex" in "".join(t for _, t in billing.messages if t.startswith("<recalled_memories>"))
    assert [t.text for t in memory.turns] == ["Put me through to billing about insurance for my dog Rex"]
    assert len(turn_logs(caplog)) == 1


def _total(name: str) -> float:
    from prometheus_client import REGISTRY

    return sum(s.value for m in REGISTRY.collect() for s in m.samples if s.name == name)


async def test_each_turn_is_logged_and_counted(store: MemoryStore, user_id: str, caplog) -> None:
    import logging

    store.add_raw(user_id, "My cat is called Miso")
    recalls, injected = _total("memory_recalls_total"), _total("memory_injected_total")
    caplog.set_level(logging.INFO, logger="memory")
    async with voice_session(store, MemoryMode.NORMAL, user_id) as run:
        await run.harness.user_says("What is my cat called?")
    turn_logs = [r for r in caplog.records if r.getMessage() == "memory turn"]
    assert len(turn_logs) == 1
    rec = turn_logs[0]
    assert rec.recall_ran is True and rec.budget_missed is False and rec.injected >= 1
    assert rec.waited_ms is not None and rec.recall_ms is not None
    summary = [r for r in caplog.records if r.getMessage() == "memory session summary"]
    assert len(summary) == 1 and summary[0].user_turns == 1 and summary[0].writes == 1
    assert _total("memory_recalls_total") == recalls + 1
    assert _total("memory_injected_total") >= injected + 1
