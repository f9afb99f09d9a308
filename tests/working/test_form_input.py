"""Issue 30, findings 1 and 2: what a form brings in passes the same redaction as a spoken
turn before it is kept, journaled, sent to the extraction model or stored (each value,
list items included: a card typed in four boxes), and a payload too deep or too large is
refused with its documented code before any heavy work, parsed off the event loop."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import pytest
from livekit.rtc.rpc import RpcError

from harness.scripted import LLMRequest
from memory.settings import MemoryMode
from memory.storage.store import MemoryStore
from memory.working import workspace as workspace_mod
from memory.working.forms import FormError, parse_form
from tests.conftest import wait_until
from tests.working.test_working_memory import call, working_block

SECRETS = ["Quokka88!", "4111", "4711", "123-45-6789", "Fluffy", "3704 0044", "hunter2"]
FORM = {
    "title": "Profile settings",
    "fields": {
        "password": "Quokka88!",
        "card": ["4111", "1111", "1111", "1111"],  # typed in four boxes
        "PIN": 4711,
        "ssn": "123-45-6789",
        "security answer": "Fluffy",
        "notes": "my IBAN is DE89 3704 0044 0532 0130 00, and use hunter2 as the password",
        "theme": "dark",
        "lucky numbers": [7, 13],
    },
}


def journal_bytes(path: Path) -> bytes:
    """The journal as it is on disk, with its write-ahead log."""
    return b"".join(p.read_bytes() for p in (path, path.with_name(path.name + "-wal")) if p.exists())


def journal_holds(secret: str, journaled: bytes) -> bool:
    """Would a leak of `secret` be in these pages? A journaled turn is UTF-8 JSON text, so a
    leak is the secret as a whole token inside a run of text (`strings`), not four digits
    anywhere in binary pages (page numbers, rowids and timestamps hold any four digits by
    chance): a digit or letter either side is another token."""
    token = re.compile(rb"(?<![0-9A-Za-z])" + re.escape(secret.encode()) + rb"(?![0-9A-Za-z])")
    return any(token.search(run) for run in re.findall(rb"[\x20-\x7e\x80-\xff]{12,}", journaled))


async def test_a_durable_forms_secrets_reach_neither_journal_nor_model_nor_store(
    store: MemoryStore, user_id: str
) -> None:
    # Before: 12 of 12 secrets stayed in write_queue.sqlite3 and its WAL; the card typed in
    # four boxes (joined with ", ") and the security answer reached the model and the store.
    said: list[str] = []

    def extract(request: LLMRequest) -> str:
        said.append(json.dumps([t for _, t in request.messages], ensure_ascii=False))
        return json.dumps({"facts": [{"text": "User prefers the dark theme", "category": "preferences",
                                      "slot": "theme"}]})  # fmt: skip

    from harness.scripted import RecordingLLM

    async with call(store, user_id, mode=MemoryMode.GATED, extraction=RecordingLLM(extract)) as c:
        answer = await c.submit(FORM)
        assert answer["key"] == "hitl_Profile settings"
        assert {"password", "card_number", "iban", "field"} <= set(answer["redacted"])
        journaled = journal_bytes(c.memory.queue.path)
        assert await c.memory.drain(15.0)
        block = working_block((await c.harness.user_says("what did I fill in?")).requests[0])
        journaled += journal_bytes(c.memory.queue.path)
    stored = " ".join(m.text for m in store.list_user(c.memory.user_id))
    assert said and stored == "User prefers the dark theme"
    for secret in SECRETS:
        assert not journal_holds(secret, journaled), secret
        assert all(secret not in s for s in said), secret
        assert secret not in block, secret
    assert '"theme":"dark"' in block and '"lucky numbers":[7,13]' in block  # the rest is kept as it was


def test_a_secret_in_a_journaled_turn_is_found_and_digits_in_binary_pages_are_not() -> None:
    turn = json.dumps({"text": "card: 4111, 1111, 1111, 1111", "user_id": "u"}).encode()
    assert journal_holds("4111", b"\x00\x01" + turn + b"\x00")
    assert journal_holds("Quokka88!", b"\x07" + b'{"text": "my password is Quokka88!"}')
    assert not journal_holds("4111", b"\x00\x134111\x02\x00")  # a page's bytes, not text
    assert not journal_holds("4111", b'{"created_at": 1764111872.25, "seq": 3}')  # inside a number


async def test_a_deeply_nested_form_is_refused_with_2400_and_changes_nothing(store: MemoryStore, user_id: str) -> None:
    # Before: RecursionError in parse_form, and the frontend got 1500 (application error).
    deep = '{"title": "x", "fields": {"a": ' + "[" * 2000 + "1" + "]" * 2000 + "}}"
    async with call(store, user_id) as c:
        await c.submit({"title": "行程安排", "fields": {"destination": "北京"}})
        before = c.workspace.forms.variables
        with pytest.raises(RpcError) as err:
            await c.submit(deep)
        assert err.value.code == 2400 and "nested" in err.value.message and "levels" in err.value.message
        assert c.workspace.forms.variables == before


async def test_a_huge_form_is_refused_with_2413_before_it_is_parsed(
    store: MemoryStore, user_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: a 1 MB value was parsed, quoted character by character and only then refused
    # (2.2 s on the event loop of a busy machine).
    parsed: list[str] = []
    real_parse = workspace_mod.parse_form
    monkeypatch.setattr(workspace_mod, "parse_form", lambda s, *a: parsed.append(s) or real_parse(s, *a))
    async with call(store, user_id) as c:
        with pytest.raises(RpcError) as err:
            await c.submit({"title": "notes", "fields": {"text": "x" * 1_000_000}})
        assert err.value.code == 2413 and "MEMORY_WORKING_MAX_CHARS" in err.value.message
        assert parsed == []  # refused on its size alone
        assert c.workspace.forms.variables == {}


def _nested(levels: int) -> str:
    """A form whose arrays and objects nest `levels` deep (the payload and its fields are two)."""
    return '{"title": "x", "fields": {"a": ' + "[" * (levels - 2) + "1" + "]" * (levels - 2) + "}}"


def test_the_nesting_bound_lets_8_levels_through_and_refuses_9() -> None:
    # The documented bound (docs/working-memory.md): 8 levels. At 8 the scan lets it through
    # (the schema then refuses a list in a list); at 9 the scan refuses it, unparsed.
    with pytest.raises(FormError) as at_limit:
        parse_form(_nested(8), 2000)
    assert at_limit.value.code == 2400 and "nested" not in str(at_limit.value), str(at_limit.value)
    with pytest.raises(FormError) as over:
        parse_form(_nested(9), 2000)
    assert over.value.code == 2400 and "nested 9 levels deep" in str(over.value)


def test_the_size_bound_reads_16_kib_and_refuses_one_byte_more() -> None:
    # 16 KiB (16,384 bytes) is read for a working memory of 2,000 characters, the default
    # MEMORY_WORKING_MAX_CHARS; one byte more is refused with 2413 before it is read.
    form = '{"title": "x", "fields": {"a": "b"}}'
    at_limit = form + " " * (16 * 1024 - len(form))
    assert len(at_limit.encode()) == 16_384
    assert parse_form(at_limit, 2000).fields == {"a": "b"}
    with pytest.raises(FormError) as over:
        parse_form(at_limit + " ", 2000)
    assert over.value.code == 2413 and "16384 bytes" in str(over.value)


async def test_a_form_is_parsed_off_the_event_loop(
    store: MemoryStore, user_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: list[int] = []
    real_parse = workspace_mod.parse_form
    monkeypatch.setattr(
        workspace_mod, "parse_form", lambda s, *a: threads.append(threading.get_ident()) or real_parse(s, *a)
    )
    async with call(store, user_id) as c:
        await c.submit({"title": "行程安排", "fields": {"destination": "北京"}})
        await wait_until(lambda: bool(threads), what="the form to be parsed")
    assert threads and threading.main_thread().ident not in threads
