"""Where an idempotent `remember` must still store: the same words after the user was
forgotten (a repeat of a call whose result is gone is not a repeat), and a client's
`request_id` reused for other words (an id names one call, and a call is its words)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from memory.mcp.repeats import Repeats
from tests.conftest import HANG_GUARD_S
from tests.mcp.test_mcp_retries_and_keys import KEY, _client, _served, _text


def test_a_request_id_reused_for_other_words_is_another_call() -> None:
    """A client that numbers its calls per session (1, 2, 3, ...) sends "1" again tomorrow."""
    assert Repeats.key("stdio", "alice", "I keep bees.", "1") != Repeats.key("stdio", "alice", "I moved to Oslo.", "1")
    assert Repeats.key("stdio", "alice", "I keep bees.", "1") == Repeats.key("stdio", "alice", "I keep bees.", "1")


async def test_the_same_words_after_forget_are_stored_again(store: Any, user_id: str) -> None:
    async with _served(store, f"{KEY}:{user_id}") as url, _client(url, {"Authorization": f"Bearer {KEY}"}) as client:
        said = {"user_id": user_id, "text": "My sister is called Anna."}
        assert "repeated" not in json.loads(_text(await client.call_tool("remember", said)))
        forgot = await client.call_tool("forget", {"user_id": user_id})
        assert not forgot.is_error, _text(forgot)
        again = await client.call_tool("remember", said)
        assert not again.is_error and "repeated" not in json.loads(_text(again)), _text(again)
        listed = await client.call_tool("list_memories", {"user_id": user_id})
        assert len(_text(listed).splitlines()) == 1, _text(listed)  # kept again after the forget


async def test_a_retry_waiting_on_a_first_call_that_fails_or_is_cancelled_runs_itself() -> None:
    """The client gave up on its first call (the server cancels it) or the first failed: a
    retry that came meanwhile is a call of its own, not the first's failure."""
    repeats, runs = Repeats(), []
    for ending in ("cancelled", "failed"):
        gate = asyncio.Event()

        async def first(ending: str = ending, gate: asyncio.Event = gate) -> dict[str, int]:
            runs.append(ending)
            await gate.wait()
            raise RuntimeError("store down")

        async def retry() -> dict[str, int]:
            runs.append("retry")
            return {"turns": 1}

        key = Repeats.key("stdio", "alice", f"I keep bees ({ending}).", None)
        one = asyncio.create_task(repeats.once(key, first))
        await asyncio.sleep(0)  # the first is running
        two = asyncio.create_task(repeats.once(key, retry))
        await asyncio.sleep(0)  # the retry waits for it
        if ending == "cancelled":
            one.cancel()
        else:
            gate.set()
        with contextlib.suppress(asyncio.CancelledError, RuntimeError):
            await one
        assert await asyncio.wait_for(two, HANG_GUARD_S) == ({"turns": 1}, False), ending
    assert runs == ["cancelled", "retry", "failed", "retry"]
