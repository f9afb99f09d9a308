"""The caller's memories held in the process (memory/storage/session_index.py), as
invariants, on a clock the test moves: a snapshot not refreshed within its staleness
bound (60 s) is not used, one refreshed exactly 60 s ago still is; at most `keep` users
are held (4 by default), and the least recently opened leaves first."""

from __future__ import annotations

import logging
import uuid
from types import SimpleNamespace

import numpy as np
import pytest

from memory.storage import session_index
from memory.storage.lookup import Scope
from memory.storage.session_index import SessionIndexes
from memory.storage.store import MemoryStore


class Clock:
    def __init__(self) -> None:
        self.now = 5000.0

    def __call__(self) -> float:
        return self.now


def indexes(store: MemoryStore, clock: Clock, **kw: int) -> SessionIndexes:
    return SessionIndexes(store.rows, max_rows=10_000, enabled=True, clock=clock, **kw)


def test_a_snapshot_past_its_staleness_bound_is_not_used_until_refreshed(store: MemoryStore, user_id: str) -> None:
    store.add_raw(user_id, "I like green tea")
    clock = Clock()
    idx = indexes(store, clock)
    idx.open(user_id)
    assert idx.usable(user_id) is not None
    clock.now += 60.0  # the bound itself: still used
    assert idx.usable(user_id) is not None
    clock.now += 0.5  # past it: the SQL path
    assert idx.usable(user_id) is None
    assert idx.held(user_id) is not None  # held still, only not used
    idx.refresh(user_id)
    assert idx.usable(user_id) is not None  # refreshed now
    clock.now += 61.0
    assert idx.usable(user_id) is None


def test_a_write_of_this_process_is_not_looked_up_in_the_snapshot_until_a_refresh_read_it(
    store: MemoryStore, user_id: str
) -> None:
    store.add_raw(user_id, "I like green tea")
    idx = indexes(store, Clock())
    idx.open(user_id)
    with idx._lock:  # the store's hook, without the background refresh it starts
        idx._writes[user_id] = idx._writes.get(user_id, 0) + 1
    assert idx.usable(user_id) is None
    idx.refresh(user_id)
    assert idx.usable(user_id) is not None


def test_at_most_keep_users_are_held_and_the_least_recently_opened_leaves_first(store: MemoryStore) -> None:
    users = [f"keep-{uuid.uuid4().hex[:8]}-{i}" for i in range(6)]
    for user in users:
        store.add_raw(user, f"{user} likes chess")
    clock = Clock()
    idx = indexes(store, clock)  # keep: 4, the default
    for user in users[:4]:
        clock.now += 1.0
        idx.open(user)
    assert all(idx.held(u) is not None for u in users[:4])  # the bound: all four held
    clock.now += 1.0
    idx.open(users[0])  # opened again: now the most recent
    clock.now += 1.0
    idx.open(users[4])  # a fifth: the least recently opened (users[1]) leaves
    assert [idx.held(u) is not None for u in users[:5]] == [True, False, True, True, True]
    assert idx.usable(users[1]) is None
    idx.refresh(users[1])  # not opened any more: not loaded again
    assert idx.held(users[1]) is None


def test_keep_is_honoured_as_given(store: MemoryStore) -> None:
    users = [f"keep1-{uuid.uuid4().hex[:8]}-{i}" for i in range(2)]
    for user in users:
        store.add_raw(user, "I like chess")
    clock = Clock()
    idx = indexes(store, clock, keep=1)
    idx.open(users[0])
    clock.now += 1.0
    idx.open(users[1])
    assert idx.held(users[0]) is None and idx.held(users[1]) is not None


# ---------------------------------------------------------------- calibration
# `calibrate` times each path's two stages on sources that stand in for the snapshot and
# the table: each call moves a clock the test owns by a fixed step (times in ms, exact in
# binary floats), and records what it was asked.


class StepClock:
    def __init__(self) -> None:
        self.now = 0.0

    def perf_counter(self) -> float:
        return self.now


class Source:
    """A look-up source whose stages take `lexical_s` and `vector_s` on the test's clock,
    round after round one step longer (round k: k times the step)."""

    def __init__(self, name: str, clock: StepClock, calls: list, lexical_s: float, vector_s: float) -> None:
        self.name, self.clock, self.calls = name, clock, calls
        self.lexical_s, self.vector_s = lexical_s, vector_s
        self.rounds = 0

    def lexical_hits(self, scope, terms, patterns, *, scan, limit, substring_below):  # noqa: ANN001, ANN201
        self.rounds += 1
        call = (self.name, "lexical", scope.user_id, list(terms), list(patterns), scan, limit, substring_below)
        self.calls.append(call)
        self.clock.now += self.lexical_s * self.rounds
        return None

    def nearest_and_ids(self, scope, vector, limit, ids, *, neighbours=False):  # noqa: ANN001, ANN201
        self.calls.append((self.name, "vector", scope.user_id, vector, limit, list(ids), neighbours))
        self.clock.now += self.vector_s * self.rounds
        return []


