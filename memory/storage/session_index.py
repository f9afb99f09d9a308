"""The caller's memories in the job process: a look-up without a round trip to the database.

A job process serves one call for one user. At session start (`MemoryService.prepare`)
the store reads that user's rows once (`Mem0Table.user_snapshot`: id, row version,
vector, payload; `user_id` in the WHERE, through the read router, so a replica serves it
only once it has the user's last write) into a float32 matrix and the few fields the
look-up's stages filter and match on. The look-up's stages then run here, with the
SQL statements' meaning (`Mem0Table.lexical_hits`, `nearest_and_ids`, `payloads`,
`turns`): the same candidates, no statement on the reply's path.

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
the SQL path. Otherwise a look-up takes the path measured faster for this user
(`lookup_paths.py`: session start times both, every look-up times the one it took).
"""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

import numpy as np

from memory.ops.threads import INDEX_POOL
from memory.storage import generations
from memory.storage.lookup_paths import INDEX, SQL, PathTimes
from memory.storage.mem0_table import Mem0Table, Scope

logger = logging.getLogger(__name__)

# A snapshot not refreshed for this long (the database unreachable) is not used.
_STALE_S = 60.0
_BLOCK = 1024  # rows per block of the query's cosines (`Snapshot._cosines`)
_PARTS = re.compile(r"[^\W_]+")
_SEQ = re.compile(r"^-?[0-9]{1,18}$")


def _tokens(lex: str) -> set[str]:
    """What `to_tsvector('simple', lex)` holds: the space-separated words lower-cased, and
    the parts Postgres' parser splits a word with an apostrophe into ("don't": don, t)."""
    out = set(lex.lower().split())
    for word in [w for w in out if not w.isalnum()]:
        out.update(_PARTS.findall(word))
    return out


def _needle(pattern: str) -> str | None:
    """The lower-cased text of a `%text%` pattern with no other wildcard; None for another shape."""
    if len(pattern) < 2 or not (pattern.startswith("%") and pattern.endswith("%")):
        return None
    body = pattern[1:-1]
    if re.search(r"(?<!\\)[%_]", body) or body.endswith("\\") and not body.endswith("\\\\"):
        return None
    return re.sub(r"\\(.)", r"\1", body).lower()


def like_matcher(pattern: str) -> Callable[[str], bool]:
    """`text ILIKE pattern` as a Python test (`%`, `_` and backslash escapes)."""
    body = pattern
    needle = _needle(pattern)
    if needle is not None:
        return lambda text: needle in text
    out, i = [], 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            out.append(re.escape(body[i + 1]))
            i += 2
            continue
        out.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch.lower()))
        i += 1
    rx = re.compile("".join(out), re.DOTALL)
    return lambda text: rx.fullmatch(text) is not None


