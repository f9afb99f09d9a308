"""The caller's memories in the job process: a look-up without a round trip to the database.

A job process serves one call for one user. At session start (`MemoryService.prepare`)
the store reads that user's rows once (`Mem0Table.user_snapshot`: id, row version,
vector, payload; `user_id` in the WHERE, through the read router, so a replica serves it
only once it has the user's last write) into a `snapshot.Snapshot`, a
`lookup.LookupSource` with the SQL statements' meaning: the same candidates, no
statement on the reply's path. `RoutedSource`, at the end, is
the one place where each look-up call is sent to the snapshot or to SQL.

Kept current by
- the process's own writes: every write of the user (`MemoryStore._wrote`) moves the
  user's write count; until a refresh has caught up with it the look-ups take the SQL
  path, so a turn always finds what the turn before it stored (read-your-writes);
- another process's forget, redaction or import: each bumps the user's generation on the
  primary (`generations.py`); each look-up compares it first (`SessionIndexes.check`, one
  small statement, only while rows are held) and takes the SQL path when it moved, so a
  look-up never serves what was forgotten or redacted before it began;
- a refresh after each such write and after each look-up, in the background: one small
  statement lists the user's (id, row version) pairs (`Mem0Table.user_versions`), and a
  second fetches only the rows that are new or changed. Rows another session of the same
  user wrote, updated, redacted or deleted arrive within a turn; a forget in this process
  is a write like any other.

Above `MEMORY_SESSION_INDEX_MAX_ROWS` rows (a bound on the process's RAM), or before the
first load has finished, or when the last refresh is older than `_STALE_S`, look-ups take
the SQL path. Otherwise a look-up's stages take the path measured faster for this user
(`lookup_paths.py`: session start times both, every look-up times the one it took).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from memory.ops.threads import INDEX_POOL
from memory.storage import generations
from memory.storage.lookup import Hit, LexicalHits, LookupSource, Scope, Turn
from memory.storage.lookup_paths import INDEX, SQL, PathTimes
from memory.storage.mem0_table import Mem0Table
from memory.storage.snapshot import Row, Snapshot, as_row, build, tokens

logger = logging.getLogger(__name__)

# A snapshot not refreshed for this long (the database unreachable) is not used.
_STALE_S = 60.0


class SessionIndexes:
    """The snapshots of the users this process serves (one, in a job process), their
    loads and refreshes. Thread-safe."""

    def __init__(
        self,
        table: Mem0Table,
        *,
        max_rows: int,
        enabled: bool,
        keep: int = 4,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.table = table
        self.clock = clock  # what `_STALE_S` is measured on (a test moves it)
        self.max_rows = max_rows
        self.enabled = enabled
        self.keep = keep  # users held at most (least recently opened leave first)
        self._snapshots: dict[str, Snapshot] = {}
        self._opened: dict[str, float] = {}
        self._writes: dict[str, int] = {}
        self._stored: dict[str, int] = {}  # user -> generation on the primary at the last `check`
        self._running: set[str] = set()
        self._again: set[str] = set()
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self.refreshes = 0  # how many refreshes ran (tests, benchmarks)
        self.paths = PathTimes()  # what each path's look-ups took, per user: which one a look-up takes

    # ------------------------------------------------------------ the store's hooks
    def open(self, user_id: str) -> None:
        """Session start: load the user's rows (blocks; call it off the event loop)."""
        if not self.enabled:
            return
        with self._lock:
            self._opened[user_id] = self.clock()
            for old in sorted(self._opened, key=self._opened.__getitem__)[: -self.keep]:
                self._opened.pop(old, None)
                self._snapshots.pop(old, None)
                self.paths.forget(old)
        snap = self.refresh(user_id)
        if snap is not None:
            try:
                self.calibrate(user_id, snap)
            except Exception as exc:  # noqa: BLE001 - the look-ups' own times decide then
                logger.warning("memory index: the paths were not timed: %r", exc)

    def calibrate(self, user_id: str, snap: Snapshot, rounds: int = 2, paths: tuple[str, ...] = (INDEX, SQL)) -> None:
        """Time the paths' stages for this user (session start, beside the greeting; a path
        `due` again, in the background), with one of the user's own rows as the query: its
        vector, the words of its lexical form. The paths' earlier times are dropped."""
        place = next((p for _, p in snap.versions.values() if snap.lex[p]), None)
        if place is None or snap.matrix.shape[1] == 0:
            return
        vector = snap.matrix[place].tolist()
        terms = sorted(tokens(snap.lex[place] or ""))[:6]
        scope = Scope(user_id)
        sources = tuple((path, source) for path, source in ((INDEX, snap), (SQL, self.table)) if path in paths)
        for path in paths:
            self.paths.clear(user_id, path)
        for n in range(rounds):
            for path, source in sources[:: 1 if n % 2 == 0 else -1]:
                t0 = time.perf_counter()
                source.lexical_hits(scope, terms, [], scan=500, limit=20, substring_below=0)
                t1 = time.perf_counter()
                source.nearest_and_ids(scope, vector, 20, [], neighbours=True)
                t2 = time.perf_counter()
                self.paths.add(user_id, path, "lexical", (t1 - t0) * 1000)
                self.paths.add(user_id, path, "vector", (t2 - t1) * 1000)

    def choose(self, user_id: str) -> Snapshot | None:
        """The snapshot when it may be read (`usable`) and has measured faster than SQL for this user."""
        snap = self.usable(user_id)
        return snap if snap is not None and self.paths.prefers_index(user_id) else None

    def timed(self, user_id: str, stage: str, indexed: bool, seconds: float) -> None:
        """A look-up's stage took this long on the path it took."""
        if self.enabled:
            self.paths.add(user_id, INDEX if indexed else SQL, stage, seconds * 1000)

    def wrote(self, user_id: str) -> None:
        """A write of the user committed in this process: look-ups take the SQL path until a
        refresh has read it; the refresh starts now, in the background."""
        with self._lock:
            self._writes[user_id] = self._writes.get(user_id, 0) + 1
            opened = user_id in self._opened
        if opened:
            self.refresh_soon(user_id)

    def usable(self, user_id: str) -> Snapshot | None:
        """The user's snapshot if a look-up may read it: loaded, within the bound, every
        write of this process in it, refreshed within `_STALE_S`."""
        if not self.enabled:
            return None
        with self._lock:
            snap = self._snapshots.get(user_id)
            writes = self._writes.get(user_id, 0)
            stored = self._stored.get(user_id)
        if snap is None or snap.generation != writes or self.clock() - snap.at > _STALE_S:
            return None
        if stored is not None and stored != snap.stored:  # another process forgot, redacted or imported
            return None
        return snap

    def check(self, user_id: str) -> None:
        """The freshness check, at the start of each look-up (before any stage reads held
        rows): one small statement on the primary, the user's generation (`generations.py`),
        which another process's forget, redaction or import bumps as it commits. When it moved
        since the held rows were read, this look-up takes the SQL path (`usable`) and a
        refresh starts. Nothing is read when no rows are held (the SQL path is current); a
        load landing during this look-up may have read its rows before a forget, so it is
        not used until the next check has read the generation."""
        if not self.enabled:
            return
        with self._lock:
            held = user_id in self._snapshots
            if not held:
                self._stored[user_id] = -1
        if not held:
            return
        try:
            now = generations.current(self.table.pool, self.table.name, user_id)
        except Exception as exc:  # noqa: BLE001 - not known to be current: the SQL path says what it can
            logger.warning("memory index: the user's generation not read: %r", exc)
            now = -1
        with self._lock:
            self._stored[user_id] = now
            snap = self._snapshots.get(user_id)
        if snap is not None and snap.stored != now:
            self.refresh_soon(user_id)

    def looked_up(self, user_id: str) -> None:
        """After a look-up: refresh in the background (other sessions' writes)."""
        if self.enabled and user_id in self._opened:
            self.refresh_soon(user_id)

    def held(self, user_id: str) -> Snapshot | None:
        """The user's snapshot, current or not (benchmarks, tests)."""
        with self._lock:
            return self._snapshots.get(user_id)

    # ------------------------------------------------------------ refreshing
    def refresh_soon(self, user_id: str) -> None:
        """A refresh in the background; one at a time per user, one more if asked meanwhile."""
        if not self.enabled:
            return
        with self._lock:
            if user_id in self._running:
                self._again.add(user_id)
                return
            self._running.add(user_id)
        INDEX_POOL.submit(self._refresh_loop, user_id)  # one thread, background work, never the reply's

    def _refresh_loop(self, user_id: str) -> None:
        try:
            while True:
                try:
                    snap = self.refresh(user_id)
                    stale = self.paths.due(user_id)
                    if snap is not None and stale is not None:  # a path not taken for a while: timed again
                        self.calibrate(user_id, snap, rounds=1, paths=(stale,))
                except Exception as exc:  # noqa: BLE001 - look-ups take the SQL path meanwhile
                    logger.warning("memory index of a user not refreshed: %r", exc)
                with self._lock:
                    if user_id not in self._again:
                        return
                    self._again.discard(user_id)
        finally:
            with self._lock:
                self._running.discard(user_id)
                self._idle.notify_all()

    def wait_idle(self, user_id: str, timeout_s: float = 30.0) -> bool:
        """Wait until no refresh of the user runs or is asked for (tests, benchmarks)."""
        with self._lock:
            return self._idle.wait_for(lambda: user_id not in self._running, timeout_s)

    def refresh(self, user_id: str) -> Snapshot | None:
        """Bring the user's snapshot up to date now: the whole user on the first load,
        then only rows new or changed since (by row version), deleted ones dropped. Above
        `max_rows` the user has none (SQL path)."""
        with self._lock:
            if user_id not in self._opened:
                return None
            generation = self._writes.get(user_id, 0)  # read before the rows: a write after it is not in them
            old = self._snapshots.get(user_id)
        stored = generations.current(self.table.pool, self.table.name, user_id)  # before the rows, as `generation`
        if old is None:
            if self.table.user_has_more_than(user_id, self.max_rows):
                logger.info("memory index: %s has more than %d memories; look-ups use SQL", user_id, self.max_rows)
                return None
            snap = build(user_id, [Row(*r) for r in self.table.user_snapshot(user_id)], generation)
        else:
            versions = self.table.user_versions(user_id)
            if len(versions) > self.max_rows:
                with self._lock:
                    self._snapshots.pop(user_id, None)
                return None
            changed = [m for m, v in versions.items() if old.versions.get(m, ("",))[0] != v]
            gone = [m for m in old.versions if m not in versions]
            fresh = [Row(*r) for r in self.table.user_snapshot(user_id, changed)] if changed else []
            if len(old.ids) + len(fresh) > 2 * max(len(versions), 1000):  # mostly dead places: rebuild
                keep = [as_row(old, p) for m, (_, p) in old.versions.items() if m in versions]
                snap = build(user_id, list({r.id: r for r in [*keep, *fresh]}.values()), generation)  # fresh wins
            else:
                snap = old.with_rows(fresh, gone, generation)
        snap = replace(snap, stored=stored, at=self.clock())
        with self._lock:
            self.refreshes += 1
            if user_id in self._opened:
                self._snapshots[user_id] = snap
        return snap


