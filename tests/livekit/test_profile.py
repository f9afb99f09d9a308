"""GATED's session-start profile: fetched once, bounded, refreshed after a write or a
forget, and the greeting that waits for it within the budget."""

from __future__ import annotations

import asyncio
import json

import pytest
from livekit.agents import llm

from harness.scripted import LLMRequest, VoiceHarness
from memory.gatekeeper.gatekeeper import Gatekeeper
from memory.livekit.agent import MemoryAgent
from memory.livekit.blocks import PROFILE_ID
from memory.livekit.session import MemorySession
from memory.prompts import load_prompt
from memory.service import MemoryService
from memory.settings import MemoryMode
from memory.storage.store import MemoryStore
from tests.conftest import make_service, scripted_extraction, wait_until
from tests.livekit.sessions import BUDGET_S, memory_blocks, one_request_per_turn, recalled_text, voice_session


async def test_gated_profile_is_fetched_once_and_injected_once_per_request(store: MemoryStore, user_id: str) -> None:
    store.upsert_fact(user_id, "User's sister is Anna", category="relationships", slot="sister_name")
    store.upsert_fact(user_id, "User likes blue", category="preferences", slot="favorite_color")
    async with voice_session(store, MemoryMode.GATED, user_id) as run:
        await run.harness.user_says("Hello there")
        await run.harness.user_says("Any ideas for the weekend?")
        await run.harness.user_types("Tell me something nice")
        one_request_per_turn(run, 3)
        assert run.service.profiles == 1
        for request in run.requests:
            profile = memory_blocks(request, "user_profile")
            assert len(profile) == 1
            assert request.messages[profile[0] - 1][0] == "system"  # right after the instructions
            text = request.messages[profile[0]][1]
            assert "User's sister is Anna" in text and "User likes blue" in text
        assert PROFILE_ID not in {m.id for m in run.harness.session.history.messages()}


async def test_gated_profile_says_the_new_value_once_a_fact_is_superseded(store: MemoryStore, user_id: str) -> None:
    store.upsert_fact(user_id, "User lives in Paris", category="personal_facts", slot="home_city")
    extraction = scripted_extraction(
        {
            "I moved to Berlin last week": [
                {"text": "User lives in Berlin", "category": "personal_facts", "slot": "home_city"}
            ]
        }
    )
    async with voice_session(store, MemoryMode.GATED, user_id, extraction=extraction) as run:
        await run.harness.user_says("Hello")
        (first,) = memory_blocks(run.requests[-1], "user_profile")
        assert "Paris" in run.requests[-1].messages[first][1]
        await run.harness.user_says("I moved to Berlin last week")
        assert await run.memory.drain(10.0)
        await run.harness.user_says("Where do I live?")
        (idx,) = memory_blocks(run.requests[-1], "user_profile")
        profile = run.requests[-1].messages[idx][1]
        assert "User lives in Berlin" in profile and "Paris" not in profile


async def test_a_fact_the_bounded_profile_leaves_out_is_still_recalled(store: MemoryStore, user_id: str) -> None:
    dog = "User's dog is called Rex, a very old and very sleepy golden retriever"
    store.upsert_fact(user_id, dog, category="relationships", slot="dog_name")
    for i in range(12):  # newer facts of its kind fill the profile first (12 items, 900 characters)
        store.upsert_fact(
            user_id,
            f"User's friend number {i} visits very often, most weekends",
            category="relationships",
            slot=f"f{i}",
        )
    async with voice_session(store, MemoryMode.GATED, user_id) as run:
        await run.harness.user_says("What is my dog called?")
        (idx,) = memory_blocks(run.requests[-1], "user_profile")
        assert "Rex" not in run.requests[-1].messages[idx][1]  # cut from the profile...
        assert dog in recalled_text(run.requests[-1])  # ...so recall brings it