@dataclass(frozen=True)
class Snapshot:
    """One user's rows as the look-up reads them; never changed in place (a refresh makes
    a new one that shares what did not change). Rows are appended: a changed or deleted
    row's old place is dead (`alive` False) until a compaction rebuilds the snapshot."""

    user_id: str
    ids: list[str]
    versions: dict[str, tuple[str, int]]  # live id -> (row version (xmin), place)
    matrix: np.ndarray  # rows unit length, float32
    alive: np.ndarray  # bool
    payloads: list[str]  # JSON text, parsed for the candidates only
    folded: list[str]  # the text lower-cased (substring stage)
    sessions: list[str | None]
    categories: list[str | None]
    superseded: np.ndarray  # bool: `valid_until` in the payload
    seqs: list[str | None]  # `seq` as text where the payload has one
    postings: dict[str, list[int]]  # lexical word -> places (full-text stage)
    lex: list[str | None]
    generation: int  # the user's write count this snapshot has seen
    at: float  # when it was read (monotonic)
    stored: int = 0  # the user's generation on the primary before the rows were read (generations.py)

    @property
    def rows(self) -> int:
        return len(self.versions)

    @property
    def nbytes(self) -> int:
        """An estimate of the snapshot's memory: the arrays plus the Python objects."""
        size = self.matrix.nbytes + self.superseded.nbytes + self.alive.nbytes
        for column in (self.ids, self.payloads, self.folded, self.lex, self.sessions, self.categories, self.seqs):
            size += sys.getsizeof(column) + sum(sys.getsizeof(x) for x in set(column) if x is not None)
        size += sys.getsizeof(self.postings) + sum(
            sys.getsizeof(k) + sys.getsizeof(v) for k, v in self.postings.items()
        )
        return size + sys.getsizeof(self.versions) + len(self.versions) * (sys.getsizeof((1, 2)) + 40)

    # ---------------------------------------------------------------- the stages
    @cached_property
    def _session_codes(self) -> tuple[dict[str | None, int], np.ndarray]:
        codes: dict[str | None, int] = {}
        return codes, np.fromiter((codes.setdefault(x, len(codes)) for x in self.sessions), np.int32, len(self.ids))

    @cached_property
    def _category_codes(self) -> tuple[dict[str | None, int], np.ndarray]:
        codes: dict[str | None, int] = {}
        return codes, np.fromiter((codes.setdefault(x, len(codes)) for x in self.categories), np.int32, len(self.ids))

    @cached_property
    def _turn_places(self) -> dict[tuple[str | None, str], list[int]]:
        out: dict[tuple[str | None, str], list[int]] = {}
        for i, seq in enumerate(self.seqs):
            if seq is not None:
                out.setdefault((self.sessions[i], seq), []).append(i)
        return out

    @cached_property
    def _haystack(self) -> tuple[str, np.ndarray]:
        """Every folded text in one string (NUL between them, which Postgres text never
        holds) and where each starts: a substring found once, in C, not row by row."""
        starts = np.zeros(len(self.folded), dtype=np.int64)
        if self.folded:
            starts[1:] = np.cumsum([len(t) + 1 for t in self.folded[:-1]])
        return "\x00".join(self.folded), starts

    def _in_scope(self, scope: Scope) -> np.ndarray:
        keep = self.alive.copy()
        if scope.exclude_session is not None:
            codes, column = self._session_codes
            if scope.exclude_session in codes:
                keep &= column != codes[scope.exclude_session]
        if scope.categories:
            codes, column = self._category_codes
            keep &= np.isin(column, [codes[c] for c in set(scope.categories) if c in codes])
        if not scope.past:
            keep &= ~self.superseded
        return keep

    def _substring_counts(self, patterns: Sequence[str]) -> np.ndarray:
        """How many of the patterns each row's text matches (ILIKE)."""
        counts = np.zeros(len(self.ids), dtype=np.int32)
        haystack, starts = self._haystack
        for pattern in patterns:
            needle = _needle(pattern)
            if needle is not None:
                if not needle:
                    counts += 1
                    continue
                found = [m.start() for m in re.finditer(re.escape(needle), haystack)]
                rows = np.unique(np.searchsorted(starts, np.asarray(found, dtype=np.int64), side="right") - 1)
            else:
                test = like_matcher(pattern)
                rows = np.array([i for i, text in enumerate(self.folded) if test(text)], dtype=np.int64)
            if len(rows):
                counts[rows] += 1
        return counts

    def _payload(self, i: int) -> dict[str, Any]:
        return json.loads(self.payloads[i])

    def _cosines(self, vector: Sequence[float]) -> np.ndarray:
        q = np.asarray(vector, dtype=np.float32)
        q = q / (np.linalg.norm(q) + 1e-12)
        if self.matrix.shape[1] != len(q):  # no row with a vector yet
            return np.zeros(len(self.matrix), dtype=np.float32)
        out = np.empty(len(self.matrix), dtype=np.float32)
        # In blocks small enough that OpenBLAS runs them on this thread: one product of
        # 10,000 x 384 took 20 ms on two busy cores (its threads waiting for each other), the
        # blocks 2 ms, with the same result.
        for start in range(0, len(out), _BLOCK):
            np.matmul(self.matrix[start : start + _BLOCK], q, out=out[start : start + _BLOCK])
        return out

    def lexical_hits(
        self,
        scope: Scope,
        terms: Sequence[str],
        patterns: Sequence[str],
        *,
        scan: int,
        limit: int,
        substring_below: float,
    ) -> tuple[list[tuple[str, str | None]], list[str]]:
        """`Mem0Table.lexical_hits` on the snapshot."""
        keep = self._in_scope(scope)
        places: set[int] = set()
        for term in terms:
            places.update(self.postings.get(term.lower(), ()))
        full = [(self.ids[i], self.lex[i]) for i in sorted(places) if keep[i]]
        if not patterns or len(full) >= substring_below:
            return full, []
        counts = self._substring_counts(patterns)
        first = np.flatnonzero(keep & (counts > 0))[:scan]  # the scan's bound, as the statement's LIMIT
        order = first[np.argsort(-counts[first], kind="stable")][:limit]
        return full, [self.ids[i] for i in order]

    def nearest_and_ids(
        self, scope: Scope, vector: Sequence[float], limit: int, ids: Sequence[str], *, neighbours: bool = False
    ) -> list[tuple[str, float, dict[str, Any], str]]:
        """`Mem0Table.nearest_and_ids` on the snapshot (exact, as the statement)."""
        cos = self._cosines(vector)
        keep = np.flatnonzero(self._in_scope(scope))
        part = keep[np.argpartition(-cos[keep], limit - 1)[:limit]] if len(keep) > limit else keep
        order = part[np.argsort(-cos[part], kind="stable")]
        chosen = [int(i) for i in order] + [self.versions[m][1] for m in ids if m in self.versions]
        stages = ["vector"] * len(order) + ["id"] * (len(chosen) - len(order))
        out = [(self.ids[i], float(cos[i]), self._payload(i), stage) for i, stage in zip(chosen, stages, strict=True)]
        if neighbours:
            out += [(self.ids[i], float(cos[i]), self._payload(i), "neighbour") for i in self._next_to(chosen)]
        return out

    def payloads_of(self, ids: Sequence[str]) -> list[tuple[str, None, dict[str, Any], str]]:
        """`Mem0Table.payloads` on the snapshot."""
        return [(m, None, self._payload(self.versions[m][1]), "id") for m in ids if m in self.versions]

    def turns(
        self, sessions: Sequence[str], seqs: Sequence[str], vector: Sequence[float] | None
    ) -> list[tuple[str, float | None, dict[str, Any]]]:
        """`Mem0Table.turns` on the snapshot."""
        cos = self._cosines(vector) if vector is not None else None
        wanted_s, wanted_q = set(sessions), set(seqs)
        return [
            (self.ids[i], None if cos is None else float(cos[i]), self._payload(i))
            for i in np.flatnonzero(self.alive)
            if self.seqs[i] is not None and self.sessions[i] in wanted_s and self.seqs[i] in wanted_q
        ]

    def vectors(self, limit: int) -> list[tuple[str, np.ndarray]]:
        """`Mem0Table.user_vectors` on the snapshot: id order, up to `limit`."""
        live = sorted(self.versions.items())[:limit]
        return [(m, self.matrix[place]) for m, (_, place) in live]

    def _next_to(self, chosen: Iterable[int]) -> list[int]:
        """Live raw turns said just before or after a chosen one (`_neighbours_of_c`)."""
        keys: set[tuple[str | None, str]] = set()
        for i in chosen:
            seq = self.seqs[i]
            if seq is not None and _SEQ.match(seq):
                keys.update((self.sessions[i], str(int(seq) + step)) for step in (-1, 1))
        places = self._turn_places
        return sorted(i for key in keys for i in places.get(key, ()) if self.alive[i])

    def _widened(self, dims: int) -> np.ndarray:
        """The matrix, or zero rows of `dims` where it has none yet (no row had a vector)."""
        return self.matrix if self.matrix.shape[1] == dims else np.zeros((len(self.ids), dims), dtype=np.float32)

    def with_rows(self, rows: Sequence[Row], gone: Iterable[str], generation: int) -> Snapshot:
        """A new snapshot: these rows added (or replacing their old version), `gone` dropped.
        What did not change is shared; the appended rows are parsed and indexed only."""
        alive = self.alive.copy()
        versions = dict(self.versions)
        for m in [*gone, *(r.id for r in rows)]:
            old = versions.pop(m, None)
            if old is not None:
                alive[old[1]] = False
        if not rows:
            return replace(self, versions=versions, alive=alive, generation=generation, at=time.monotonic())
        add = _parse(self.user_id, rows, self.matrix.shape[1], start=len(self.ids))
        postings = dict(self.postings)
        for word, places in add.postings.items():
            postings[word] = postings.get(word, []) + places
        versions.update(add.versions)
        return Snapshot(
            user_id=self.user_id,
            ids=self.ids + add.ids,
            versions=versions,
            matrix=np.concatenate([self._widened(add.matrix.shape[1]), add.matrix]),
            alive=np.concatenate([alive, add.alive]),
            payloads=self.payloads + add.payloads,
            folded=self.folded + add.folded,
            sessions=self.sessions + add.sessions,
            categories=self.categories + add.categories,
            superseded=np.concatenate([self.superseded, add.superseded]),
            seqs=self.seqs + add.seqs,
            postings=postings,
            lex=self.lex + add.lex,
            generation=generation,
            at=time.monotonic(),
        )


