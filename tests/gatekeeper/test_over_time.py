"""GATED facts over time: a change keeps the old value with the span it held, searchable
for questions about the past; a correction replaces it without making it a past one; the
profile and the extraction model's known facts see only what holds now.

The real pre-filter, gatekeeper, service, store (Mem0 on Postgres) and retriever; the
extraction model is scripted. Every turn carries its own time (no wall clock): the spans
asserted are those the turns' dates give.
"""

from __future__ import annotations

import json
from datetime import datetime

from harness.scripted import LLMRequest, RecordingLLM
from memory.gatekeeper.gatekeeper import Gatekeeper
from memory.service import MemoryService
from memory.settings import MemoryMode
from memory.storage.store import MemoryStore
from memory.types import Turn
from tests.conftest import make_service, scripted_extraction

HOME = {"category": "personal_facts", "slot": "home_city"}
ASKED = datetime.fromisoformat("2026-11-20T18:00:00+00:00")


def home(city: str) -> list[dict[str, str]]:
    return [{"text": f"User lives in {city}", **HOME}]


MOVES = {
    "I live in Paris.": home("Paris"),
    "I moved to Berlin last week.": home("Berlin"),  # said on Friday 20 March 2026
    "No, I said Munich, not Berlin.": home("Munich"),
    "I moved to Hamburg in October.": home("Hamburg"),
    "My sister is called Anna.": [{"text": "User's sister is Anna", "category": "relationships", "slot": "sister"}],
}


def service_for(store: MemoryStore, script: dict[str, list[dict[str, str]]]) -> MemoryService:
    return make_service(store, MemoryMode.GATED, gatekeeper=Gatekeeper(scripted_extraction(script)))


async def say(service: MemoryService, user_id: str, text: str, at: str, n: int) -> None:
    await service.remember(Turn(user_id, text, f"s{n}", f"t{n}", at))


def spans(store: MemoryStore, user_id: str) -> list[tuple[str, str | None, str | None]]:
    """(text, valid_from, valid_until) of every fact of the user, oldest first."""
    rows = store.list_user(user_id)
    return sorted(((r.text, r.metadata.get("valid_from"), r.metadata.get("valid_until")) for r in rows),
                  key=lambda t: t[1] or "")  # fmt: skip


async def test_a_change_keeps_the_old_value_with_the_span_it_held(store: MemoryStore, user_id: str) -> None:
    service = service_for(store, MOVES)
    await say(service, user_id, "I live in Paris.", "2024-01-05T10:00:00+00:00", 1)
    await say(service, user_id, "I moved to Berlin last week.", "2026-03-20T10:00:00+00:00", 2)
    assert spans(store, user_id) == [
        ("User lives in Paris", "2024-01-05", "2026-03-09"),  # until the Monday of the week before
        ("User lives in Berlin", "2026-03-09", None),
    ]
    # Only what holds now is a known fact for the extraction model, and the profile.
    assert [r.text for r in store.list_user(user_id, past=False)] == ["User lives in Berlin"]
    assert [r.text for r in await service.profile(user_id)] == ["User lives in Berlin"]


async def test_a_correction_replaces_the_value_without_making_it_a_past_one(store: MemoryStore, user_id: str) -> None:
    service = service_for(store, MOVES)
    await say(service, user_id, "I live in Paris.", "2024-01-05T10:00:00+00:00", 1)
    await say(service, user_id, "I moved to Berlin last week.", "2026-03-20T10:00:00+00:00", 2)
    await say(service, user_id, "No, I said Munich, not Berlin.", "2026-03-20T10:01:00+00:00", 3)
    assert spans(store, user_id) == [
        ("User lives in Paris", "2024-01-05", "2026-03-09"),
        ("User lives in Munich", "2026-03-09", None),  # held from when the misheard value did
    ]


