"""The recall budget: a reply never waits past it, and late work is reused."""

from __future__ import annotations

import asyncio

import pytest

from memory.retrieval.prefetch import Recaller, transcript_key
from memory.types import MemoryRecord


def _rec(text: str) -> MemoryRecord:
    return MemoryRecord(id=text, text=text, user_id="u")


class ScriptedFetch:
    """A store look-up the test releases by hand; counts calls per text."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.release = asyncio.Event()
        self.fail: Exception | None = None

    async def __call__(self, text: str, context: tuple[str, ...] = ()) -> list[MemoryRecord]:
        self.calls.append(text)
        await self.release.wait()
        if self.fail:
            raise self.fail
        return [_rec(f"memory for {text}")]


def test_transcript_key_ignores_case_and_punctuation() -> None:
    assert transcript_key("What's my sister's name?") == transcript_key("what s my sister s name")
    assert transcript_key("我妹妹叫什么名字？") == transcript_key("我妹妹叫什么名字")


async def test_prefetched_final_transcript_is_reused_not_fetched_again() -> None:
    fetch = ScriptedFetch()
    recaller = Recaller(fetch, budget_s=5.0)
    recaller.prefetch("What's my sister's name?", final=True)
    fetch.release.set()
    result = await recaller.get("what's my sister's name")
    assert result.prefetched and not result.missed_budget
    assert [r.text for r in result.records] == ["memory for What's my sister's name?"]
    assert len(fetch.calls) == 1


@pytest.mark.looptime
async def test_hanging_store_costs_at_most_the_budget(looptime) -> None:
    # On the loop's fake clock (looptime): the reply waits the budget to the millisecond,
    # whatever the machine's load.
    fetch = ScriptedFetch()  # never released: the store hangs
    recaller = Recaller(fetch, budget_s=0.05)
    t0 = float(looptime)
    result = await recaller.get("do you remember my dog?")
    assert result.missed_budget and result.records == []
    # Fake time, plus the odd real microsecond of the loop; rounded: at a loop time of 6.05 s
    # the float difference of two exact fake times is 0.04999999999999982.
    assert 0.05 <= round(float(looptime) - t0, 9) < 0.1
    assert not fetch.release.is_set()  # the look-up still hangs: the budget ended the wait
    await recaller.aclose()


async def test_late_result_is_kept_for_the_next_turn_with_same_words() -> None:
    fetch = ScriptedFetch()
    recaller = Recaller(fetch, budget_s=0.01)
    first = await recaller.get("what do you know about me")
    assert first.missed_budget
    fetch.release.set()
    second = await recaller.get("What do you know about me?")
    assert not second.missed_budget and second.prefetched
    assert len(second.records) == 1 and len(fetch.calls) == 1


async def test_same_words_in_a_new_context_are_looked_up_again_but_the_old_answer_beats_none() -> None:
    fetch = ScriptedFetch()
    fetch.release.set()
    context: tuple[str, ...] = ("I'm going to a wedding",)
    recaller = Recaller(fetch, budget_s=0.5, context=lambda: context)
    first = await recaller.get("and shoes?")
    assert len(first.records) == 1
    context = ("I'm going to a wedding", "and shoes?")  # the conversation moved on
    second = await recaller.get("And shoes?")
    assert len(fetch.calls) == 2 and not second.earlier_context
    # the store now hangs: the fresh look-up misses the budget, the earlier answer is used
    fetch.release.clear()
    context = ("and shoes?", "And shoes?")
    third = await recaller.get("and shoes")
    assert third.missed_budget and third.earlier_context
    assert [r.text for r in third.records] == ["memory for And shoes?"]
    # other words get nothing from it
    assert (await recaller.get("and a hat?")).records == []
    await recaller.aclose()


async def test_failing_store_gives_no_memories_and_no_exception() -> None:
    fetch = ScriptedFetch()
    fetch.fail = ConnectionError("store is down")
    fetch.release.set()
    recaller = Recaller(fetch, budget_s=1.0)
    result = await recaller.get("who am I")
    assert result.records == [] and "store is down" in (result.error or "")
    # a failure is not cached: the next turn tries again
    fetch.fail = None
    again = await recaller.get("who am I")
    assert len(again.records) == 1 and len(fetch.calls) == 2


async def test_interim_transcripts_coalesce_to_the_newest() -> None:
    fetch = ScriptedFetch()
    recaller = Recaller(fetch, budget_s=1.0, max_interim_lookups=2)
    for partial in ("what", "what is", "what is my", "what is my sister's"):
        recaller.prefetch(partial, final=False)
    await asyncio.sleep(0)  # let the look-ups start
    assert fetch.calls == ["what", "what is"]  # two in flight; only the newest waits
    fetch.release.set()
    await recaller.get("what")  # a slot frees up; the newest interim starts
    result = await recaller.get("what is my sister's")
    assert result.prefetched
    assert fetch.calls == ["what", "what is", "what is my sister's"]
    await recaller.aclose()
