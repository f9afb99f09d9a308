"""The durable write queue against the real store: outages, kills, hangs, bad input, duplicates.

Every test writes through the real Mem0 store on the embedded Postgres and
checks what is in it afterwards. Outages and hangs are simulated in the
handler (a flag, an await that never ends), not waited out; the tests wait on
conditions with generous timeouts and assert on time only with wide bounds.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import re
import signal
import sqlite3
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from contextlib import closing
from pathlib import Path

import psycopg
import pytest

from memory.journal.codec import decode_turn, encode_turn
from memory.journal.consumer import MAX_TURN_FAILURES
from memory.journal.operator import purge_user
from memory.journal.queue import DurableWriteQueue
from memory.settings import MemoryMode
from memory.storage.store import MemoryStore
from memory.types import InvalidMemoryText, Turn, now_iso
from tests.conftest import HANG_GUARD_S, make_service, scripted_extraction, wait_until

ROOT = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).resolve().parent / "write_queue_child.py"


def make_turn(user_id: str, text: str) -> Turn:
    return Turn(
        user_id=user_id,
        text=text,
        session_id="session-1",
        turn_id=f"turn-{uuid.uuid4().hex[:12]}",
        created_at=now_iso(),
        context=("assistant: how can I help?",),
    )


async def write_all(queue: DurableWriteQueue, turns: Iterable[Turn]) -> None:
    """Journal the turns, run the queue until all are written (bounded), and close it."""
    for turn in turns:
        queue.enqueue(turn)
    queue.start()
    try:
        assert await queue.drain(15.0) is True
    finally:
        await queue.aclose(1.0)


def gauge(name: str) -> float:
    """A memory metric's value as Prometheus would scrape it from this process."""
    from prometheus_client import REGISTRY

    return sum(s.value for m in REGISTRY.collect() for s in m.samples if s.name == name)


def journal_rows(path: Path) -> list[tuple]:
    """The journal as another process sees it: (turn_id, state, attempts, owner_pid, lease_until)."""
    with closing(sqlite3.connect(path)) as conn:
        return conn.execute(
            "SELECT turn_id, state, attempts, owner_pid, lease_until FROM pending_writes ORDER BY seq"
        ).fetchall()


def stored_write_ids(store: MemoryStore, user_id: str) -> Counter[str]:
    """How many rows the real store holds per write id (turn id) for the user."""
    return Counter(r.metadata.get("write_id") for r in store.list_user(user_id))


def counting(handler: Callable, calls: Counter[str]) -> Callable:
    async def wrapped(turn: Turn) -> object:
        calls[turn.turn_id] += 1
        return await handler(turn)

    return wrapped


# --------------------------------------------------------------------------- 1
async def kill_when_ready(proc: asyncio.subprocess.Process, err_path: Path) -> None:
    """Kill -9 the child once it prints "ready" (its turns are on disk), as the OOM killer
    would; its stderr is shown if it never gets there."""
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), timeout=HANG_GUARD_S)
        assert line.strip() == b"ready", err_path.read_text()[-3000:]
        proc.send_signal(signal.SIGKILL)
        await asyncio.wait_for(proc.wait(), timeout=HANG_GUARD_S)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_store_outage_mid_session_loses_no_write(
    tmp_path: Path, store: MemoryStore, user_id: str, caplog
) -> None:
    caplog.set_level(logging.INFO, logger="memory.journal.queue")
    service = make_service(store, MemoryMode.NORMAL)
    outage = True
    calls: Counter[str] = Counter()
    failures = [
        ConnectionError("connection refused"),
        psycopg.OperationalError("server closed the connection unexpectedly"),
    ]

    async def handler(turn: Turn) -> object:
        calls[turn.turn_id] += 1
        if outage:
            raise failures[sum(calls.values()) % 2]
        return await service.remember(turn)

    retries_before = gauge("memory_write_retries_total")
    journal = tmp_path / "journal.sqlite3"
    # A small cap stands in for the default 5 s: after 30 failures an uncapped
    # backoff would be 0.002 * 2**29 s (about 12 days) and recovery would never come.
    queue = DurableWriteQueue(journal, handler, base_backoff_s=0.002, max_backoff_s=0.02)
    queue.start()
    turns = [make_turn(user_id, f"Outage note {i}: my desk is number {40 + i}") for i in range(5)]
    try:
        for turn in turns[:2]:
            queue.enqueue(turn)
        await wait_until(lambda: queue.retried >= 3, what="first retries")
        for turn in turns[2:]:  # the session goes on during the outage
            queue.enqueue(turn)
        await wait_until(lambda: queue.retried >= 30, what="a long outage's retries")

        rows = journal_rows(journal)
        assert [r[0] for r in rows] == [t.turn_id for t in turns]  # on disk, in order
        assert {r[1] for r in rows} == {"pending"}
        assert rows[0][2] >= 29  # attempts recorded on the head row
        assert queue.pending_count() == len(turns)
        assert gauge("memory_write_queue_pending") == len(turns)  # the outage shows on the metrics
        assert gauge("memory_write_retries_total") >= retries_before + 30
        # Later turns wait behind the head: one attempt per backoff, not one per queued turn.
        assert set(calls) == {turns[0].turn_id}
        assert store.list_user(user_id) == []
        # Ending a session during the outage is bounded and does not raise.
        assert await queue.drain(0.1) is False

        outage = False
        # Prompt: the backoff is capped (uncapped, the next attempt would be days away).
        assert all(queue.backoff_delay(n) <= queue.max_backoff_s for n in range(1, 64))
        assert await queue.drain(10.0) is True
    finally:
        await queue.aclose(1.0)

    assert stored_write_ids(store, user_id) == Counter({t.turn_id: 1 for t in turns})
    assert sorted(r.text for r in store.list_user(user_id)) == sorted(t.text for t in turns)
    assert (queue.written, queue.dead_lettered) == (len(turns), 0)
    assert queue.retried >= 30
    assert journal_rows(journal) == [] and queue.pending_count() == 0
    assert gauge("memory_write_queue_pending") == 0
    retry_logs = [r.getMessage() for r in caplog.records if r.name == "memory.journal.queue"]
    assert any("(attempt 30)" in m for m in retry_logs)
    assert any("ConnectionError" in m for m in retry_logs) and any("OperationalError" in m for m in retry_logs)
    assert any("store is back" in m for m in retry_logs)