async def test_the_model_can_say_a_value_was_a_mistake(store: MemoryStore, user_id: str) -> None:
    def respond(request: LLMRequest) -> str:
        said = json.loads(request.messages[-1][1])["latest_user_message"]
        city = "Lyon" if "Lyon" in said else "Paris"
        return json.dumps({"facts": [{"text": f"User lives in {city}", **HOME, "corrects": city == "Lyon"}]})

    service = make_service(store, MemoryMode.GATED, gatekeeper=Gatekeeper(RecordingLLM(respond)))
    await say(service, user_id, "I live in Paris.", "2024-01-05T10:00:00+00:00", 1)
    await say(service, user_id, "Lyon is where I live.", "2024-01-05T10:02:00+00:00", 2)  # no words of a repair
    assert spans(store, user_id) == [("User lives in Lyon", "2024-01-05", None)]


async def test_moving_back_to_a_past_value_makes_it_current_again(store: MemoryStore, user_id: str) -> None:
    store.upsert_fact(user_id, "User lives in Paris", **HOME, valid_from="2024-01-05")
    store.upsert_fact(user_id, "User lives in Berlin", **HOME, valid_from="2025-06-01")
    back = store.upsert_fact(user_id, "User lives in Paris", **HOME, valid_from="2026-10-01")
    assert back.event == "UPDATE"  # not a restatement of the past value
    assert [r.text for r in store.list_user(user_id, past=False)] == ["User lives in Paris"]
    assert spans(store, user_id) == [
        ("User lives in Paris", "2024-01-05", "2025-06-01"),
        ("User lives in Berlin", "2025-06-01", "2026-10-01"),
        ("User lives in Paris", "2026-10-01", None),
    ]


async def test_a_question_about_the_past_finds_the_value_for_its_time(store: MemoryStore, user_id: str) -> None:
    service = service_for(store, MOVES)
    await say(service, user_id, "My sister is called Anna.", "2024-01-05T09:00:00+00:00", 0)
    await say(service, user_id, "I live in Paris.", "2024-01-05T10:00:00+00:00", 1)
    await say(service, user_id, "I moved to Berlin last week.", "2025-03-20T10:00:00+00:00", 2)
    await say(service, user_id, "I moved to Hamburg in October.", "2026-10-20T10:00:00+00:00", 3)

    def first(question: str) -> tuple[str, str | None]:
        hits = service.retriever.retrieve(user_id, question, categories=service.recall_categories, now=ASKED)
        return hits[0].text, hits[0].metadata.get("valid_until")

    assert first("Where did I live before Berlin?") == ("User lives in Paris", "2025-03-10")
    assert first("Where did I live before Hamburg?") == ("User lives in Berlin", "2026-10-01")
    assert first("Where did I live last year?") == ("User lives in Berlin", "2026-10-01")
    assert first("Where did I use to live?") == ("User lives in Berlin", "2026-10-01")
    # A question about now never sees a past value.
    now = service.retriever.retrieve(user_id, "Where do I live?", categories=service.recall_categories, now=ASKED)
    assert [h.text for h in now if "lives in" in h.text] == ["User lives in Hamburg"]


async def test_a_chinese_question_about_the_past_finds_the_old_value(store: MemoryStore, user_id: str) -> None:
    script = {
        "我住在北京。": [{"text": "用户住在北京", **HOME}],
        "我上个月搬到上海了。": [{"text": "用户住在上海", **HOME}],
    }
    service = service_for(store, script)
    await say(service, user_id, "我住在北京。", "2023-04-01T10:00:00+00:00", 1)
    await say(service, user_id, "我上个月搬到上海了。", "2026-03-15T10:00:00+00:00", 2)
    for question in ("搬到上海之前我住哪儿？", "我以前住在哪个城市？", "我去年住在哪里？"):
        hits = service.retriever.retrieve(user_id, question, categories=service.recall_categories, now=ASKED)
        assert (hits[0].text, hits[0].metadata.get("valid_until")) == ("用户住在北京", "2026-02-01"), question
    now = service.retriever.retrieve(user_id, "我现在住在哪里？", categories=service.recall_categories, now=ASKED)
    assert "用户住在北京" not in [h.text for h in now]