async def test_the_profile_keeps_the_users_name_and_each_kind_of_fact_when_one_kind_floods_it(
    store: MemoryStore, user_id: str
) -> None:
    # Newest first alone: twelve new hobbies pushed the user's name and allergy out, and a
    # returning user was not greeted by name.
    store.upsert_fact(user_id, "User's name is Jonathan", category="personal_facts", slot="name")
    store.upsert_fact(user_id, "User is allergic to peanuts", category="personal_facts", slot="allergy_peanuts")
    store.upsert_fact(user_id, "User's sister is Anna", category="relationships", slot="sister_name")
    for hobby in ["climbing", "chess", "pottery", "jazz", "sushi", "hiking", "tennis", "baking", "yoga", "opera"]:
        store.upsert_fact(user_id, f"User likes {hobby}", category="preferences", slot=f"hobby_{hobby}")
    store.upsert_fact(user_id, "User is training for a marathon", category="goals", slot="training")
    async with voice_session(store, MemoryMode.GATED, user_id) as run:
        await run.harness.user_says("Hello")
        (idx,) = memory_blocks(run.requests[0], "user_profile")
        lines = [ln for ln in run.requests[0].messages[idx][1].splitlines() if ln.startswith("{")]
    assert "Jonathan" in lines[0]
    for fact in ("allergic to peanuts", "sister is Anna", "marathon", "User likes opera"):
        assert any(fact in ln for ln in lines), fact
    assert len(lines) == run.service.settings.profile_max_items  # the rest is the newest hobbies


