"""The store over time: what the product stored, and the replies that recalled, per day.

Turns and facts are counted from the memories themselves; recalls are counted by each
call as it closes (`MemorySession.aclose` -> `memory/storage/activity.py`), here by a real
`AgentSession` whose replies look memory up."""

from __future__ import annotations

import re

import aiohttp

from harness.scripted import LLMRequest, RecordingLLM, VoiceHarness
from memory.gatekeeper.gatekeeper import Gatekeeper
from memory.livekit.agent import MemoryAgent
from memory.livekit.session import MemorySession
from memory.settings import MemoryMode
from memory.storage.store import MemoryStore
from tests.conftest import make_service
from tests.web.conftest import AUTH, Web


async def per_day_totals(http: aiohttp.ClientSession, web: Web) -> dict[str, int]:
    """The store page's per-day table, each column summed over the days it shows."""
    async with http.get(f"{web.url}/store", headers=AUTH) as resp:
        assert resp.status == 200
        html = await resp.text()
    table = html[html.index('id="per-day"') :]
    totals = {}
    for column in ("raw", "facts", "recalls", "injected", "messages"):
        totals[column] = sum(int(n) for n in re.findall(rf'<td class="num {column}">(\d+)</td>', table))
    assert html.count("<rect ") == 4 * 30  # four charts, a bar a day
    return totals


def echo(request: LLMRequest) -> str:
    user = [text for role, text in request.messages if role == "user"]
    return f"Noted: {user[-1]}" if user else "Hello!"


async def test_the_chart_counts_what_was_stored_and_the_replies_that_recalled(
    gated_web: Web, http: aiohttp.ClientSession, store: MemoryStore, user_id: str
) -> None:
    before = await per_day_totals(http, gated_web)
    store.upsert_fact(user_id, "User's cat is Miso", category="relationships", slot="cat")
    store.upsert_fact(user_id, "用户住在杭州", category="personal_facts", slot="home_city")

    service = make_service(store, MemoryMode.NORMAL, gatekeeper=Gatekeeper(None))
    memory = MemorySession(service, user_id=user_id, budget_s=10.0)
    harness = VoiceHarness(MemoryAgent(memory), llm=RecordingLLM(echo))
    memory.attach(harness.session)
    await memory.wait_profile()
    async with harness:
        await harness.user_says("What's my cat called?")
        await harness.user_says("我住在哪里？")
        assert await memory.drain(10.0)
    await memory.aclose()  # the call ends: its counts are added
    injected = sum(t.injected for t in memory.turns)
    assert injected >= 2  # each reply was given the fact it asked about

    after = await per_day_totals(http, gated_web)
    assert after["facts"] - before["facts"] == 2
    assert after["raw"] - before["raw"] == 2  # NORMAL kept both turns
    assert after["recalls"] - before["recalls"] == 2
    assert after["injected"] - before["injected"] == injected
