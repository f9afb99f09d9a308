"""Issue 53: past values are found without a list of cue words. A question about the past
names no time word as often as it does: the past is in its tense ("which team did I play
for"), an event it names ("when I got Rex", 我换工作前), an ordinal ("my first job"). Past
values are candidates for every GATED question and ranked by how their spans fit the time
asked; a question about now gets no past value.

The real pre-filter, gatekeeper, service, store and retriever; the extraction is scripted;
every turn carries its own time."""

from __future__ import annotations

from datetime import datetime

from memory.storage.store import MemoryStore
from tests.gatekeeper.test_over_time import say, service_for

ASKED = datetime.fromisoformat("2026-11-20T18:00:00+00:00")
JOB = {"category": "personal_facts", "slot": "job"}
HOME = {"category": "personal_facts", "slot": "home_city"}
PET = {"category": "personal_facts", "slot": "pet"}
SCRIPT = {
    "I work as a barista at Grind.": [{"text": "User works as a barista at Grind", **JOB}],
    "I live in Hackney.": [{"text": "User lives in Hackney", **HOME}],
    "I adopted a greyhound called Rex.": [{"text": "User has a greyhound named Rex", **PET}],
    "I moved to Leyton.": [{"text": "User lives in Leyton", **HOME}],
    "I opened my own coffee cart.": [{"text": "User runs his own coffee cart", **JOB}],
}


async def _story(store: MemoryStore, user_id: str):  # type: ignore[no-untyped-def]
    service = service_for(store, SCRIPT)
    await say(service, user_id, "I work as a barista at Grind.", "2017-06-06T10:00:00+00:00", 0)
    await say(service, user_id, "I live in Hackney.", "2017-06-06T10:05:00+00:00", 1)
    await say(service, user_id, "I adopted a greyhound called Rex.", "2018-09-09T10:00:00+00:00", 2)
    await say(service, user_id, "I moved to Leyton.", "2021-02-02T10:00:00+00:00", 3)
    await say(service, user_id, "I opened my own coffee cart.", "2022-08-08T10:00:00+00:00", 4)
    return service


def _first(service, user_id: str, question: str) -> str:  # type: ignore[no-untyped-def]
    hits = service.retriever.retrieve(user_id, question, categories=service.recall_categories, now=ASKED)
    return hits[0].text if hits else ""


async def test_an_event_the_question_names_dates_it(store: MemoryStore, user_id: str) -> None:
    service = await _story(store, user_id)
    assert _first(service, user_id, "Where was I living when I got Rex?") == "User lives in Hackney"


async def test_the_tense_alone_asks_about_the_past(store: MemoryStore, user_id: str) -> None:
    service = await _story(store, user_id)
    assert _first(service, user_id, "Where did I live?") == "User lives in Hackney"
    assert _first(service, user_id, "What was my first job?") == "User works as a barista at Grind"
    assert _first(service, user_id, "What did I do before the coffee cart?") == "User works as a barista at Grind"


async def test_a_question_about_now_gets_no_past_value(store: MemoryStore, user_id: str) -> None:
    service = await _story(store, user_id)
    for question in ("Where do I live?", "What do I do for work?", "Am I still at Grind?"):
        hits = service.retriever.retrieve(user_id, question, categories=service.recall_categories, now=ASKED)
        assert hits and not any(h.metadata.get("valid_until") for h in hits), question
    assert _first(service, user_id, "Am I still at Grind?") == "User runs his own coffee cart"