class Snap(Source):
    """The snapshot's side: two rows, the first without lexical text, the second with eight words."""

    def __init__(self, clock: StepClock, calls: list, matrix: np.ndarray | None = None) -> None:
        super().__init__("index", clock, calls, 0.125, 0.25)
        self.versions = {"m-a": ("10", 0), "m-b": ("11", 1)}
        self.lex = [None, "Zebra apple Mango kiwi fig date cherry banana"]
        self.matrix = (
            np.array([[1.0, 0.0, 0.0, 0.0], [0.5, -0.5, 0.5, -0.5]], dtype=np.float32) if matrix is None else matrix
        )


def calibrating(monkeypatch: pytest.MonkeyPatch) -> tuple[SessionIndexes, Snap, list]:
    clock, calls = StepClock(), []
    monkeypatch.setattr(session_index, "time", SimpleNamespace(perf_counter=clock.perf_counter))
    table = Source("sql", clock, calls, 0.5, 1.0)
    idx = session_index.SessionIndexes(table, max_rows=10_000, enabled=True, clock=Clock())  # type: ignore[arg-type]
    return idx, Snap(clock, calls), calls


def times(idx: SessionIndexes, user: str) -> dict[tuple[str, str], list[float]]:
    return {(p, s): list(v) for (u, p, s), v in idx.paths._times.items() if u == user}


def test_a_calibration_times_each_path_and_stage_once_per_round_two_rounds_by_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    idx, snap, _ = calibrating(monkeypatch)
    idx.calibrate("u-1", snap)  # type: ignore[arg-type]
    assert times(idx, "u-1") == {
        ("index", "lexical"): [125.0, 250.0],
        ("index", "vector"): [250.0, 500.0],
        ("sql", "lexical"): [500.0, 1000.0],
        ("sql", "vector"): [1000.0, 2000.0],
    }
    assert idx.paths.snapshot("u-1") == {"index": 562.5, "sql": 2250.0}
    assert idx.paths.prefers_index("u-1") is True


def test_a_calibration_runs_as_many_rounds_as_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    idx, snap, _ = calibrating(monkeypatch)
    idx.calibrate("u-1", snap, rounds=3)  # type: ignore[arg-type]
    assert times(idx, "u-1") == {
        ("index", "lexical"): [125.0, 250.0, 375.0],
        ("index", "vector"): [250.0, 500.0, 750.0],
        ("sql", "lexical"): [500.0, 1000.0, 1500.0],
        ("sql", "vector"): [1000.0, 2000.0, 3000.0],
    }


def test_the_rounds_alternate_which_path_goes_first(monkeypatch: pytest.MonkeyPatch) -> None:
    # the path timed first pays the cold caches; alternating shares that between the two
    idx, snap, calls = calibrating(monkeypatch)
    idx.calibrate("u-1", snap, rounds=3)  # type: ignore[arg-type]
    assert [(c[0], c[1]) for c in calls] == [
        ("index", "lexical"), ("index", "vector"), ("sql", "lexical"), ("sql", "vector"),
        ("sql", "lexical"), ("sql", "vector"), ("index", "lexical"), ("index", "vector"),
        ("index", "lexical"), ("index", "vector"), ("sql", "lexical"), ("sql", "vector"),
    ]  # fmt: skip