def test_backoff_is_exponential_jittered_and_capped(tmp_path: Path) -> None:
    async def never(turn: Turn) -> None:  # pragma: no cover - not called
        raise AssertionError

    queue = DurableWriteQueue(tmp_path / "j.sqlite3", never, base_backoff_s=0.2, max_backoff_s=5.0)
    for failures, (lo, hi) in {1: (0.1, 0.2), 2: (0.2, 0.4), 4: (0.8, 1.6), 6: (2.5, 5.0), 500: (2.5, 5.0)}.items():
        delays = [queue.backoff_delay(failures) for _ in range(50)]
        assert all(lo <= d <= hi for d in delays), (failures, min(delays), max(delays))
        assert len(set(delays)) > 1  # jittered


# --------------------------------------------------------------------------- 2
async def test_killed_worker_pending_writes_are_replayed_once(tmp_path: Path, store: MemoryStore, user_id: str) -> None:
    n = 5
    ids = [f"{user_id}-t{i}" for i in range(n)]
    journal = tmp_path / "journal.sqlite3"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    err_path = tmp_path / "child.stderr"
    with open(err_path, "wb") as err:
        # The child writes turn 0 to the real store, never acknowledges it, and
        # leaves turns 1..n-1 pending behind it; then it is SIGKILLed.
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(CHILD),
            str(journal),
            user_id,
            str(n),
            store.url,
            str(tmp_path / "child-data"),
            stdout=asyncio.subprocess.PIPE,
            stderr=err,
            env=env,
            cwd=str(ROOT),
        )
    await kill_when_ready(proc, err_path)
    assert proc.returncode == -signal.SIGKILL

    rows = journal_rows(journal)
    assert [r[0] for r in rows] == ids
    assert {(r[1], r[3]) for r in rows} == {("pending", proc.pid)}
    assert stored_write_ids(store, user_id) == Counter({ids[0]: 1})  # reached the store before the kill

    calls: Counter[str] = Counter()
    queue = DurableWriteQueue(journal, counting(make_service(store, MemoryMode.NORMAL).remember, calls))
    queue.start()
    try:
        assert queue.replayed == n  # the owner is dead: taken over at start, no lease wait
        assert await queue.drain(30.0) is True
    finally:
        await queue.aclose(1.0)

    assert stored_write_ids(store, user_id) == Counter({i: 1 for i in ids})  # turn 0 not duplicated
    assert calls == Counter({i: 1 for i in ids})
    assert queue.written == n
    assert journal_rows(journal) == []


# --------------------------------------------------------------------------- 3
async def test_hanging_store_never_blocks_session_end(tmp_path: Path, store: MemoryStore, user_id: str) -> None:
    hanging = asyncio.Event()

    async def hang(turn: Turn) -> None:
        hanging.set()
        await asyncio.Event().wait()

    journal = tmp_path / "journal.sqlite3"
    queue = DurableWriteQueue(journal, hang, lease_s=1.0)
    queue.start()
    stuck, behind = make_turn(user_id, "I park on level three"), make_turn(user_id, "My dog is called Biscuit")
    queue.enqueue(stuck)
    await asyncio.wait_for(hanging.wait(), timeout=HANG_GUARD_S)
    assert queue.enqueue(behind) is True  # taken (on disk) while the store hangs

    # Closing ends though the hung write never does: the drain's timeout ends it (the
    # outer 30 s only keeps a broken close from hanging the suite).
    drained = await asyncio.wait_for(queue.aclose(drain_timeout_s=0.5), HANG_GUARD_S)
    assert drained is False
    assert [r[0] for r in journal_rows(journal)] == [stuck.turn_id, behind.turn_id]  # kept on disk

    # A later queue (the next session or worker start) replays both; the
    # interrupted row only once its lease has run out.
    later = DurableWriteQueue(journal, make_service(store, MemoryMode.NORMAL).remember, lease_s=1.0)
    later.start()
    try:
        await wait_until(lambda: later.replayed == 2, what="take-over of the hung row")
        assert await later.drain(15.0) is True
    finally:
        await later.aclose(1.0)
    assert stored_write_ids(store, user_id) == Counter({stuck.turn_id: 1, behind.turn_id: 1})
    assert journal_rows(journal) == []


