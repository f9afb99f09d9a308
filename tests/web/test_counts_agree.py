"""Numbers that agree: the users page, the user's page, the forget confirmation, `memory.admin
show` and `memory.admin export` count one user's calls, messages, summaries, memories and the
rest the same way, under the same names; a call is headed by its day, time and length; a
forget through the page logs that it happened, never whom."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp
import pytest

from memory.admin.cli import main as admin_main
from memory.admin.documents import Admin
from memory.journal.queue import DurableWriteQueue
from memory.storage.archive import ArchivedMessage, archive_for
from memory.storage.contexts import ContextStore
from memory.storage.store import MemoryStore
from memory.types import Turn, now_iso
from tests.web.conftest import AUTH, Web, start_web

# What the user below holds, counted by hand from what is stored.
EXPECTED = {
    "memories": 7,
    "raw_turns": 4,
    "facts": 3,  # Berlin, green tea, and Paris kept as the value Berlin replaced (GATED over time)
    "mem0_history": 8,  # an ADD per raw turn (4); Paris ADD + Berlin UPDATE, the kept Paris's ADD, tea ADD (4)
    "archive": 9,
    "calls": 3,
    "messages": 7,
    "summaries": 2,
    "shared_contexts": 2,
    "densities": 0,  # fewer than 20 memories: no hubness densities computed, none stored
    "spilled": 0,
    "journal": 1,
}


def _ago(minutes: float) -> str:
    return (datetime.now(UTC) - timedelta(minutes=minutes)).isoformat()


def _fill(store: MemoryStore, web: Web, user_id: str) -> None:
    for i in range(4):
        store.add_raw(user_id, f"I repair bicycles, day {i}", metadata={"session_id": "s1", "seq": i})
    for text, slot in (("User lives in Paris", "home_city"), ("User lives in Berlin", "home_city"),
                       ("User likes green tea", "favourite_drink")):  # fmt: skip
        store.upsert_fact(user_id, text, category="personal_facts", slot=slot)
    m = [
        # c1: three messages over twelve minutes and a summary; c2: three and a summary; c3: one.
        ArchivedMessage(f"{user_id}:1", "c1", user_id, "my bike has a flat", "user", _ago(60)),
        ArchivedMessage(f"{user_id}:2", "c1", user_id, "Let's patch it", "assistant", _ago(54)),
        ArchivedMessage(f"{user_id}:3", "c1", user_id, "done, thanks", "user", _ago(48)),
        ArchivedMessage(f"{user_id}:4", "c1", user_id, "A flat was patched.", "summary", _ago(48),
                        covers=(f"{user_id}:1", f"{user_id}:2")),
        ArchivedMessage(f"{user_id}:5", "c2", user_id, "which chain oil?", "user", _ago(30)),
        ArchivedMessage(f"{user_id}:6", "c2", user_id, "A dry lube", "assistant", _ago(29)),
        ArchivedMessage(f"{user_id}:7", "c2", user_id, "ok", "user", _ago(27)),
        ArchivedMessage(f"{user_id}:8", "c2", user_id, "Chain oil advice.", "summary", _ago(27),
                        covers=(f"{user_id}:5",)),
        ArchivedMessage(f"{user_id}:9", "c3", user_id, "hello again", "user", _ago(5)),
    ]  # fmt: skip
    archive_for(store).add(m)
    contexts = ContextStore(store.pool, store.table, 4000)
    contexts.create(user_id, "receptionist", "wants a new saddle")
    contexts.create(user_id, "specialist", "brake pads ordered")
    queue = DurableWriteQueue(web.settings.journal_path, lambda t: None)  # never started: the row waits
    queue.enqueue(Turn(user_id, "a turn on its way", "s9", f"{user_id}:w", now_iso()))


def _counted(html: str, pattern: str) -> dict[str, int]:
    return {name: int(n) for name, n in re.findall(pattern, html, flags=re.S)}


@pytest.fixture
async def web(store: MemoryStore, tmp_path: Path) -> AsyncIterator[Web]:
    # A journal of its own, beside this machine's Mem0 history file (the store's).
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "mem0").symlink_to(store.settings.mem0_dir)
    server = await start_web(store, tmp_path / "data")
    yield server
    await server.runner.cleanup()


async def test_every_page_and_command_counts_a_user_the_same(
    store: MemoryStore,
    user_id: str,
    web: Web,
    http: aiohttp.ClientSession,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    _fill(store, web, user_id)

    async def page(path: str) -> str:
        async with http.get(f"{web.url}{path}", headers=AUTH) as response:
            assert response.status == 200, path
            return await response.text()

    users = await page(f"/?q={user_id}")
    row = re.search(rf'<tr data-user="{user_id}">(.*?)</tr>', users, flags=re.S)
    assert row is not None
    listed = _counted(row.group(1), r'<td class="num" data-count="(\w+)">(\d+)</td>')
    assert listed == {k: EXPECTED[k] for k in ("memories", "raw_turns", "facts", "archive", "calls", "messages",
                                               "summaries")}  # fmt: skip

    user_page = await page(f"/user?id={user_id}")
    assert _counted(user_page, r'data-count="(\w+)"[^>]*><dt>[^<]*</dt><dd>(\d+)</dd>') == EXPECTED
    assert _counted(await page(f"/forget?id={user_id}"), r'<tr data-count="(\w+)"[^>]*><th>[^<]*</th>'
                                                         r'<td class="num">(\d+)</td>') == EXPECTED  # fmt: skip
    assert Admin(store, web.settings).show(user_id)["counts"] == EXPECTED

    monkeypatch.setenv("MEMORY_DATA_DIR", str(web.settings.data_dir))  # the page's journal
    monkeypatch.setenv("MEMORY_DATABASE_URL", store.url)
    assert admin_main(["export", user_id]) == 0
    exported = json.loads(capsys.readouterr().out)
    assert exported["counts"] == EXPECTED
    assert {k: len(exported[k]) for k in ("memories", "archive", "shared_contexts", "journal")} == {
        "memories": 7, "archive": 9, "shared_contexts": 2, "journal": 1}  # fmt: skip

    # Calls headed by when they began and how long they lasted, their counts in words.
    calls = re.findall(r'<article class="archived-call">\s*<h3 title="(\w+)">(.*?)</h3>', user_page, flags=re.S)
    headers = {chat: " ".join(re.sub(r"<[^>]+>", " ", h).split()) for chat, h in calls}
    assert re.fullmatch(r"Call of \d{4}-\d\d-\d\d \d\d:\d\d · 12 minutes 3 messages · 1 summary", headers["c1"])
    assert headers["c3"].endswith("· under a minute 1 message · 0 summaries"), headers
    shown = re.sub(r"<[^>]+>", " ", user_page)
    assert "1 messages" not in shown and not re.search(r"\b[0-9a-f]{32}\b", shown)

    # Forgotten through the page: logged that it happened, not whom.
    caplog.set_level(logging.DEBUG)
    form = {"id": user_id, "confirm": user_id}
    async with http.post(f"{web.url}/forget", data=form, headers=AUTH) as response:
        assert response.status == 200
        done = await response.text()
    assert 'id="nothing-left"' in done
    assert any("forgot a user" in r.getMessage() for r in caplog.records)
    assert not [r.getMessage() for r in caplog.records if user_id in r.getMessage()]
    assert Admin(store, web.settings).counts(user_id) == dict.fromkeys(EXPECTED, 0)
