"""One identity rule at every door (issue 50): the same awkward identities through the
public API, MCP (over HTTP, with a key for every identity), the operator's commands, the
token endpoint and the spoken path's `attach`. Each door gives the same answer for the same
identity: a refused one is refused everywhere with the same words; an accepted one is
remembered through every door, found, listed and exported by every other, and forgotten
through any door leaves 0 rows in every place of `userdata.PLACES`."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import memory
from memory import api
from memory.admin.cli import main as admin_main
from memory.errors import InvalidIdentity
from memory.types import memory_user_id
from memory.userdata import PLACES, UserData
from memory.web.token_endpoint import BadRequest, token_request
from tests.mcp.test_mcp import _client, _http_server, _text

KEY = "every-door-key-0123456789"
RULE = "user id must not hold control, bidi or zero-width characters"
ACCEPTED = {
    "space": "Bob Smith",
    "long": "x" * 5000,
    "hash-shaped": "lk-<40 hex digits>",
    "chinese": "张伟",
    "emoji": "🦊 fox",
}
REFUSED = {
    "nul": ("bob\x00nul", "U+0000 at 3"),
    "zero-width": ("alice\u200b", "U+200B at 5"),
    "bidi": ("\u202ebob", "U+202E at 0"),
    "escape": ("bob\x1b[2J", "U+001B at 3"),
}


@pytest.fixture
def runtime(store: Any) -> Iterator[Any]:
    before = api.runtime()
    made = api.use(dataclasses.replace(store.settings, recall_budget_ms=10_000), store)
    yield made
    if before is not None:
        api.use(before.settings, before.store, before.retriever)
    else:
        api.forget_runtime()


@pytest.fixture
def admin_env(store: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("MEMORY_DATA_DIR", str(store.settings.data_dir))
    return tmp_path


def _unique(name: str, base: str, user_id: str) -> str:
    """The identity of that shape, this test's own (the store is the suite's)."""
    if name == "hash-shaped":
        return "lk-" + hashlib.sha1(user_id.encode()).hexdigest()
    if name == "long":
        return user_id + "x" * (5000 - len(user_id))
    return f"{base}{user_id}" if name == "chinese" else f"{base} {user_id}"


def _places(store: Any, stored: str) -> dict[str, int]:
    counts = UserData(store, store.settings).counts(stored)
    return {p.name: counts[p.name] for p in PLACES}


async def _admin(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """The operator's command, as typed (in a thread: it runs its own event loop)."""
    code = await asyncio.to_thread(admin_main, args)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("forget_by", ["api", "mcp", "admin"])
async def test_every_door_gives_the_same_answer_for_the_same_identity_and_forget_leaves_nothing(
    store: Any, runtime: Any, admin_env: Path, capsys: pytest.CaptureFixture[str], forget_by: str, user_id: str
) -> None:
    async with _http_server(store, f"{KEY}:*") as url, _client(url, KEY) as mcp:
        for name, base in ACCEPTED.items():
            identity = _unique(name, base, user_id)
            stored = memory_user_id(identity)
            assert stored == identity if name in ("chinese",) else stored.startswith("lk-"), name
            # remembered through each door
            assert (await api.remember(identity, "I keep bees on the roof"))["turns"] == 1, name
            said = await mcp.call_tool("remember", {"user_id": identity, "text": "I keep goats in the barn"})
            assert not said.is_error and json.loads(_text(said))["turns"] == 1, (name, _text(said))
            lines = admin_env / "hens.jsonl"
            lines.write_text(json.dumps({"text": "I keep hens in the yard"}) + "\n")
            code, _, err = await _admin(["import", str(lines), "--user", identity], capsys)
            assert code == 0, (name, err)
            kept = {"I keep bees on the roof", "I keep goats in the barn", "I keep hens in the yard"}

            # listed, found and exported by every door: the same three memories
            assert {r.text for r in await api.memories(identity)} == kept, name
            listed = await mcp.call_tool("list_memories", {"user_id": identity})
            assert {json.loads(line)["note"] for line in _text(listed).splitlines()} == kept, name
            code, out, err = await _admin(["--json", "show", identity], capsys)
            assert code == 0 and all(text in out for text in kept), (name, err)
            assert "I keep goats in the barn" in [r.text for r in await api.recall(identity, "goats")], name
            found = await mcp.call_tool("recall", {"user_id": identity, "query": "hens"})
            assert "I keep hens in the yard" in _text(found), name
            code, out, _ = await _admin(["--json", "search", identity, "bees"], capsys)
            assert code == 0 and "I keep bees on the roof" in out, name
            exported = await api.export_user(identity)
            assert exported["user_id"] == stored and {m["text"] for m in exported["memories"]} == kept, name
            by_mcp = json.loads(_text(await mcp.call_tool("export", {"user_id": identity})))
            assert by_mcp["user_id"] == stored and len(by_mcp["memories"]) == 3, name
            code, out, _ = await _admin(["export", identity], capsys)
            assert code == 0 and json.loads(out)["user_id"] == stored, name
            assert _places(store, stored)["memories"] == 3

            # forgotten through one door: nothing left anywhere, and no door finds anything
            if forget_by == "api":
                assert (await api.forget_user(identity)).complete
            elif forget_by == "mcp":
                gone = await mcp.call_tool("forget", {"user_id": identity})
                assert not gone.is_error and json.loads(_text(gone))["memories"] == 3, _text(gone)
            else:
                code, _, err = await _admin(["forget", identity, "--yes"], capsys)
                assert code == 0, err
            assert _places(store, stored) == {p.name: 0 for p in PLACES}, name
            assert await api.memories(identity) == [] and await api.recall(identity, "goats") == []
            assert _text(await mcp.call_tool("list_memories", {"user_id": identity})) == "(nothing)"


async def test_a_refused_identity_is_refused_by_every_door_in_the_same_words(
    store: Any, runtime: Any, admin_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async with _http_server(store, f"{KEY}:*") as url, _client(url, KEY) as mcp:
        for name, (identity, where) in REFUSED.items():
            words = f"{RULE} ({where})"
            for call in (
                api.remember(identity, "I keep bees"),
                api.recall(identity, "bees"),
                api.memories(identity),
                api.export_user(identity),
                api.forget_user(identity),
                api.import_user([{"text": "I keep bees"}], user_id=identity),
            ):
                with pytest.raises(InvalidIdentity) as caught:
                    await call
                assert str(caught.value) == words, name
            with pytest.raises(InvalidIdentity, match=RULE):
                memory.attach(object(), user_id=identity)  # type: ignore[arg-type]  # the spoken path
            for tool, args in (
                ("remember", {"text": "I keep bees"}),
                ("recall", {"query": "bees"}),
                ("list_memories", {}),
                ("export", {}),
                ("forget", {}),
            ):
                answer = await mcp.call_tool(tool, {"user_id": identity, **args})
                assert answer.is_error and _text(answer).endswith(words), (name, tool, _text(answer))
            lines = admin_env / "one.jsonl"
            lines.write_text(json.dumps({"text": "I keep bees", "user_id": identity}) + "\n")
            for args in (
                ["import", str(lines)],  # the identity named in the file
                ["show", identity],
                ["search", identity, "bees"],
                ["export", identity],
                ["forget", identity, "--yes"],
            ):
                code, _, err = await _admin(args, capsys)
                assert code == 2 and words in err, (name, args, err)
            with pytest.raises(BadRequest) as token:
                token_request({"participant_identity": identity})
            assert str(token.value) == f"participant_identity: {words}", name
