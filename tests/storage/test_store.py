"""The store on the real embedded Postgres, Mem0 and local embedder."""

from __future__ import annotations

import dataclasses
import logging
import re
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from psycopg.types.json import Jsonb
from psycopg_pool import PoolTimeout

from memory.errors import InvalidIdentity
from memory.settings import load_settings
from memory.storage.locks import locks_table
from memory.storage.store import MemoryStore
from memory.types import ForgottenTurn, InvalidMemoryText, memory_user_id, now_iso, validate_user_id
from tests.conftest import HANG_GUARD_S
from tests.storage.fact_writers import stale_writer_gives_way, two_writers_at_once


def test_raw_write_is_found_again_only_by_its_user(store: MemoryStore, user_id: str) -> None:
    store.add_raw(user_id, "My sister's name is Anna", metadata={"session_id": "s1"})
    hits = store.search(user_id, "what is my sister called?")
    assert [h.text for h in hits] == ["My sister's name is Anna"]
    assert hits[0].metadata["session_id"] == "s1"
    assert store.search(user_id + "-other", "what is my sister called?") == []


def test_replayed_write_id_is_not_stored_twice(store: MemoryStore, user_id: str) -> None:
    first = store.add_raw(user_id, "I like green tea", write_id="turn-1")
    again = store.add_raw(user_id, "I like green tea", write_id="turn-1")
    assert (first.event, again.event) == ("ADD", "NOOP")
    assert again.id == first.id
    assert len(store.list_user(user_id)) == 1


def test_fact_for_same_slot_supersedes_and_keeps_history(store: MemoryStore, user_id: str) -> None:
    paris = store.upsert_fact(user_id, "User lives in Paris", category="personal_facts", slot="home_city")
    berlin = store.upsert_fact(user_id, "User lives in Berlin", category="personal_facts", slot="home_city")
    assert berlin.event == "UPDATE" and berlin.id == paris.id
    texts = [r.text for r in store.list_user(user_id, past=False)]
    assert texts == ["User lives in Berlin"]
    # Paris is kept as what held before, for questions about the past.
    was = [r for r in store.list_user(user_id) if r.id != paris.id]
    assert [(r.text, r.metadata["superseded_by"], r.metadata["was_slot"]) for r in was] == [
        ("User lives in Paris", paris.id, "home_city")
    ]
    history = [(h["old_memory"], h["new_memory"], h["event"]) for h in store.history(paris.id)]
    assert history == [(None, "User lives in Paris", "ADD"), ("User lives in Paris", "User lives in Berlin", "UPDATE")]


def test_restated_fact_is_a_noop(store: MemoryStore, user_id: str) -> None:
    store.upsert_fact(user_id, "User's sister is Anna", category="relationships", slot="sister_name")
    again = store.upsert_fact(user_id, "user's sister is anna.", category="relationships", slot=None)
    assert again.event == "NOOP"
    assert len(store.list_user(user_id)) == 1


def test_category_filter_limits_search(store: MemoryStore, user_id: str) -> None:
    store.add_raw(user_id, "My favourite colour is blue")
    store.upsert_fact(user_id, "User likes blue", category="preferences", slot="favorite_color")
    hits = store.search(user_id, "favourite colour", categories=["preferences"])
    assert [h.text for h in hits] == ["User likes blue"]
    assert hits[0].category == "preferences"


def test_chinese_memory_is_found_by_chinese_question(store: MemoryStore, user_id: str) -> None:
    store.upsert_fact(user_id, "用户的妹妹叫小雪", category="relationships", slot="sister_name")
    store.upsert_fact(user_id, "用户喜欢蓝色", category="preferences", slot="favorite_color")
    hits = store.search(user_id, "我妹妹叫什么名字？", top_k=1)
    assert hits[0].text == "用户的妹妹叫小雪"


