"""Where an idempotent `remember` must still store: the same words after the user was
forgotten (a repeat of a call whose result is gone is not a repeat), and a client's
`request_id` reused for other words (an id names one call, and a call is its words)."""

from __future__ import annotations

import json
from typing import Any

from memory.mcp.repeats import Repeats
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