async def test_a_forget_during_a_session_takes_the_profile_out_of_its_next_replies(
    store: MemoryStore, user_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The profile was read once and re-injected into every request: after an operator's
    # `python -m memory.forget`, the live session went on telling the model the facts.
    from memory.livekit import reader as livekit_glue

    store.upsert_fact(user_id, "User's sister is Xylophena", category="relationships", slot="sister_name")
    async with voice_session(store, MemoryMode.GATED, user_id) as run:
        await run.harness.user_says("Hello")
        assert "Xylophena" in json.dumps(run.requests[-1].messages)
        run.service.forget(user_id)
        monkeypatch.setattr(livekit_glue, "PROFILE_MAX_AGE_S", 0.0, raising=False)  # "30 s later"
        await run.harness.user_says("Nice weather today")
        assert await run.memory.drain(10.0)
        await run.harness.user_says("Tell me about my family")
        assert "Xylophena" not in json.dumps(run.requests[-1].messages)
        assert memory_blocks(run.requests[-1], "user_profile") == []


@pytest.mark.parametrize("mode", [MemoryMode.NORMAL, MemoryMode.GATED])
async def test_a_forget_during_a_session_reaches_it_at_the_next_turn_even_from_its_cache(
    store: MemoryStore, user_id: str, mode: MemoryMode
) -> None:
    # A look-up that misses its budget falls back to the answer of the same words from
    # up to 30 s before: after an operator's forget, that answer named the forgotten fact.
    if mode is MemoryMode.NORMAL:
        store.add_raw(user_id, "My sister is called Xylophena")
    else:
        store.upsert_fact(user_id, "User's sister is Xylophena", category="relationships", slot="sister_name")
    async with voice_session(store, mode, user_id) as run:
        await run.harness.user_says("What's my sister's name?")
        assert "Xylophena" in json.dumps(run.requests[-1].messages)
        run.service.forget(user_id)
        await run.harness.user_says("Nice weather today")
        if (check := getattr(run.memory.reader, "_forget_check", None)) is not None:
            await check  # the turn's check, started at its first words
        hung = asyncio.Event()

        async def store_hangs(*args, **kwargs):
            await hung.wait()  # the look-up misses the budget: the cached answer is the fallback
            return []

        run.service.recall = store_hangs
        run.memory.recaller.budget_s = 0.3
        await run.harness.user_says("What's my sister's name?")
        assert run.memory.turns[-1].recall is not None and run.memory.turns[-1].recall.missed_budget
        assert "Xylophena" not in json.dumps(run.requests[-1].messages)
        hung.set()


async def test_gated_profile_is_bounded(store: MemoryStore, user_id: str) -> None:
    for i in range(40):
        store.upsert_fact(
            user_id, f"User likes hobby number {i} very much indeed", category="preferences", slot=f"hobby_{i}"
        )
    async with voice_session(store, MemoryMode.GATED, user_id) as run:
        await run.harness.user_says("Hello")
        (idx,) = memory_blocks(run.requests[0], "user_profile")
        lines = [ln for ln in run.requests[0].messages[idx][1].splitlines() if ln.startswith("{")]
        assert 0 < len(lines) <= run.service.settings.profile_max_items
        assert sum(len(ln) for ln in lines) <= run.service.settings.profile_max_chars


class HeldProfileService(MemoryService):
    """The real service, whose profile read is held back until `release` is set:
    a session-start fetch that is not back when the first reply is asked for."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.release = asyncio.Event()

    async def profile(self, user_id: str):
        await self.release.wait()
        return await super().profile(user_id)


class GreetingWatch(MemorySession):
    """Sets `asked` when a reply's context is being prepared."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.asked = asyncio.Event()

    async def prepare_chat_ctx(self, chat_ctx, **kwargs):
        self.asked.set()
        return await super().prepare_chat_ctx(chat_ctx, **kwargs)


async def greet(store: MemoryStore, user_id: str, *, budget_s: float, release_when_asked: bool) -> LLMRequest:
    """Start a GATED session whose profile fetch is still out, have the agent greet
    the user at once (as agent.py does), and return the greeting's LLM request."""
    settings = make_service(store, MemoryMode.GATED).settings
    service = HeldProfileService(store, settings, gatekeeper=Gatekeeper(None))
    memory = GreetingWatch(service, user_id=user_id, budget_s=budget_s)
    harness = VoiceHarness(MemoryAgent(memory), preflight=True)
    memory.attach(harness.session)

    async def release() -> None:
        await memory.asked.wait()
        service.release.set()

    releaser = asyncio.ensure_future(release()) if release_when_asked else None
    try:
        async with harness:
            handle = harness.session.generate_reply(instructions=load_prompt("greeting"))
            await asyncio.wait_for(handle.wait_for_playout(), harness.timeout)
    finally:
        service.release.set()
        if releaser is not None:
            releaser.cancel()
        await memory.aclose()
    return harness.llm.requests[0]


async def test_the_greeting_knows_the_user_when_the_profile_is_still_loading(store: MemoryStore, user_id: str) -> None:
    store.upsert_fact(user_id, "User's name is Mira", category="personal_facts", slot="name")
    request = await greet(store, user_id, budget_s=BUDGET_S, release_when_asked=True)
    (idx,) = memory_blocks(request, "user_profile")
    assert "User's name is Mira" in request.messages[idx][1]


async def test_a_profile_that_never_comes_delays_the_greeting_by_the_budget_only(
    store: MemoryStore, user_id: str
) -> None:
    store.upsert_fact(user_id, "User's name is Mira", category="personal_facts", slot="name")
    # The harness allows each step 10 s: a greeting waiting on the profile unbounded fails it.
    request = await greet(store, user_id, budget_s=0.2, release_when_asked=False)
    assert memory_blocks(request, "user_profile") == []


@pytest.mark.looptime
async def test_a_profile_read_that_hangs_costs_one_reply_the_budget_not_every_reply(
    store: MemoryStore, user_id: str, looptime
) -> None:
    # A locked table or a store that takes connections but never answers: the profile
    # read stays out. Every GATED reply used to wait its whole budget for it again
    # (measured: each reply 150 ms later, for as long as the table was locked).
    store.upsert_fact(user_id, "User's name is Mira", category="personal_facts", slot="name")
    settings = make_service(store, MemoryMode.GATED).settings
    service = HeldProfileService(store, settings, gatekeeper=Gatekeeper(None))
    memory = MemorySession(service, user_id=user_id, budget_s=0.05)
    memory.start_profile()
    ctx = llm.ChatContext()
    ctx.add_message(role="user", content="That sounds good to me")  # needs no recall: the profile alone
    try:
        # On the loop's fake clock (looptime), which moves by the timers it fast-forwards
        # (and by the odd real millisecond of the store's threads): each reply's wait.
        t0 = float(looptime)
        first = await memory.prepare_chat_ctx(ctx)  # waits out its budget
        assert PROFILE_ID not in [item.id for item in first.items]
        # The fake clock's floats: 94.1133 - 94.0633 is 0.04999..., one rounding below the budget.
        assert 0.05 - 1e-9 <= float(looptime) - t0 < 1.0
        # A reply that waited for the profile again would wait this whole budget.
        memory.recaller.budget_s = 60.0
        t0 = float(looptime)
        await memory.prepare_chat_ctx(ctx)
        assert float(looptime) - t0 < 1.0
        # When the read comes back after all, the next reply has the profile.
        service.release.set()
        await wait_until(lambda: bool(memory.profile), what="the profile read to come back")  # a thread: no fake time
        t0 = float(looptime)
        later = await memory.prepare_chat_ctx(ctx)
        assert PROFILE_ID in [item.id for item in later.items] and float(looptime) - t0 < 1.0
    finally:
        service.release.set()
        await memory.aclose()
