"""A turn on its way to the store through a real session: secrets left out, long turns
kept in parts, a model that fails or refuses never losing or blocking turns."""

from __future__ import annotations

import dataclasses
import json
import logging

from harness.scripted import LLMRequest, RecordingLLM, VoiceHarness
from memory.journal.queue import DurableWriteQueue
from memory.livekit.agent import MemoryAgent
from memory.livekit.session import MemorySession
from memory.settings import MemoryMode
from memory.storage.store import MemoryStore
from memory.types import Turn
from tests.conftest import make_service, scripted_extraction, wait_until
from tests.livekit.sessions import BUDGET_S, one_request_per_turn, voice_session


class RecordingQueue(DurableWriteQueue):
    """The real journal, keeping a copy of each turn handed to it."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.turns: list[Turn] = []

    def enqueue(self, turn: Turn) -> None:
        self.turns.append(turn)
        super().enqueue(turn)


def payloads_of(store: MemoryStore, user_id: str) -> str:
    """Everything the store keeps for a user, as one string: texts and metadata."""
    from psycopg import sql

    with store.pool.connection() as conn:
        rows = conn.execute(
            sql.SQL("SELECT payload::text FROM {} WHERE payload->>'user_id' = %s").format(sql.Identifier(store.table)),
            [user_id],
        ).fetchall()
    return "\n".join(r[0] for r in rows)


async def test_a_card_number_said_aloud_reaches_neither_the_journal_nor_the_store(
    store: MemoryStore, user_id: str
) -> None:
    service = make_service(store, MemoryMode.NORMAL)
    memory = MemorySession(service, user_id=user_id, budget_s=BUDGET_S)
    memory.queue = memory.rows.queue = queue = RecordingQueue(service.settings.journal_path, memory.rows)
    harness = VoiceHarness(MemoryAgent(memory), preflight=True)
    memory.attach(harness.session)
    async with harness:
        await harness.user_says("My card number is 4111 1111 1111 1111 and my sister is Anna")
        await harness.user_says("and my password is hunter2")
        assert await memory.drain(10.0)
    await memory.aclose()
    journaled = json.dumps([dataclasses.asdict(t) for t in queue.turns])
    kept = payloads_of(store, user_id)
    for secret in ("4111", "hunter2"):
        assert secret not in journaled and secret not in kept
    assert "my sister is Anna" in kept  # the rest of the turn is remembered
    assert sorted(m.text for m in store.list_user(user_id)) == [  # the marker where each was
        "My card number is [redacted] and my sister is Anna",
        "and my password is [redacted]",
    ]


async def test_gated_keeps_no_secret_and_no_copy_of_the_turn(store: MemoryStore, user_id: str) -> None:
    extraction = scripted_extraction(
        {
            "My sister is Anna, and my banking password is [redacted]": [
                {"text": "User's sister is Anna", "category": "relationships", "slot": "sister_name"}
            ]
        }
    )
    async with voice_session(store, MemoryMode.GATED, user_id, extraction=extraction) as run:
        await run.harness.user_says("My sister is Anna, and my banking password is Tr0ub4dor&3")
        await run.harness.user_says("请记住我的银行卡密码是839201")  # forced: extraction finds nothing
    kept = payloads_of(store, user_id)
    assert "Tr0ub4dor" not in kept and "839201" not in kept
    assert "Tr0ub4dor" not in json.dumps([r.messages for r in extraction.requests])  # nor did the model see it
    assert sorted(m.text for m in store.list_user(user_id)) == [
        "User's sister is Anna",
        "请记住我的银行卡密码是[redacted]",
    ]
    assert "banking" not in kept  # the fact is kept, not the turn it came from


async def test_a_long_typed_turn_is_kept_whole_in_parts(store: MemoryStore, user_id: str) -> None:
    text = "Let me tell you about my week. " * 70 + "Oh, and my daughter's name is Zoe."
    async with voice_session(store, MemoryMode.NORMAL, user_id) as run:
        await run.harness.user_types(text)
    parts = [m.text for m in sorted(store.list_user(user_id), key=lambda m: m.metadata["seq"])]
    limit = run.service.settings.max_turn_chars
    assert len(parts) == 2 and all(len(p) <= limit for p in parts)
    assert " ".join(parts).split() == text.split()  # every word, in order


async def test_broken_extraction_output_stores_nothing_and_session_goes_on(
    store: MemoryStore, user_id: str, caplog
) -> None:
    caplog.set_level(logging.INFO)
    extraction = RecordingLLM(lambda _req: "Sure! I'll remember that the user's brother is called Tom.")
    async with voice_session(store, MemoryMode.GATED, user_id, extraction=extraction) as run:
        await run.harness.user_says("My brother is called Tom")
        await run.harness.user_says("Hello again")
        one_request_per_turn(run, 2)
    assert store.list_user(user_id) == []
    assert "rejected" in caplog.text and "Tom" not in caplog.text  # the model's prose echoes the user's words


async def test_a_turn_the_model_refuses_does_not_hold_up_the_turns_after_it(store: MemoryStore, user_id: str) -> None:
    # A content filter answers HTTP 400 for one turn, on every attempt: the queue retried
    # it for ever and no later turn of any session on the machine was written.
    from livekit.agents import APIStatusError

    def respond(request: LLMRequest) -> str:
        said = json.loads(request.messages[-1][1])["latest_user_message"]
        if "Zorblax" in said:
            raise APIStatusError("filtered", status_code=400, body={"code": "content_filter"})
        fact = {"text": "User's sister is Maria", "category": "relationships", "slot": "sister"}
        return json.dumps({"facts": [fact]})

    async with voice_session(store, MemoryMode.GATED, user_id, extraction=RecordingLLM(respond)) as run:
        await run.harness.user_says("My band is called Zorblax and our songs are about violence")
        await run.harness.user_says("My sister is called Maria")
    assert [m.text for m in store.list_user(user_id)] == ["User's sister is Maria"]
    assert run.memory.queue.pending_count() == 0


async def test_a_setting_the_model_refuses_for_every_turn_loses_no_fact_once_it_is_fixed(
    store: MemoryStore, user_id: str
) -> None:
    # The same HTTP 400, for a wrong MEMORY_LLM_MODEL: every turn waits until it is fixed.
    from livekit.agents import APIStatusError

    fixed = False

    def respond(request: LLMRequest) -> str:
        if not fixed:
            raise APIStatusError("'response_format' of type 'json_object' is not supported with this model",
                                 status_code=400, body={"code": None})  # fmt: skip
        return json.dumps({"facts": [{"text": "User's sister is Anna", "category": "relationships", "slot": "sister"}]})

    async with voice_session(store, MemoryMode.GATED, user_id, extraction=RecordingLLM(respond)) as run:
        await run.harness.user_says("My sister is called Anna")
        await wait_until(lambda: run.memory.queue.retried >= 2, what="the refused attempts")
        fixed = True  # the operator fixes the setting
    assert [m.text for m in store.list_user(user_id)] == ["User's sister is Anna"]