@pytest.mark.parametrize("bad", ["", "   ", "x" * 5000])
def test_bad_text_is_refused_with_a_reason_and_nothing_is_lost(store: MemoryStore, user_id: str, bad: str) -> None:
    store.add_raw(user_id, "I have a cat called Miso")
    with pytest.raises(InvalidMemoryText, match="empty|limit"):
        store.add_raw(user_id, bad)
    assert [r.text for r in store.list_user(user_id)] == ["I have a cat called Miso"]


def test_unknown_category_is_refused_by_name(store: MemoryStore, user_id: str) -> None:
    with pytest.raises(InvalidMemoryText, match="'gossip'"):
        store.upsert_fact(user_id, "User heard a rumour", category="gossip")


def history_rows_mentioning(store: MemoryStore, needle: str) -> list[tuple]:
    """Every row of Mem0's history file, in any table, with `needle` in any column."""
    with closing(sqlite3.connect(store.settings.mem0_dir / "history.db")) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return [row for t in tables for row in conn.execute(f"SELECT * FROM {t}") if needle in repr(row)]


def test_forget_user_removes_everything_searchable(store: MemoryStore, user_id: str) -> None:
    other = user_id + "-other"
    store.add_raw(user_id, "My PIN hint is my dog's birthday FORGET-ME-1")
    store.upsert_fact(user_id, "User's dog is Rex FORGET-ME-2", category="relationships", slot="dog_name")
    store.upsert_fact(user_id, "User's dog is Bello FORGET-ME-3", category="relationships", slot="dog_name")
    kept = store.add_raw(other, "My dog is called Rex too")
    assert history_rows_mentioning(store, "FORGET-ME-")  # Mem0 keeps every old and new text
    assert store.delete_user(user_id) == 3  # the turn, the dog's name now, and the name it replaced
    assert store.list_user(user_id) == []
    assert store.search(user_id, "dog") == []
    # Nothing of the user's text is left in Mem0's history (it logs deletes with the text).
    assert history_rows_mentioning(store, "FORGET-ME-") == []
    # Another user's memory and its history are untouched.
    assert [r.text for r in store.list_user(other)] == ["My dog is called Rex too"]
    assert [h["event"] for h in store.history(kept.id)] == ["ADD"]


def test_a_forget_leaves_no_readable_text_in_mem0s_history_file(store: MemoryStore, user_id: str) -> None:
    # Mem0's history file keeps every text; a forget purges it. Debian's SQLite zeroes freed
    # pages by default, SQLite's own default does not: this connection is made to start so.
    db = store.mem0.db
    with db._lock:
        (was,) = db.connection.execute("PRAGMA secure_delete").fetchone()
        db.connection.execute("PRAGMA secure_delete = OFF")
    try:
        store.add_raw(user_id, "My locker combination is HISTORY-SECRET-7")
        store.upsert_fact(user_id, "User's locker is HISTORY-SECRET-8", category="personal_facts", slot="locker")
        assert store.delete_user(user_id) == 2
        assert b"HISTORY-SECRET-" not in (store.settings.mem0_dir / "history.db").read_bytes()
    finally:
        with db._lock:
            db.connection.execute(f"PRAGMA secure_delete = {int(was)}")


def test_forget_user_removes_the_entities_mem0_linked(store: MemoryStore, user_id: str) -> None:
    # Mem0 links entities of an updated fact in `<table>_entities` when it can extract
    # them (with spaCy installed); its rows carry the user id and the entity's text.
    entities = f"{store.table}_entities"
    with store.pool.connection() as conn:
        conn.execute(f"CREATE TABLE IF NOT EXISTS {entities} (id UUID PRIMARY KEY, vector vector(384), payload JSONB)")
        for owner in (user_id, user_id + "-other"):
            conn.execute(
                f"INSERT INTO {entities} (id, payload) VALUES (gen_random_uuid(), %s)",
                [Jsonb({"data": "Berlin", "entity_type": "LOCATION", "user_id": owner})],
            )
    store.delete_user(user_id)
    with store.pool.connection() as conn:
        owners = [r[0] for r in conn.execute(f"SELECT payload->>'user_id' FROM {entities}").fetchall()]
    assert user_id not in owners and user_id + "-other" in owners