def test_the_calibration_looks_up_the_callers_own_rows_with_one_of_them_as_the_query(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    idx, snap, calls = calibrating(monkeypatch)
    idx.calibrate("u-1", snap, rounds=1)  # type: ignore[arg-type]
    terms = ["apple", "banana", "cherry", "date", "fig", "kiwi"]  # the first six words, sorted, lower-cased
    vector = [0.5, -0.5, 0.5, -0.5]  # the row that has lexical text
    assert calls == [
        ("index", "lexical", "u-1", terms, [], 500, 20, 0),
        ("index", "vector", "u-1", vector, 20, [], True),
        ("sql", "lexical", "u-1", terms, [], 500, 20, 0),
        ("sql", "vector", "u-1", vector, 20, [], True),
    ]


def test_a_calibration_of_one_path_times_that_path_alone_and_keeps_the_others_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    idx, snap, calls = calibrating(monkeypatch)
    idx.paths.add("u-1", "index", "lexical", 7.0)
    idx.paths.add("u-1", "index", "vector", 8.0)
    idx.paths.add("u-1", "sql", "lexical", 9.0)
    idx.paths.add("u-1", "sql", "vector", 9.0)
    idx.calibrate("u-1", snap, rounds=1, paths=("sql",))  # type: ignore[arg-type]
    assert [c[0] for c in calls] == ["sql", "sql"]
    assert times(idx, "u-1") == {  # sql's earlier times dropped, the index's kept
        ("index", "lexical"): [7.0],
        ("index", "vector"): [8.0],
        ("sql", "lexical"): [500.0],
        ("sql", "vector"): [1000.0],
    }


def test_a_snapshot_with_no_rows_or_no_vectors_times_nothing_and_warns_nothing(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    idx, snap, calls = calibrating(monkeypatch)
    snap.versions, snap.lex, snap.matrix = {}, [], np.zeros((0, 0), dtype=np.float32)
    with caplog.at_level(logging.DEBUG, logger="memory.storage.session_index"):
        idx.calibrate("u-1", snap)  # type: ignore[arg-type]
        idx.calibrate("u-2", Snap(snap.clock, calls, matrix=np.zeros((2, 0), dtype=np.float32)))  # type: ignore[arg-type]
    assert calls == [] and times(idx, "u-1") == {} and times(idx, "u-2") == {}
    assert caplog.records == []


def test_a_calibration_that_fails_leaves_the_snapshot_in_use_and_says_so(
    store: MemoryStore, user_id: str, caplog: pytest.LogCaptureFixture
) -> None:
    store.add_raw(user_id, "I like green tea")
    idx = indexes(store, Clock())

    def fails(*_: object, **__: object) -> None:
        raise RuntimeError("no timer")

    idx.calibrate = fails  # type: ignore[method-assign]
    with caplog.at_level(logging.WARNING, logger="memory.storage.session_index"):
        idx.open(user_id)
    assert idx.usable(user_id) is not None
    said = [r.getMessage() for r in caplog.records]
    assert said == ["memory index: the paths were not timed: RuntimeError('no timer')"]


def test_a_look_up_takes_the_index_only_while_it_measured_faster_for_this_user(
    store: MemoryStore, user_id: str
) -> None:
    store.add_raw(user_id, "I like green tea")
    idx = indexes(store, Clock())
    idx.open(user_id)
    for path, ms in (("index", 5.0), ("sql", 1.0)):
        idx.paths.clear(user_id, path)
        idx.timed(user_id, "lexical", path == "index", ms / 1000)
        idx.timed(user_id, "vector", path == "index", ms / 1000)
    assert times(idx, user_id) == {
        ("index", "lexical"): [5.0],
        ("index", "vector"): [5.0],
        ("sql", "lexical"): [1.0],
        ("sql", "vector"): [1.0],
    }
    assert idx.usable(user_id) is not None and idx.choose(user_id) is None  # SQL faster: SQL
    idx.timed(user_id, "lexical", False, 0.5)
    idx.timed(user_id, "vector", False, 0.5)  # SQL's medians now 250.5 ms each
    assert idx.choose(user_id) is idx.usable(user_id)


def test_each_look_up_stage_is_timed_on_the_path_it_took_and_passes_its_arguments_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    idx, snap, calls = calibrating(monkeypatch)
    routed = session_index.RoutedSource(idx.table, idx)
    scope = Scope("u-1")
    snap.generation, snap.at, snap.stored = 0, 5000.0, 0  # held, current, no times yet: the index
    with idx._lock:
        idx._snapshots["u-1"] = snap  # type: ignore[assignment]
    routed.lexical_hits(scope, ["tea"], [], scan=50, limit=7, substring_below=0.5)
    routed.nearest_and_ids(scope, [1.0, 0.0], 9, [], neighbours=False)
    with idx._lock:
        idx._snapshots.clear()  # nothing held: SQL
    routed.lexical_hits(scope, ["tea"], ["%tea%"], scan=50, limit=7, substring_below=0.5)
    routed.nearest_and_ids(scope, [1.0, 0.0], 9, ["m-a"], neighbours=True)
    assert calls == [
        ("index", "lexical", "u-1", ["tea"], [], 50, 7, 0.5),
        ("index", "vector", "u-1", [1.0, 0.0], 9, [], False),
        ("sql", "lexical", "u-1", ["tea"], ["%tea%"], 50, 7, 0.5),
        ("sql", "vector", "u-1", [1.0, 0.0], 9, ["m-a"], True),
    ]
    assert times(idx, "u-1") == {
        ("sql", "lexical"): [500.0],
        ("sql", "vector"): [1000.0],
        ("index", "lexical"): [125.0],
        ("index", "vector"): [250.0],
    }


def test_a_user_above_the_bound_is_not_held_and_the_log_says_who_and_the_bound(
    store: MemoryStore, user_id: str, caplog: pytest.LogCaptureFixture
) -> None:
    store.add_raw(user_id, "I like green tea")
    store.add_raw(user_id, "I live in Lyon")
    idx = SessionIndexes(store.rows, max_rows=1, enabled=True, clock=Clock())
    with caplog.at_level(logging.INFO, logger="memory.storage.session_index"):
        idx.open(user_id)
    assert idx.held(user_id) is None and idx.refreshes == 0
    said = [r.getMessage() for r in caplog.records]
    assert said == [f"memory index: {user_id} has more than 1 memories; look-ups use SQL"]


def test_each_refresh_is_counted(store: MemoryStore, user_id: str) -> None:
    store.add_raw(user_id, "I like green tea")
    idx = indexes(store, Clock())
    idx.open(user_id)
    idx.refresh(user_id)
    idx.refresh(user_id)
    assert idx.refreshes == 3