async def test_attempt_that_hangs_times_out_and_is_retried(
    tmp_path: Path, store: MemoryStore, user_id: str, caplog
) -> None:
    caplog.set_level(logging.WARNING, logger="memory.journal.queue")
    service = make_service(store, MemoryMode.NORMAL)
    calls: Counter[str] = Counter()

    async def first_hangs(turn: Turn) -> object:
        calls[turn.turn_id] += 1
        if calls[turn.turn_id] == 1:
            await asyncio.Event().wait()
        return await service.remember(turn)

    queue = DurableWriteQueue(tmp_path / "j.sqlite3", first_hangs, attempt_timeout_s=0.2, base_backoff_s=0.01)
    queue.start()
    turn = make_turn(user_id, "My train leaves at seven")
    queue.enqueue(turn)
    try:
        assert await queue.drain(10.0) is True
    finally:
        await queue.aclose(1.0)
    # The hung first attempt was cut and retried; how many more attempts the write took
    # depends on the machine (one store write can outlast 0.2 s on a busy one): none of
    # them wrote twice.
    assert calls[turn.turn_id] >= 2 and queue.retried == calls[turn.turn_id] - 1 and queue.written == 1
    assert stored_write_ids(store, user_id) == Counter({turn.turn_id: 1})
    assert any("timed out" in r.getMessage() and "(attempt 1)" in r.getMessage() for r in caplog.records)


async def test_two_live_queues_never_take_each_others_rows(tmp_path: Path, store: MemoryStore, user_id: str) -> None:
    journal = tmp_path / "journal.sqlite3"
    a_calls: Counter[str] = Counter()
    b_calls: Counter[str] = Counter()

    async def hang(turn: Turn) -> None:
        await asyncio.Event().wait()

    a = DurableWriteQueue(journal, counting(hang, a_calls), lease_s=1.0)
    b = DurableWriteQueue(journal, counting(make_service(store, MemoryMode.NORMAL).remember, b_calls), lease_s=1.0)
    first, second = make_turn(user_id, "I play the cello"), make_turn(user_id, "I live near the harbour")
    a.enqueue(first)
    a.enqueue(second)
    a.start()
    b.start()
    try:
        await wait_until(lambda: a_calls[first.turn_id] == 1, what="A's attempt")
        initial_lease = max(r[4] for r in journal_rows(journal))
        # Past the original lease: only A's renewals keep B away, and B's scan finds nothing.
        await wait_until(lambda: time.time() > initial_lease + 0.2, what="the first lease to run out")
        await wait_until(lambda: min(r[4] for r in journal_rows(journal)) > initial_lease, what="lease renewal")
        assert b.adopt_orphans() == 0
        assert b.replayed == 0 and not b_calls

        await a.aclose(drain_timeout_s=0.1)  # A stops: B takes over both rows
        await wait_until(lambda: b.replayed == 2, what="take-over after A stopped")
        assert await b.drain(15.0) is True
    finally:
        await a.aclose(0.1)
        await b.aclose(1.0)
    assert a_calls == Counter({first.turn_id: 1})
    assert b_calls == Counter({first.turn_id: 1, second.turn_id: 1})
    assert stored_write_ids(store, user_id) == Counter({first.turn_id: 1, second.turn_id: 1})


async def test_a_queue_without_a_store_leaves_stopped_workers_turns_to_one_with_a_store(
    tmp_path: Path, store: MemoryStore, user_id: str
) -> None:
    # A process whose store is unavailable took them over and held them (renewing its
    # lease) while a process that could write them got nothing.
    journal = tmp_path / "journal.sqlite3"
    left = DurableWriteQueue(journal, make_service(store, MemoryMode.NORMAL).remember)
    left.enqueue(make_turn(user_id, "I grow tomatoes"))
    await left.aclose(0.0)  # never started: the row waits for any queue

    no_store = DurableWriteQueue(journal, make_service(store, MemoryMode.NORMAL).remember, may_adopt=lambda: False)
    with_store = DurableWriteQueue(journal, make_service(store, MemoryMode.NORMAL).remember)
    no_store.start()
    try:
        assert no_store.adopt_orphans() == 0 and no_store.replayed == 0
        await write_all(with_store, ())
    finally:
        await no_store.aclose(0.1)
    assert with_store.replayed == 1
    assert [m.text for m in store.list_user(user_id)] == ["I grow tomatoes"]