def test_turns_said_before_forget_are_refused_and_later_ones_kept(
    store: MemoryStore, user_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = now_iso()
    store.add_raw(user_id, "I live at 12 Main St")
    store.delete_user(user_id)
    # A turn said before the request, arriving late (a journal on another machine): refused
    # before anything is written (not written and taken back: for that moment it could be
    # recalled, and Mem0 logs it in its history).
    writes: list[str] = []
    monkeypatch.setattr(store.mem0, "add", lambda text, **kw: writes.append(text))
    monkeypatch.setattr(store.mem0, "update", lambda memory_id, text, **kw: writes.append(text))
    with pytest.raises(ForgottenTurn, match="asked to be forgotten"):
        store.add_raw(user_id, "My phone number is 555-0100", said_at=before, write_id="late-1")
    with pytest.raises(ForgottenTurn):
        store.upsert_fact(user_id, "User's phone is 555-0100", category="personal_facts", said_at=before)
    assert writes == []
    monkeypatch.undo()
    assert store.list_user(user_id) == []
    # What the user says afterwards is remembered again.
    later = (datetime.now(UTC) + timedelta(seconds=1)).isoformat()
    store.add_raw(user_id, "I like jazz", said_at=later)
    assert [r.text for r in store.list_user(user_id)] == ["I like jazz"]


def test_a_write_racing_the_forget_takes_itself_back(store: MemoryStore, user_id: str, monkeypatch) -> None:
    said_at = now_iso()
    real_add = store.mem0.add

    def forget_then_add(*args, **kwargs):  # the forget lands between the check and the write
        store.delete_user(user_id)
        return real_add(*args, **kwargs)

    monkeypatch.setattr(store.mem0, "add", forget_then_add)
    with pytest.raises(ForgottenTurn):
        store.add_raw(user_id, "My address is SECRET-RACE", said_at=said_at)
    monkeypatch.undo()
    assert store.list_user(user_id) == []
    assert history_rows_mentioning(store, "SECRET-RACE") == []


def test_a_change_racing_the_forget_takes_back_the_value_it_set_aside(
    store: MemoryStore, user_id: str, monkeypatch
) -> None:
    store.upsert_fact(user_id, "User lives in OLD-CITY-RACE", category="personal_facts", slot="home_city")
    said_at = now_iso()  # said before the forget below
    real_add = store.mem0.add

    def forget_then_add(*args, **kwargs):  # the forget lands as the past value is written
        store.delete_user(user_id)
        return real_add(*args, **kwargs)

    monkeypatch.setattr(store.mem0, "add", forget_then_add)
    with pytest.raises(ForgottenTurn):
        store.upsert_fact(user_id, "User lives in NEW-CITY-RACE", category="personal_facts", slot="home_city",
                          said_at=said_at)  # fmt: skip
    monkeypatch.undo()
    assert store.list_user(user_id) == []
    assert history_rows_mentioning(store, "CITY-RACE") == []


def test_a_forget_between_the_row_and_its_history_entry_leaves_no_history(
    store: MemoryStore, user_id: str, monkeypatch
) -> None:
    # Mem0 inserts the row, then its history entry: a forget in between took the row
    # and purged the history before the entry was written.
    said_at = now_iso()
    real_history = store.mem0.db.add_history

    def forget_then_record(*args, **kwargs):
        store.delete_user(user_id)
        return real_history(*args, **kwargs)

    monkeypatch.setattr(store.mem0.db, "add_history", forget_then_record)
    with pytest.raises(ForgottenTurn):
        store.add_raw(user_id, "My locker code word is PLATYPUS", said_at=said_at)
    monkeypatch.undo()
    assert store.list_user(user_id) == []
    assert history_rows_mentioning(store, "PLATYPUS") == []


@pytest.mark.parametrize(
    ("bad", "named"),
    [
        ("bob\x00", "NUL"),
        ("u" * 1025, "limit is 1024"),
        ("用" * 342, "1026 bytes"),
        ("  ", "empty"),
        ("alice ", "whitespace"),
    ],
    ids=["nul", "long", "long-in-utf8", "blank", "whitespace"],
)
def test_bad_user_id_is_refused_by_name_and_nothing_stored_is_lost(
    store: MemoryStore, user_id: str, bad: str, named: str
) -> None:
    store.add_raw(user_id, "I have a cat called Miso")
    with pytest.raises(InvalidMemoryText, match=named):
        store.add_raw(bad, "I like tea")
    with pytest.raises(InvalidMemoryText, match=named):
        store.upsert_fact(bad, "User likes tea", category="preferences")
    assert [r.text for r in store.list_user(user_id)] == ["I have a cat called Miso"]


def test_odd_characters_are_stored_cleaned_not_refused(store: MemoryStore, user_id: str) -> None:
    # A NUL or a lone surrogate in a transcript would make Postgres refuse the row on
    # every retry; the text is stored without them.
    store.add_raw(user_id, "My locker code is 12\x0034", metadata={"source_text": "ok"})
    store.upsert_fact(user_id, "User's locker is number 7\ud800", category="personal_facts", slot="locker")
    assert sorted(r.text for r in store.list_user(user_id)) == ["My locker code is 1234", "User's locker is number 7?"]


def test_a_value_the_database_refuses_is_named_not_retried(store: MemoryStore, user_id: str) -> None:
    with pytest.raises(InvalidMemoryText, match="database refused"):
        store.add_raw(user_id, "I like tea", metadata={"source_text": "bad\x00"})
    assert store.list_user(user_id) == []


def test_two_writers_of_one_slot_at_once_leave_one_value(store: MemoryStore, user_id: str) -> None:
    # Two sessions of the user write the same slot at the same moment. Without a lock both
    # would find it empty and both add; here each waits at the look-up until the other is
    # there too or waits for the lock (tests/storage/fact_writers.py), so they always meet.
    results, most_inside = two_writers_at_once(store, user_id, ("Anna", "Maria"))
    assert most_inside == 1  # the lock kept the second writer out of the first one's look-up and write
    assert sorted(r.event for r in results) == ["ADD", "UPDATE"]
    assert len(store.list_user(user_id, past=False)) == 1


def test_a_fact_write_that_fails_gives_the_users_lock_back(
    store: MemoryStore, user_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A write that raises (the embedder or Mem0 failing) must not keep the user's lock:
    # kept, every later fact of that user waited for its 60 s lease, then failed.
    def broken(text: str, form: object) -> Iterator[None]:
        raise RuntimeError("the embedder failed")

    monkeypatch.setattr(store, "_write_vector", broken)
    with pytest.raises(RuntimeError, match="the embedder failed"):
        store.upsert_fact(user_id, "User's sister is Anna", category="relationships", slot="sister")
    monkeypatch.undo()
    with store.pool.connection() as conn:
        held = conn.execute(f"SELECT holder FROM {locks_table(store.table)} WHERE key = %s",
                            [f"memory-facts:{user_id}"]).fetchall()  # fmt: skip
    assert held == []  # given back as the write failed
    tried = store.locks.attempts
    assert store.upsert_fact(user_id, "User's sister is Anna", category="relationships", slot="sister").event == "ADD"
    assert store.locks.attempts == tried  # the next write found the lock free at once


def test_the_pool_holds_as_many_connections_as_memory_db_max_connections_says(
    store: MemoryStore, tmp_path: Path
) -> None:
    # MEMORY_DB_MAX_CONNECTIONS sizes each process's pool (docs/scaling.md): 5 here, not the default 3.
    env = {"MEMORY_DATA_DIR": str(tmp_path), "MEMORY_DATABASE_URL": store.url, "MEMORY_DB_MAX_CONNECTIONS": "5"}
    sized = MemoryStore.open(load_settings(env, dotenv=False), load_mem0=False)
    held = []
    try:
        held = [sized.pool.getconn(timeout=HANG_GUARD_S) for _ in range(5)]  # five at once
        with pytest.raises(PoolTimeout):
            sized.pool.getconn(timeout=0.2)  # and not a sixth: nobody gives one back
    finally:
        for conn in held:
            sized.pool.putconn(conn)
        sized.close()


def test_an_older_statement_arriving_late_does_not_undo_a_newer_one(store: MemoryStore, user_id: str) -> None:
    earlier = now_iso()
    later = (datetime.now(UTC) + timedelta(seconds=5)).isoformat()
    meta = {"timestamp": later}
    store.upsert_fact(user_id, "User's sister is Maria", category="relationships", slot="sister",
                      metadata=meta, said_at=later)  # fmt: skip
    # Session 1's "Anna", said first, written last (its journal row was replayed).
    late = store.upsert_fact(user_id, "User's sister is Anna", category="relationships", slot="sister",
                             metadata={"timestamp": earlier}, said_at=earlier)  # fmt: skip
    assert late.event == "NOOP"
    assert [r.text for r in store.list_user(user_id)] == ["User's sister is Maria"]  # and no past value of it
    # A newer statement still supersedes.
    newest = (datetime.now(UTC) + timedelta(seconds=10)).isoformat()
    store.upsert_fact(user_id, "User's sister is Lena", category="relationships", slot="sister",
                      metadata={"timestamp": newest}, said_at=newest)  # fmt: skip
    assert [r.text for r in store.list_user(user_id, past=False)] == ["User's sister is Lena"]


@pytest.mark.parametrize("slot_held", [True, False], ids=["update", "add"])
def test_a_writer_stalled_past_its_lease_never_overwrites_a_newer_fact(
    store: MemoryStore, user_id: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, slot_held: bool
) -> None:
    """Issue 37: a writer that stalled inside the user's lock past its 60 s lease woke up
    and wrote its older value over the newer one written meanwhile. Its write is refused
    now, and looked at again under the lock: the newer value stays, the older one is
    dropped with a line saying so. Without the fence the slot said Anna (update), or
    held Anna and Maria at once (add)."""
    with caplog.at_level(logging.WARNING, logger="memory.storage.store"):
        anna, maria, now, past = stale_writer_gives_way(store, user_id, monkeypatch, slot_held=slot_held)
    assert now == ["User's sister is Maria"]
    # Sofia's span ended once, by Maria: the refused change kept no past value of its own
    assert past == (["User's sister is Sofia"] if slot_held else [])
    assert not any({"lock_key", "lock_holder"} & set(m.metadata) for m in store.list_user(user_id))  # not kept
    assert maria.event == ("UPDATE" if slot_held else "ADD")
    assert anna.event == "NOOP"  # looked at again: an older statement than the one stored
    refused = [r.getMessage() for r in caplog.records if "was refused" in r.getMessage()]
    assert len(refused) == 1 and user_id in refused[0] and "another writer took it" in refused[0], refused


def test_a_forget_run_on_one_machine_reaches_another_machines_history_at_its_next_start(
    store: MemoryStore, user_id: str, tmp_path
) -> None:
    # Two machines of a fleet share the database, each with its own Mem0 history file.
    other = dataclasses.replace(store.settings, data_dir=tmp_path, database_url=store.url)
    machine_b = MemoryStore.open(other)
    try:
        machine_b.add_raw(user_id, "My PIN is FLEET-SECRET-1")
    finally:
        machine_b.close()
    assert store.delete_user(user_id) == 1  # the operator runs the forget on machine A

    def b_history() -> list[tuple]:
        with closing(sqlite3.connect(other.mem0_dir / "history.db")) as conn:
            return [row for row in conn.execute("SELECT * FROM history") if "FLEET-SECRET" in repr(row)]

    assert b_history()  # machine B's file is out of A's reach...
    MemoryStore.open(other).close()  # ...until B's next worker start
    assert b_history() == []


def test_a_write_that_landed_after_the_forget_but_could_not_undo_itself_goes_on_its_retry(
    store: MemoryStore, user_id: str, monkeypatch
) -> None:
    said_at = now_iso()
    real_add = store.mem0.add

    def forget_then_add(*args, **kwargs):
        store.delete_user(user_id)
        return real_add(*args, **kwargs)

    def connection_lost(*args, **kwargs):
        raise psycopg.OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(store.mem0, "add", forget_then_add)
    monkeypatch.setattr(store, "_undo_if_forgotten", connection_lost)
    with pytest.raises(psycopg.OperationalError):  # transient: the write queue retries it
        store.add_raw(user_id, "My address is UNDO-GAP", said_at=said_at, write_id="turn-9")
    monkeypatch.undo()
    assert [r.text for r in store.list_user(user_id)] == ["My address is UNDO-GAP"]
    with pytest.raises(ForgottenTurn):  # the retry is refused, and takes the row with it
        store.add_raw(user_id, "My address is UNDO-GAP", said_at=said_at, write_id="turn-9")
    assert store.list_user(user_id) == []
    assert history_rows_mentioning(store, "UNDO-GAP") == []


def test_memory_text_stays_out_of_the_logs(store: MemoryStore, user_id: str, caplog) -> None:
    caplog.set_level(logging.INFO)  # LiveKit's CLI runs the worker's root logger at INFO
    store.upsert_fact(user_id, "User lives in LOGGED-CITY-A", category="personal_facts", slot="home")
    store.upsert_fact(user_id, "User lives in LOGGED-CITY-B", category="personal_facts", slot="home")
    assert [r.name for r in caplog.records if "LOGGED-CITY" in r.getMessage()] == []


def test_every_identity_maps_to_an_id_the_store_keeps_and_no_two_collide() -> None:
    odd = ["alice ", " alice", "John Smith", "u" * 2000, "Bob  Smith"]
    ids = [memory_user_id(i) for i in odd]
    assert all(validate_user_id(i) == i for i in ids)  # each one the store accepts as it is
    assert len(set(ids)) == len(odd) and "alice" not in ids  # distinct, and never another's id
    assert memory_user_id("alice") == "alice" and memory_user_id("用户-42") == "用户-42"  # the rest unchanged
    with pytest.raises(InvalidIdentity, match="empty"):
        memory_user_id("   ")
    # A NUL, a line break: refused by the identity rule (issue 50), never kept as a look-alike.
    for refused, where in (("bob\x00", "U+0000 at 3"), ("line\nbreak", "U+000A at 4")):
        with pytest.raises(InvalidIdentity, match=re.escape(f"zero-width characters ({where})")):
            memory_user_id(refused)


def test_an_identity_shaped_like_a_hashed_one_is_not_given_its_memories(store: MemoryStore, user_id: str) -> None:
    victim = memory_user_id(f"{user_id} Smith")  # hashed: it has a space
    store.add_raw(victim, "My home alarm code is due for a change")
    impostor = memory_user_id(victim)  # a participant who took that hash as identity
    assert impostor != victim
    assert store.list_user(impostor) == []
    assert memory_user_id("lk-guest-7") == "lk-guest-7"  # other "lk-" identities unchanged


def test_mem0_telemetry_is_off_whenever_the_store_loads_mem0(store: MemoryStore, tmp_path: Path) -> None:
    # With telemetry on, Mem0 opens a second store and calls the network on every add. It
    # reads the switch once, when it is imported; the store loads it only through
    # `settings.tell_libraries`, so an operator's environment without the variable is safe.
    import os
    import subprocess
    import sys

    probe = (
        "import sys; from memory.settings import load_settings; from memory.storage.store import MemoryStore; "
        "s = MemoryStore.open(load_settings({'MEMORY_DATABASE_URL': sys.argv[1], 'MEMORY_DATA_DIR': sys.argv[2], "
        f"'MEMORY_COLLECTION': '{store.settings.collection}'}}, dotenv=False)); "
        "import mem0.memory.telemetry as t; print(t.MEM0_TELEMETRY); s.close()"
    )
    env = {k: v for k, v in os.environ.items() if k != "MEM0_TELEMETRY"}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])  # cwd: away from any .env
    run = subprocess.run(
        [sys.executable, "-c", probe, store.url, str(tmp_path)],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=HANG_GUARD_S,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip().splitlines()[-1] == "False"
