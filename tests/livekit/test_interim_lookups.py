"""A streaming STT's interims start one look-up per utterance, not one per word.

A live STT sends an interim for every word, a word every 0.3-0.5 s. Each settled interim
used to start a look-up (an embedding and a statement): one per word, a third of what
memory added to a call's CPU, and all but the last for words the user went on from. The
look-up now starts when the user stops speaking (the VAD's end of speech), for the words
heard so far; the final transcript with the same words finds it done.
"""

from __future__ import annotations

import asyncio

import pytest

from memory.livekit.reader import INTERIM_SETTLE_S, MemoryReader
from memory.settings import MemoryMode
from memory.storage.store import MemoryStore
from memory.types import MemoryRecord
from tests.conftest import make_service


def _reader(store: MemoryStore, asked: list[str]) -> MemoryReader:
    service = make_service(store, MemoryMode.NORMAL)

    async def recall(user_id: str, text: str, context: object = (), session_id: str | None = None):
        asked.append(text)
        return [MemoryRecord(id="m1", text="My sister is called Anna", user_id=user_id, score=1.0)]

    service.recall = recall  # type: ignore[method-assign]
    return MemoryReader(service, user_id="u-interims", session_id="s-interims", budget_s=1.0)


@pytest.mark.looptime
async def test_interims_word_by_word_start_one_look_up_when_the_user_stops(store: MemoryStore, looptime) -> None:
    asked: list[str] = []
    reader = _reader(store, asked)
    words = "What is my sister called".split()
    for n in range(1, len(words) + 1):
        reader.transcribed(" ".join(words[:n]), False)
        await asyncio.sleep(0.4)  # a word every 0.4 s (the fake clock): past the old 0.2 s settle
    assert asked == []  # none while the user speaks
    reader.speech_ended()  # the VAD's end of speech
    await asyncio.sleep(0)
    assert asked == ["What is my sister called"]
    reader.transcribed("What is my sister called?", True)  # the final: the same words
    result = await reader.recaller.get("What is my sister called?")
    assert asked == ["What is my sister called"] and result.prefetched
    assert [r.text for r in result.records] == ["My sister is called Anna"]
    await reader.aclose()


@pytest.mark.looptime
async def test_interims_that_stop_without_an_end_of_speech_start_their_look_up_after_the_settle_time(
    store: MemoryStore, looptime
) -> None:
    asked: list[str] = []
    reader = _reader(store, asked)
    reader.transcribed("What is my sister", False)
    await asyncio.sleep(INTERIM_SETTLE_S * 0.9)
    assert asked == []
    reader.transcribed("What is my sister called", False)
    await asyncio.sleep(INTERIM_SETTLE_S * 0.9)
    assert asked == []  # each new interim starts the wait again
    await asyncio.sleep(INTERIM_SETTLE_S * 0.2)
    assert asked == ["What is my sister called"]
    reader.speech_ended()  # nothing left to look up
    await asyncio.sleep(0)
    assert asked == ["What is my sister called"]
    await reader.aclose()