# --------------------------------------------------------------------------- 4
async def test_bad_input_is_dead_lettered_and_later_turns_still_written(
    tmp_path: Path, store: MemoryStore, user_id: str, caplog
) -> None:
    caplog.set_level(logging.ERROR, logger="memory.journal.queue")
    calls: Counter[str] = Counter()

    # MemoryService.remember drops bad input itself; a handler that writes to
    # the store directly gets the store's InvalidMemoryText.
    async def write_raw(turn: Turn) -> object:
        calls[turn.turn_id] += 1
        return await asyncio.to_thread(store.add_raw, turn.user_id, turn.text, write_id=turn.turn_id)

    journal = tmp_path / "journal.sqlite3"
    queue = DurableWriteQueue(journal, write_raw)
    empty = make_turn(user_id, "   ")
    good1 = make_turn(user_id, "My favourite tea is genmaicha")
    huge = make_turn(user_id, "blah " * 1000)
    good2 = make_turn(user_id, "我妹妹叫安娜")
    for turn in (empty, good1, huge, good2):
        queue.enqueue(turn)
    with closing(sqlite3.connect(journal)) as conn:  # a row that no longer decodes
        conn.execute(
            "INSERT INTO pending_writes (turn_id, payload, enqueued_at, updated_at) VALUES (?, ?, 0, 0)",
            ("corrupt-1", '{"text": 1}'),
        )
        conn.commit()
    queue.start()
    try:
        assert await queue.drain(15.0) is True
    finally:
        await queue.aclose(1.0)

    dead = {d.turn_id: d for d in queue.dead_letters()}
    assert list(dead) == [empty.turn_id, huge.turn_id, "corrupt-1"]
    assert "empty" in dead[empty.turn_id].error
    assert "limit is 4000" in dead[huge.turn_id].error
    assert "undecodable" in dead["corrupt-1"].error and dead["corrupt-1"].turn is None
    assert dead[empty.turn_id].turn == empty and dead[empty.turn_id].attempts == 1
    assert calls == Counter({t.turn_id: 1 for t in (empty, good1, huge, good2)})  # never retried
    assert (queue.written, queue.retried, queue.dead_lettered) == (2, 0, 3)
    assert stored_write_ids(store, user_id) == Counter({good1.turn_id: 1, good2.turn_id: 1})
    assert queue.pending_count() == 0
    assert sum("dead-lettered" in r.getMessage() for r in caplog.records) == 3

    # Dead letters stay on disk for inspection; a new queue does not retry them.
    again = DurableWriteQueue(journal, write_raw)
    again.start()
    assert await again.drain(1.0) is True
    await again.aclose(1.0)
    assert len(again.dead_letters()) == 3 and sum(calls.values()) == 4


@pytest.mark.parametrize(
    ("damage", "named"),
    [
        ({"text": None}, "'text' is NoneType"),
        ({"user_id": 7}, "'user_id' is int"),
        ({"created_at": "2026-13-45T99:00"}, "no ISO time"),
        ({"context": [1]}, "'context'"),
    ],
    ids=["null-text", "numeric-user", "bad-time", "bad-context"],
)
def test_a_damaged_journal_row_is_refused_by_the_field_it_got_wrong(damage: dict, named: str) -> None:
    # Valid JSON with a wrong field used to fail inside the write, on every attempt.
    payload = json.loads(encode_turn(make_turn("alice", "I like tea")))
    payload.update(damage)
    with pytest.raises(ValueError, match=re.escape(named)):
        decode_turn(json.dumps(payload))


async def test_a_turn_that_keeps_failing_gives_way_after_a_few_attempts_but_an_outage_never(
    tmp_path: Path, user_id: str
) -> None:
    calls: Counter[str] = Counter()
    written: list[str] = []

    outages = [
        psycopg.OperationalError("connection refused"),
        psycopg.errors.ReadOnlySqlTransaction("cannot execute INSERT in a read-only transaction"),  # a failover
        RuntimeError("Error code: 503 - service unavailable"),  # an embedding API's own error class
    ]

    async def write(turn: Turn) -> object:
        calls[turn.text] += 1
        if turn.text == "refused data":  # what the store refuses for this turn's content: never written
            raise psycopg.errors.DatetimeFieldOverflow("date/time field value out of range")
        if turn.text == "bad data":  # a bug its words trigger: it says nothing about retrying
            raise TypeError("'NoneType' object is not subscriptable")
        if turn.text == "during an outage" and calls[turn.text] <= 3 * MAX_TURN_FAILURES:
            raise outages[calls[turn.text] % len(outages)]
        if turn.text == "one slip after an outage" and calls[turn.text] <= MAX_TURN_FAILURES + 1:
            if calls[turn.text] <= MAX_TURN_FAILURES:
                raise psycopg.OperationalError("connection refused")
            raise ValueError("a one-off")  # the attempts the outage took do not count towards it
        written.append(turn.text)
        return None

    queue = DurableWriteQueue(tmp_path / "journal.sqlite3", write, base_backoff_s=0.001, max_backoff_s=0.002)
    for text in ("refused data", "bad data", "said after it", "during an outage", "one slip after an outage",
                 "said last"):  # fmt: skip
        queue.enqueue(make_turn(user_id, text))
    queue.start()
    try:
        assert await queue.drain(15.0) is True
    finally:
        await queue.aclose(1.0)
    assert written == ["said after it", "during an outage", "one slip after an outage", "said last"]  # in order
    assert (calls["refused data"], calls["bad data"]) == (1, MAX_TURN_FAILURES)
    refused, bad = queue.dead_letters()
    assert refused.turn is not None and refused.turn.text == "refused data"
    assert "DatetimeFieldOverflow" in refused.error
    assert bad.turn is not None and bad.turn.text == "bad data" and "TypeError" in bad.error


