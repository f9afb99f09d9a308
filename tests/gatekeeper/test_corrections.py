"""Corrections and changes reach extraction and replace the old value, history kept.

Each case is a statement and, later, a turn that corrects or changes it, English and
Chinese, with and without a first-person word. The old value is either said earlier in
the same session (it is in the turn's context, as the LiveKit glue passes it: "user: ..."
/ "assistant: ...") or stored in an earlier session (no context: only the stored fact
can tell the gatekeeper what the change is about).

The extraction model is scripted, and follows the prompt: it writes the fact the script
gives for the message, and takes the slot from `known_facts` when one of them is about
the same thing; blind to them, it names a slot of its own, as a real model would, and
the old value would stay current beside the new one. Everything else is real: the
pre-filter, the gatekeeper, the service's write path, Mem0 and Postgres.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from harness.scripted import LLMRequest, RecordingLLM
from memory.gatekeeper.gatekeeper import Gatekeeper
from memory.language.prefilter import GateAction
from memory.settings import MemoryMode
from memory.storage.store import MemoryStore
from memory.types import Turn, now_iso
from tests.conftest import make_service


@dataclass(frozen=True)
class Case:
    id: str
    first: str  # the statement of the old value
    old_fact: str
    change: str  # the correction or change
    new_fact: str
    category: str
    topic: str  # a word that the old fact and the new one share (how the script finds the slot)
    slot: str  # the slot the first statement gets
    blind_slot: str  # the slot the change would get without seeing known_facts
    needs_previous_turn: bool = False  # value-only repairs ("actually, it's 3pm") point at the turn before
    corrects: bool = False  # a mistake put right: the old value never held (no past value is kept)


CASES = [
    Case(
        "en-correction-no-i",
        "My meeting with the design team is at 2pm on Friday.",
        "User's design team meeting is at 2pm on Friday",
        "Correction: the design team meeting moved to 3pm on Friday.",
        "User's design team meeting is at 3pm on Friday",
        "goals",
        "meeting",
        "design_team_meeting_time",
        "meeting_time",
        corrects=True,
    ),
    Case(
        "en-turns-out-no-i",
        "We have tickets for the concert in May.",
        "User has concert tickets for May",
        "Turns out the concert got moved to June.",
        "User has concert tickets for June",
        "goals",
        "concert",
        "concert_date",
        "concert_month",
    ),
    Case(
        "en-actually-value-only",
        "My dentist appointment is at 2pm tomorrow.",
        "User has a dentist appointment at 2pm",
        "actually, it's 3pm",
        "User has a dentist appointment at 3pm",
        "personal_facts",
        "dentist",
        "dentist_appointment",
        "appointment_time",
        needs_previous_turn=True,
        corrects=True,
    ),
    Case(
        "en-now-no-i",
        "Our family reunion is on Saturday.",
        "User's family reunion is on Saturday",
        "the reunion is on Sunday now",
        "User's family reunion is on Sunday",
        "goals",
        "reunion",
        "family_reunion_date",
        "reunion_day",
    ),
    Case(
        "en-moved-with-i",
        "I live in Shanghai.",
        "User lives in Shanghai",
        "I moved, I live in Hangzhou now",
        "User lives in Hangzhou",
        "personal_facts",
        "lives",
        "home_city",
        "current_city",
    ),
    Case(
        "zh-correction-value-only",
        "我的会议是两点。",
        "用户的会议是两点",
        "不对，是三点",
        "用户的会议是三点",
        "goals",
        "会议",
        "meeting_time",
        "corrected_time",
        needs_previous_turn=True,
        corrects=True,
    ),
    Case(
        "zh-change-no-i",
        "我下周有一场篮球比赛。",
        "用户下周有一场篮球比赛",
        "比赛改到下个月了",
        "用户的篮球比赛改到下个月",
        "goals",
        "比赛",
        "basketball_game_date",
        "game_time",
    ),
    Case(
        "zh-no-longer-with-i",
        "我很爱吃肉。",
        "用户爱吃肉",
        "我不再吃肉了",
        "用户不再吃肉",
        "preferences",
        "吃肉",
        "diet_meat",
        "eats_meat",
    ),
]


def following_the_prompt(cases: list[Case]) -> RecordingLLM:
    """A scripted extraction model that uses `known_facts` as the prompt asks."""
    by_text = {c.first: (c.old_fact, c.slot, c) for c in cases} | {
        c.change: (c.new_fact, c.blind_slot, c) for c in cases
    }

    def respond(request: LLMRequest) -> str:
        payload = json.loads(request.messages[-1][1])
        fact, slot, case = by_text[payload["latest_user_message"]]
        for known in payload["known_facts"]:
            if case.topic in known["text"]:
                slot = known["slot"]  # the message changes a known fact: its slot, as written
        return json.dumps({"facts": [{"text": fact, "category": case.category, "slot": slot}]}, ensure_ascii=False)

    return RecordingLLM(respond)


async def _replaced(store: MemoryStore, user_id: str, case: Case) -> None:
    """The new value is the user's one current fact, and the old one is in its history;
    after a change the old value is kept as a past one (searchable for questions about
    the past), after a correction it is not: it never held."""
    current = store.list_user(user_id, past=False)
    assert [r.text for r in current] == [case.new_fact]
    history = [(h["old_memory"], h["new_memory"], h["event"]) for h in store.history(current[0].id)]
    assert (case.old_fact, case.new_fact, "UPDATE") in history, history
    past = [r for r in store.list_user(user_id) if r.metadata.get("valid_until")]
    if case.corrects:
        assert past == []
    else:
        assert [(r.text, r.metadata["superseded_by"]) for r in past] == [(case.old_fact, current[0].id)]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
async def test_a_change_said_later_in_the_session_replaces_the_value(
    store: MemoryStore, user_id: str, case: Case
) -> None:
    extraction = following_the_prompt(CASES)
    service = make_service(store, MemoryMode.GATED, gatekeeper=Gatekeeper(extraction))
    first = await service.remember(Turn(user_id, case.first, "s1", f"{case.id}-1", now_iso()))
    assert [w.event for w in first.writes] == ["ADD"]
    reply = "好的，记下了。" if case.id.startswith("zh") else "Got it, thanks for telling me."
    context = (f"user: {case.first}", f"assistant: {reply}")
    report = await service.remember(Turn(user_id, case.change, "s1", f"{case.id}-2", now_iso(), context=context))
    assert report.gate is not None and report.gate.decision.action is GateAction.EXTRACT, report.gate
    assert [w.event for w in report.writes] == ["UPDATE"]
    await _replaced(store, user_id, case)


@pytest.mark.parametrize("case", [c for c in CASES if not c.needs_previous_turn], ids=lambda c: c.id)
async def test_a_change_of_a_fact_stored_in_an_earlier_session_replaces_it(
    store: MemoryStore, user_id: str, case: Case
) -> None:
    store.upsert_fact(user_id, case.old_fact, category=case.category, slot=case.slot)
    extraction = following_the_prompt(CASES)
    service = make_service(store, MemoryMode.GATED, gatekeeper=Gatekeeper(extraction))
    report = await service.remember(Turn(user_id, case.change, "s2", f"{case.id}-new", now_iso()))
    assert report.gate is not None and report.gate.decision.action is GateAction.EXTRACT, report.gate
    await _replaced(store, user_id, case)


async def test_a_change_that_names_only_a_stored_fact_is_checked_against_the_store(
    store: MemoryStore, user_id: str
) -> None:
    # No first-person word, no article, nothing earlier in the session: only the stored
    # appointment says what "moved to Tuesday" is about.
    text = "Dentist appointment moved to Tuesday"
    store.upsert_fact(user_id, "User has a dentist appointment on Monday", category="personal_facts", slot="dentist")
    extraction = RecordingLLM(
        lambda request: json.dumps(
            {
                "facts": [
                    {
                        "text": "User has a dentist appointment on Tuesday",
                        "category": "personal_facts",
                        "slot": json.loads(request.messages[-1][1])["known_facts"][0]["slot"],
                    }
                ]
            }
        )
    )
    service = make_service(store, MemoryMode.GATED, gatekeeper=Gatekeeper(extraction))
    report = await service.remember(Turn(user_id, text, "s2", "t-dentist", now_iso()))
    assert report.gate is not None and report.gate.decision.reason == "change_of_known_fact"
    assert [r.text for r in store.list_user(user_id, past=False)] == ["User has a dentist appointment on Tuesday"]


async def test_a_change_about_nothing_the_user_ever_said_is_not_sent_to_the_model(
    store: MemoryStore, user_id: str
) -> None:
    store.upsert_fact(user_id, "User lives in Paris", category="personal_facts", slot="home_city")
    extraction = RecordingLLM(lambda request: json.dumps({"facts": []}))
    service = make_service(store, MemoryMode.GATED, gatekeeper=Gatekeeper(extraction))
    report = await service.remember(Turn(user_id, "Train schedules changed to winter times", "s", "t-x", now_iso()))
    assert report.gate is not None and report.gate.decision.action is GateAction.SKIP
    assert extraction.count == 0


@pytest.mark.parametrize(
    ("text", "context"),
    [
        # chit-chat that uses the same words: "actually" and "now" alone are no change
        ("Actually, that sounds fun", ["assistant: We could go hiking this weekend."]),
        ("It's raining now", []),
        ("That sounds great now", ["assistant: I fixed the playlist."]),
        ("Scratch that.", ["assistant: Your meeting is at 2pm."]),
    ],
)
def test_the_words_of_a_correction_without_a_new_value_are_still_skipped(text: str, context: list[str]) -> None:
    from memory.language.prefilter import prefilter

    assert prefilter(text, context).action is GateAction.SKIP


async def test_a_spoken_correction_in_a_voice_session_replaces_the_value(store: MemoryStore, user_id: str) -> None:
    # Through the worker's own wiring: the glue hands the correction its context (the
    # statement and the agent's reply), the write queue runs the turns in order.
    from tests.livekit.sessions import voice_session

    case = CASES[0]
    extraction = following_the_prompt(CASES)
    async with voice_session(store, MemoryMode.GATED, user_id, extraction=extraction) as run:
        await run.harness.user_says(case.first)
        assert await run.memory.drain(10.0)
        await run.harness.user_says(case.change)
    sent = json.loads(extraction.requests[-1].messages[-1][1])
    assert sent["previous_turns"][0] == f"user: {case.first}"
    await _replaced(store, user_id, case)