class RoutedSource:
    """The look-up source the store hands the retriever (`MemoryStore.lookup`): each call
    goes to the user's snapshot or to SQL, chosen here and nowhere else.

    - The stages (`lexical_hits`, `nearest_and_ids`, and `candidates`, the one-trip path)
      go to the snapshot when it may be read (`SessionIndexes.usable`) and measured faster
      for the user (`SessionIndexes.choose`), and are timed on the path they took. The
      one-trip call is timed as both stages at once, half to each (a path's cost is the
      sum of its stages' medians: the one trip's whole time).
    - The reads that follow a stage (`payloads`, `turns`) and the densities' reads
      (`user_vectors`, `user_has_more_than`) go to the snapshot whenever it may be read:
      no round trip, and the rows the stages just read.
    - After a look-up's last call (`nearest_and_ids`, `payloads`, `candidates`), a
      refresh in the background (other sessions' writes).
    """

    def __init__(self, table: Mem0Table, indexes: SessionIndexes) -> None:
        self.table = table
        self.indexes = indexes

    def check_fresh(self, user_id: str) -> None:
        self.indexes.check(user_id)

    def _staged(self, user_id: str) -> LookupSource:
        snap = self.indexes.choose(user_id)
        return snap if snap is not None else self.table

    def _held(self, user_id: str) -> LookupSource:
        snap = self.indexes.usable(user_id)
        return snap if snap is not None else self.table

    def lexical_hits(
        self,
        scope: Scope,
        terms: Sequence[str],
        patterns: Sequence[str],
        *,
        scan: int,
        limit: int,
        substring_below: float,
    ) -> LexicalHits:
        source = self._staged(scope.user_id)
        t0 = time.perf_counter()
        try:
            return source.lexical_hits(scope, terms, patterns, scan=scan, limit=limit, substring_below=substring_below)
        finally:
            self.indexes.timed(scope.user_id, "lexical", source is not self.table, time.perf_counter() - t0)

    def nearest_and_ids(
        self, scope: Scope, vector: Sequence[float], limit: int, ids: Sequence[str], *, neighbours: bool = False
    ) -> list[Hit]:
        source = self._staged(scope.user_id)
        t0 = time.perf_counter()
        try:
            return source.nearest_and_ids(scope, vector, limit, ids, neighbours=neighbours)
        finally:
            self.indexes.timed(scope.user_id, "vector", source is not self.table, time.perf_counter() - t0)
            self.indexes.looked_up(scope.user_id)

    def candidates(
        self,
        scope: Scope,
        vector: Sequence[float],
        terms: Sequence[str],
        patterns: Sequence[str],
        *,
        limit: int,
        scan: int,
        substring_below: float,
        neighbours: bool = False,
    ) -> list[Hit]:
        source = self._staged(scope.user_id)
        t0 = time.perf_counter()
        try:
            return source.candidates(scope, vector, terms, patterns, limit=limit, scan=scan,
                                     substring_below=substring_below, neighbours=neighbours)  # fmt: skip
        finally:
            half = (time.perf_counter() - t0) / 2
            for stage in ("lexical", "vector"):
                self.indexes.timed(scope.user_id, stage, source is not self.table, half)
            self.indexes.looked_up(scope.user_id)

    def payloads(self, user_id: str, ids: Sequence[str]) -> list[Hit]:
        try:
            return self._held(user_id).payloads(user_id, ids)
        finally:
            self.indexes.looked_up(user_id)

    def turns(
        self, user_id: str, sessions: Sequence[str], seqs: Sequence[str], vector: Sequence[float] | None
    ) -> list[Turn]:
        return self._held(user_id).turns(user_id, sessions, seqs, vector)

    def user_vectors(self, user_id: str, limit: int) -> list[tuple[str, np.ndarray]]:
        return self._held(user_id).user_vectors(user_id, limit)

    def user_has_more_than(self, user_id: str, n: int) -> bool:
        return self._held(user_id).user_has_more_than(user_id, n)


__all__ = ["RoutedSource", "SessionIndexes"]