@pytest.mark.parametrize("damage", ["overwritten", "truncated"])
async def test_a_damaged_journal_is_set_aside_and_sessions_still_start(
    tmp_path: Path, user_id: str, damage: str, caplog
) -> None:
    # Power loss or a bad disk: every session of the machine failed to start, with
    # "file is not a database", and no caller got an agent.
    journal = tmp_path / "journal.sqlite3"
    old = DurableWriteQueue(journal, lambda turn: asyncio.sleep(0))
    for i in range(200):
        old.enqueue(make_turn(user_id, f"turn {i} " + "words " * 50))
    old._execute("PRAGMA wal_checkpoint(TRUNCATE)")
    await old.aclose(0.1)
    before = journal.read_bytes()
    damaged = b"\0" * 100 + before[100:] if damage == "overwritten" else before[: len(before) // 2]
    journal.write_bytes(damaged)
    written: list[str] = []

    async def write(turn: Turn) -> None:
        written.append(turn.text)

    queue = DurableWriteQueue(journal, write)  # a new session on the machine
    queue.start()
    queue.enqueue(make_turn(user_id, "My sister is called Maria"))
    try:
        assert await queue.drain(5.0) is True
    finally:
        await queue.aclose(1.0)
    assert written == ["My sister is called Maria"]
    [aside] = [p for p in tmp_path.iterdir() if ".damaged-" in p.name and not p.name.endswith(("-wal", "-shm"))]
    assert aside.read_bytes() == damaged  # kept as it was, for inspection
    assert str(journal) in caplog.text and aside.name in caplog.text


async def test_odd_input_never_blocks_the_turns_behind_it(tmp_path: Path, store: MemoryStore, user_id: str) -> None:
    # A GATED turn with a NUL (kept verbatim by the forced write) and a turn of a user id
    # no index can hold used to fail inside Postgres on every retry, forever, with
    # every later turn of every session on the machine waiting behind them.
    gated = make_service(store, MemoryMode.GATED)
    normal = make_service(store, MemoryMode.NORMAL)

    async def remember(turn: Turn) -> object:
        return await (gated if turn.session_id == "gated" else normal).remember(turn)

    queue = DurableWriteQueue(tmp_path / "journal.sqlite3", remember, base_backoff_s=0.05, max_backoff_s=0.2)
    nul = dataclasses.replace(
        make_turn(user_id, "Please remember that my locker is number 12\x0034"), session_id="gated"
    )
    bad_user = make_turn("x" * 3000, "I like tea")
    good = make_turn(user_id, "My dog is called Rex")
    await write_all(queue, (nul, bad_user, good))
    texts = [r.text for r in store.list_user(user_id)]
    assert "My dog is called Rex" in texts
    assert any("1234" in t for t in texts) and not any("\x00" in t for t in texts)
    assert queue.retried == 0 and queue.pending_count() == 0


async def test_a_broken_transcript_is_journaled_and_stored_with_the_turns_after_it(
    tmp_path: Path, store: MemoryStore, user_id: str, caplog
) -> None:
    # An unpaired surrogate (a broken STT transcript) used to be refused by the journal,
    # so the turn and the two after it (it was their context) lived in memory only,
    # and the log repeated their words at every retry.
    caplog.set_level(logging.INFO)
    normal = make_service(store, MemoryMode.NORMAL)
    queue = DurableWriteQueue(tmp_path / "journal.sqlite3", normal.remember, base_backoff_s=0.05, max_backoff_s=0.2)
    broken = make_turn(user_id, "I love the caf\udce9 on 5th street")
    after = [dataclasses.replace(make_turn(user_id, text), context=(f"user: {broken.text}",))
             for text in ("My sister is Anna", "She lives in Lisbon")]  # fmt: skip
    for turn in (broken, *after):
        queue.enqueue(turn)
    assert [row[0] for row in journal_rows(tmp_path / "journal.sqlite3")] == [
        broken.turn_id,
        *(t.turn_id for t in after),
    ]
    queue.start()
    try:
        assert await queue.drain(15.0) is True
    finally:
        await queue.aclose(1.0)
    texts = sorted(r.text for r in store.list_user(user_id))
    assert texts == ["I love the caf? on 5th street", "My sister is Anna", "She lives in Lisbon"]
    assert not [r for r in caplog.records if "caf" in r.getMessage() or "Anna" in r.getMessage()]


async def test_a_broken_earlier_turn_does_not_break_the_look_up(store: MemoryStore, user_id: str) -> None:
    store.add_raw(user_id, "My sister's name is Anna")
    service = make_service(store, MemoryMode.NORMAL)
    for text, context in (("what's my sister's name?", ["caf\udce9 was nice"]), ("my sister\ud800's name?", [])):
        found = await service.recall(user_id, text, context=context)
        assert [r.text for r in found][:1] == ["My sister's name is Anna"]


async def test_a_gated_turn_replayed_after_a_kill_writes_what_was_decided_and_blocks_nothing(
    tmp_path: Path, store: MemoryStore, user_id: str
) -> None:
    # A worker stored the fact of a GATED turn and was killed before its journal row was
    # deleted. The replay used to ask the model again, which worded the fact anew: it
    # broke the unique write id on every retry, forever, with every later turn waiting
    # behind it. The verdict is now kept in the journal, and the replay writes it.
    from memory.gatekeeper.gatekeeper import Gatekeeper

    turn = make_turn(user_id, "By the way I really love hiking in the mountains on weekends")
    later = make_turn(user_id, "My favourite colour is green, I've always loved it")
    journal = tmp_path / "journal.sqlite3"
    killed = DurableWriteQueue(journal, None)
    killed.enqueue(turn)
    first = make_service(store, MemoryMode.GATED, gatekeeper=Gatekeeper(scripted_extraction(
        {turn.text: [{"text": "User loves hiking in the mountains", "category": "preferences"}]})))  # fmt: skip
    report = await first.remember(turn, keep_verdict=killed.keep)  # as its queue ran it...
    assert [w.event for w in report.writes] == ["ADD"]
    await killed.aclose(0.0)  # ...and then it was gone, the row still there
    rewording = scripted_extraction({
        turn.text: [{"text": "User enjoys hiking in the mountains on weekends", "category": "preferences"}],
        later.text: [{"text": "User's favourite colour is green", "category": "preferences", "slot": "favorite_color"}],
    })  # fmt: skip
    replaying = make_service(store, MemoryMode.GATED, gatekeeper=Gatekeeper(rewording))
    queue = DurableWriteQueue(journal, replaying.remember, base_backoff_s=0.05, max_backoff_s=0.2)
    await write_all(queue, (later,))
    assert sorted(m.text for m in store.list_user(user_id)) == [
        "User loves hiking in the mountains",
        "User's favourite colour is green",
    ]
    assert queue.retried == 0 and queue.replayed == 1
    assert rewording.count == 1  # only for the later turn: the replay did not ask again


async def test_a_gated_turn_replayed_with_its_facts_in_another_order_loses_none(
    store: MemoryStore, user_id: str
) -> None:
    # Where the verdict could not be kept (a journal that refused the update), the
    # replay asks the model again. It listed the facts the other way round: the
    # never-written fact took the written one's write id and was skipped as a replay.
    from memory.gatekeeper.gatekeeper import Gatekeeper

    turn = make_turn(user_id, "My sister is called Anna and my favourite colour is blue")
    anna = {"text": "User's sister is Anna", "category": "relationships", "slot": "sister_name"}
    blue = {"text": "User's favourite colour is blue", "category": "preferences", "slot": "favorite_color"}
    store.upsert_fact(user_id, anna["text"], category=anna["category"], slot=anna["slot"],
                      write_id=f"{turn.turn_id}:0", said_at=turn.created_at)  # fmt: skip
    replay = make_service(
        store, MemoryMode.GATED, gatekeeper=Gatekeeper(scripted_extraction({turn.text: [blue, anna]}))
    )
    report = await replay.remember(turn)
    assert sorted(w.event for w in report.writes) == ["ADD", "NOOP"]
    assert sorted(m.text for m in store.list_user(user_id)) == sorted([anna["text"], blue["text"]])
    again = await replay.remember(turn)  # and a replay of the replay adds nothing
    assert [w.event for w in again.writes] == ["NOOP", "NOOP"]


class FullDiskQueue(DurableWriteQueue):
    """The real journal, on a disk that is full while `full` is set: SQLite refuses
    every insert and delete with "database or disk is full", as it does on a full
    volume (its reads still work)."""

    full = False

    def _execute(self, sql: str, params: tuple = ()) -> list[tuple]:
        if self.full and sql.lstrip().upper().startswith(("INSERT", "DELETE")):
            raise sqlite3.OperationalError("database or disk is full")
        return super()._execute(sql, params)


async def test_a_full_journal_disk_loses_no_turn_while_the_store_is_up(
    tmp_path: Path, store: MemoryStore, user_id: str
) -> None:
    # The journal's delete used to retry forever on a full disk, and turns it refused
    # waited in memory for the journal only: with the store healthy, none was written
    # and all were lost when the process ended.
    normal = make_service(store, MemoryMode.NORMAL)
    path = tmp_path / "journal.sqlite3"
    queue = FullDiskQueue(path, normal.remember, base_backoff_s=0.05, max_backoff_s=0.2)
    turns = [make_turn(user_id, text) for text in ("I have two cats", "I work as a nurse", "I live in Porto")]
    queue.enqueue(turns[0])  # journaled before the disk filled up
    queue.full = True
    for turn in turns[1:]:
        queue.enqueue(turn)  # refused by the journal
    queue.start()
    try:
        assert await queue.drain(15.0) is True
        assert sorted(m.text for m in store.list_user(user_id)) == sorted(t.text for t in turns)
        queue.full = False  # space again: the written row left behind goes at close
    finally:
        await queue.aclose(1.0)
    assert journal_rows(path) == []


async def test_forget_drops_the_users_waiting_and_dead_turns_not_others(
    tmp_path: Path, store: MemoryStore, user_id: str
) -> None:
    other = user_id + "-other"
    service = make_service(store, MemoryMode.NORMAL)
    service.settings = dataclasses.replace(service.settings, data_dir=tmp_path)  # its own journal
    down = True

    async def remember(turn: Turn) -> object:
        if "DEAD-LETTER" in turn.text:
            raise InvalidMemoryText("refused")  # dead-lettered, text kept for inspection
        if down:
            raise ConnectionError("store is down")
        return await service.remember(turn)

    queue = DurableWriteQueue(service.settings.journal_path, remember, base_backoff_s=0.05, max_backoff_s=0.1)
    dead = make_turn(user_id, "DEAD-LETTER my phone is 555-0100")
    waiting = make_turn(user_id, "My address is 12 Main St")
    theirs = make_turn(other, "My cat is called Miso")
    for turn in (dead, waiting, theirs):
        queue.enqueue(turn)
    queue.start()
    try:
        await wait_until(lambda: queue.dead_lettered == 1 and queue.retried >= 1, what="the outage to bite")
        gone = await asyncio.to_thread(service.forget, user_id)
        assert (gone.memories, gone.waiting_turns) == (0, 2)  # nothing had reached the store; both waited
        assert [r[0] for r in journal_rows(service.settings.journal_path)] == [theirs.turn_id]
        down = False
        assert await queue.drain(10.0) is True
    finally:
        await queue.aclose(1.0)
    assert store.list_user(user_id) == [] and queue.dead_letters() == []
    assert [r.text for r in store.list_user(other)] == ["My cat is called Miso"]


def test_purged_turns_leave_no_readable_text_in_the_journal_files(
    tmp_path: Path, user_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Debian's SQLite zeroes freed pages by default, SQLite's own default does not (a Python
    # built with it, as python.org's are): every connection here starts as that one would.
    real_connect = sqlite3.connect

    def upstream_default(*args: object, **kwargs: object) -> sqlite3.Connection:
        conn = real_connect(*args, **kwargs)  # type: ignore[arg-type]
        conn.execute("PRAGMA secure_delete = OFF")
        return conn

    monkeypatch.setattr(sqlite3, "connect", upstream_default)

    async def never(turn: Turn) -> None:  # the queue is not started: the turn waits on disk
        raise AssertionError

    journal = tmp_path / "journal.sqlite3"
    queue = DurableWriteQueue(journal, never)  # a live worker keeps the journal open
    queue.enqueue(make_turn(user_id, "My address is JOURNAL-SECRET 12 Main St"))
    queue.enqueue(make_turn(user_id + "-other", "I like tea"))
    assert purge_user(journal, user_id) == 1
    files = [f for f in tmp_path.iterdir() if f.name.startswith("journal.sqlite3")]
    assert [f.name for f in files if b"JOURNAL-SECRET" in f.read_bytes()] == []
    assert [r[0] for r in journal_rows(journal)] and queue.pending_count() == 1  # the other user's turn stays


def test_forget_command_names_a_bad_id_and_forgets_a_good_one(
    tmp_path: Path, store: MemoryStore, user_id: str, monkeypatch, capsys
) -> None:
    from memory.forget import main as forget_main

    store.add_raw(user_id, "My locker code is 4711")
    monkeypatch.chdir(tmp_path)  # no developer's .env: the command reads the one where it runs
    monkeypatch.setenv("MEMORY_DATA_DIR", str(store.settings.data_dir))
    monkeypatch.setenv("MEMORY_COLLECTION", store.settings.collection)
    assert forget_main(["--yes", user_id, "  "]) == 2  # every id is checked before any is forgotten
    assert "empty" in capsys.readouterr().err
    assert [m.text for m in store.list_user(user_id)] == ["My locker code is 4711"]
    assert forget_main(["--yes", user_id]) == 0
    out = capsys.readouterr().out
    assert f"forgot {user_id}: memories 1, mem0_history 1, archive 0" in out
    assert str(store.settings.data_dir) in out  # where it looked
    assert store.list_user(user_id) == []


def test_forget_command_says_when_it_matched_nobody(
    tmp_path: Path, store: MemoryStore, user_id: str, monkeypatch, capsys
) -> None:
    from memory.forget import main as forget_main
    from memory.types import memory_user_id

    spaced = f"{user_id} jr"  # kept under a hash: the logs show the lk-... id
    store.add_raw(memory_user_id(spaced), "My locker code is 4711")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEMORY_DATA_DIR", str(store.settings.data_dir))
    monkeypatch.setenv("MEMORY_COLLECTION", store.settings.collection)
    assert forget_main(["--yes", user_id.upper()]) == 1  # a typo: the operator must not be told it worked
    assert "nothing was stored under" in capsys.readouterr().err
    assert forget_main(["--yes", memory_user_id(spaced)]) == 1  # the id from the logs, taken for an identity
    assert "--stored-id" in capsys.readouterr().err
    assert forget_main(["--yes", "--stored-id", memory_user_id(spaced)]) == 0
    assert store.list_user(memory_user_id(spaced)) == []


def test_forget_command_finds_a_fleet_table_named_with_capitals(
    tmp_path: Path, store: MemoryStore, user_id: str, monkeypatch, capsys
) -> None:
    # to_regclass folds an unquoted name to lower case: the command said there was no
    # table "Memories_..." and forgot nobody.
    from memory.forget import main as forget_main
    from memory.settings import load_settings

    env = {"MEMORY_DATABASE_URL": store.url, "MEMORY_COLLECTION": f"Memories_{uuid.uuid4().hex[:8]}",
           "MEMORY_DATA_DIR": str(tmp_path)}  # fmt: skip
    fleet = MemoryStore.open(load_settings(env, dotenv=False))
    try:
        fleet.add_raw(user_id, "My locker code is 4711")
        monkeypatch.chdir(tmp_path)
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        assert forget_main(["--yes", user_id]) == 0, capsys.readouterr().err
        assert fleet.list_user(user_id) == []
    finally:
        fleet.close()


def test_forget_command_makes_no_store_where_there_is_none(tmp_path: Path, monkeypatch, capsys) -> None:
    from memory.forget import main as forget_main

    monkeypatch.chdir(tmp_path)  # run from the wrong directory: the default data dir is not the worker's
    monkeypatch.delenv("MEMORY_DATA_DIR", raising=False)
    monkeypatch.delenv("MEMORY_DATABASE_URL", raising=False)
    assert forget_main(["--yes", "alice"]) == 2
    assert "no memory store in MEMORY_DATA_DIR" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # no new embedded server was made there


def test_forget_command_names_the_variable_when_the_store_cannot_be_opened(
    tmp_path: Path, store: MemoryStore, monkeypatch, capsys
) -> None:
    from memory.forget import main as forget_main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEMORY_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("MEMORY_DATABASE_URL", f"postgresql://u@/db?host={tmp_path}")  # nothing listens there
    assert forget_main(["--yes", "alice"]) == 2
    assert "MEMORY_DATABASE_URL" in capsys.readouterr().err
    monkeypatch.delenv("MEMORY_DATABASE_URL")
    monkeypatch.setenv("MEMORY_DATA_DIR", str(store.settings.data_dir))
    monkeypatch.setenv("MEMORY_COLLECTION", store.settings.collection)
    monkeypatch.setenv("MEMORY_EMBEDDER", "openai")  # the table holds the local embedder's 384-d vectors
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert forget_main(["--yes", "alice"]) == 2
    assert "MEMORY_EMBEDDER" in capsys.readouterr().err


async def test_writes_that_hang_never_take_the_look_ups_threads(
    tmp_path: Path, store: MemoryStore, user_id: str
) -> None:
    # The store answers reads but blocks writes (a table lock here; in production a
    # primary waiting on a dead synchronous standby). Each timed-out write attempt
    # leaves its thread behind; look-ups must still get theirs.
    store.add_raw(user_id, "My dog is called Rex")
    service = make_service(store, MemoryMode.NORMAL)
    queue = DurableWriteQueue(
        tmp_path / "journal.sqlite3", service.remember, attempt_timeout_s=0.2, base_backoff_s=0.02, max_backoff_s=0.05
    )
    locker = psycopg.connect(store.url)
    locker.execute(f'LOCK TABLE "{store.table}" IN SHARE MODE')  # SELECT passes, INSERT waits
    queue.start()
    try:
        for i in range(6):
            queue.enqueue(make_turn(user_id, f"I went hiking on day {i}"))
        await wait_until(lambda: queue.retried >= 6, what="six write attempts to time out")
        for question in ("What is my dog called?", "who is Rex", "tell me about my dog"):
            found = await asyncio.wait_for(service.recall(user_id, question), 5.0)
            assert "My dog is called Rex" in [r.text for r in found]
    finally:
        locker.rollback()
        locker.close()
        drained = await queue.drain(15.0)
        await queue.aclose(1.0)
    assert drained  # and once the lock goes, every turn is written
    assert len(store.list_user(user_id)) == 7


# --------------------------------------------------------------------------- 5
async def test_enqueue_is_idempotent_on_turn_id(tmp_path: Path, store: MemoryStore, user_id: str) -> None:
    calls: Counter[str] = Counter()
    journal = tmp_path / "journal.sqlite3"
    queue = DurableWriteQueue(journal, counting(make_service(store, MemoryMode.NORMAL).remember, calls))
    turn = make_turn(user_id, "I am training for the Berlin marathon")
    queue.enqueue(turn)
    queue.enqueue(turn)
    queue.enqueue(dataclasses.replace(turn, text="another text under the same turn id"))
    assert queue.pending_count() == 1
    queue.start()
    try:
        assert await queue.drain(10.0) is True
        queue.enqueue(turn)  # a late duplicate after the write
        assert queue.pending_count() == 0
        assert await queue.drain(1.0) is True
    finally:
        await queue.aclose(1.0)
    assert calls == Counter({turn.turn_id: 1})
    assert stored_write_ids(store, user_id) == Counter({turn.turn_id: 1})
    assert [r.text for r in store.list_user(user_id)] == [turn.text]


def test_turn_round_trips_through_the_journal_format() -> None:
    turn = Turn("u-1", '我喜欢蓝色 "quoted"', "s", "t-1", now_iso(), ("user: 你好", "assistant: hi"))
    assert decode_turn(encode_turn(turn)) == turn
    assert decode_turn(encode_turn(dataclasses.replace(turn, context=()))).context == ()