@dataclass(frozen=True)
class Row:
    """One stored memory as `Mem0Table.user_snapshot` reads it: the payload's fields the
    stages filter and match on come from Postgres' own `->>` and `?` (so they are what the
    SQL path compares), the payload itself as JSON text, parsed only for a candidate."""

    id: str
    version: str  # xmin
    vector: np.ndarray | None
    payload: str  # JSON
    user_id: str | None
    data: str | None
    lex: str | None
    session_id: str | None
    category: str | None
    superseded: bool  # `valid_until` in the payload
    seq: str | None  # where the payload has `seq`


def _parse(user_id: str, rows: Sequence[Row], dims: int, start: int = 0) -> Snapshot:
    """Rows as snapshot columns, places from `start`. A row of another user is refused:
    `Mem0Table` reads by user, so one here is a bug, and it is never shown."""
    for row in rows:
        if row.user_id != user_id:
            raise ValueError(f"a row of another user in {user_id!r}'s snapshot")
    dims = dims or next((len(r.vector) for r in rows if r.vector is not None), 0)
    matrix = np.zeros((len(rows), dims), dtype=np.float32)
    for i, row in enumerate(rows):
        if row.vector is not None:
            matrix[i] = row.vector
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True) + 1e-12
    postings: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        for word in _tokens(row.lex or ""):
            postings.setdefault(word, []).append(start + i)
    return Snapshot(
        user_id=user_id,
        ids=[r.id for r in rows],
        versions={r.id: (r.version, start + i) for i, r in enumerate(rows)},
        matrix=matrix,
        alive=np.ones(len(rows), dtype=bool),
        payloads=[r.payload for r in rows],
        folded=[(r.data or "").lower() for r in rows],
        sessions=[r.session_id for r in rows],
        categories=[r.category for r in rows],
        superseded=np.array([r.superseded for r in rows], dtype=bool),
        seqs=[r.seq for r in rows],
        postings=postings,
        lex=[r.lex for r in rows],
        generation=0,
        at=time.monotonic(),
    )


def build(user_id: str, rows: Iterable[Row], generation: int) -> Snapshot:
    """A snapshot of the user's rows, in id order."""
    return replace(_parse(user_id, sorted(rows, key=lambda r: r.id), 0), generation=generation)


def as_row(snap: Snapshot, place: int) -> Row:
    """A row of a snapshot as read (its text folded already: only the folded form is used)."""
    return Row(
        snap.ids[place], snap.versions[snap.ids[place]][0], snap.matrix[place], snap.payloads[place], snap.user_id,
        snap.folded[place], snap.lex[place], snap.sessions[place], snap.categories[place],
        bool(snap.superseded[place]), snap.seqs[place],
    )  # fmt: skip


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
        terms = sorted(_tokens(snap.lex[place] or ""))[:6]
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
