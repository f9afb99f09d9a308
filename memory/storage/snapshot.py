"""One user's rows held in the job process, and the look-up's stages on them (numpy).

A `Snapshot` is a `lookup.LookupSource`: the same calls as `Mem0Table`'s statements, with
their meaning (`lexical_hits`, `nearest_and_ids`, `candidates`, `payloads`, `turns`,
`user_vectors`, `user_has_more_than`), so a look-up finds the same candidates without a
statement. It is read once at session start (`Mem0Table.user_snapshot`) and never changed
in place: a refresh makes a new one (`session_index.SessionIndexes`, which also decides
when one may be read at all).
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

import numpy as np

from memory.storage.lookup import Hit, LexicalHits, Scope, Turn, rank_fulltext

_BLOCK = 1024  # rows per block of the query's cosines (`Snapshot._cosines`)
_PARTS = re.compile(r"[^\W_]+")
_SEQ = re.compile(r"^-?[0-9]{1,18}$")


def tokens(lex: str) -> set[str]:
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
    texts: list[str]  # the payloads as JSON text, parsed for the candidates only
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
        for column in (self.ids, self.texts, self.folded, self.lex, self.sessions, self.categories, self.seqs):
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
        return json.loads(self.texts[i])

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

    def _mine(self, user_id: str) -> None:
        if user_id != self.user_id:  # the router asks the user's own snapshot: another is a bug
            raise ValueError(f"{self.user_id!r}'s snapshot asked for {user_id!r}'s rows")

    def check_fresh(self, user_id: str) -> None:
        """A snapshot is what it was read as: whether it may be read is `SessionIndexes.usable`."""
        self._mine(user_id)

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
        """`Mem0Table.lexical_hits` on the snapshot."""
        self._mine(scope.user_id)
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

    def _nearest(self, scope: Scope, cos: np.ndarray, limit: int) -> list[int]:
        """The places of the scope's `limit` rows of highest cosine, best first (exact)."""
        keep = np.flatnonzero(self._in_scope(scope))
        part = keep[np.argpartition(-cos[keep], limit - 1)[:limit]] if len(keep) > limit else keep
        return [int(i) for i in part[np.argsort(-cos[part], kind="stable")]]

    def _hits(self, cos: np.ndarray, chosen: Sequence[tuple[int, str]], neighbours: bool) -> list[Hit]:
        """The chosen places as rows, and with `neighbours` the raw turns next to any of them."""
        out: list[Hit] = [(self.ids[i], float(cos[i]), self._payload(i), stage) for i, stage in chosen]
        if neighbours:
            out += [
                (self.ids[i], float(cos[i]), self._payload(i), "neighbour") for i in self._next_to(p for p, _ in chosen)
            ]
        return out

    def nearest_and_ids(
        self, scope: Scope, vector: Sequence[float], limit: int, ids: Sequence[str], *, neighbours: bool = False
    ) -> list[Hit]:
        """`Mem0Table.nearest_and_ids` on the snapshot (exact, as the statement)."""
        self._mine(scope.user_id)
        cos = self._cosines(vector)
        chosen = [(i, "vector") for i in self._nearest(scope, cos, limit)]
        chosen += [(self.versions[m][1], "id") for m in ids if m in self.versions]
        return self._hits(cos, chosen, neighbours)

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
        """`Mem0Table.candidates` on the snapshot: the lexical stages, the full-text hits cut
        as the statement cuts them (`rank_fulltext`), and the vector stage, in one call."""
        full, sub = self.lexical_hits(scope, terms, patterns, scan=scan, limit=limit, substring_below=substring_below)
        cos = self._cosines(vector)
        chosen = [(i, "vector") for i in self._nearest(scope, cos, limit)]
        chosen += [(self.versions[m][1], "fulltext") for m in rank_fulltext(terms, full, limit)]
        chosen += [(self.versions[m][1], "substring") for m in sub]
        return self._hits(cos, chosen, neighbours)

    def payloads(self, user_id: str, ids: Sequence[str]) -> list[Hit]:
        """`Mem0Table.payloads` on the snapshot."""
        self._mine(user_id)
        return [(m, None, self._payload(self.versions[m][1]), "id") for m in ids if m in self.versions]

    def turns(
        self, user_id: str, sessions: Sequence[str], seqs: Sequence[str], vector: Sequence[float] | None
    ) -> list[Turn]:
        """`Mem0Table.turns` on the snapshot."""
        self._mine(user_id)
        cos = self._cosines(vector) if vector is not None else None
        wanted_s, wanted_q = set(sessions), set(seqs)
        return [
            (self.ids[i], None if cos is None else float(cos[i]), self._payload(i))
            for i in np.flatnonzero(self.alive)
            if self.seqs[i] is not None and self.sessions[i] in wanted_s and self.seqs[i] in wanted_q
        ]

    def user_vectors(self, user_id: str, limit: int) -> list[tuple[str, np.ndarray]]:
        """`Mem0Table.user_vectors` on the snapshot: id order, up to `limit`."""
        self._mine(user_id)
        live = sorted(self.versions.items())[:limit]
        return [(m, self.matrix[place]) for m, (_, place) in live]

    def user_has_more_than(self, user_id: str, n: int) -> bool:
        self._mine(user_id)
        return self.rows > n

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
            texts=self.texts + add.texts,
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
        for word in tokens(row.lex or ""):
            postings.setdefault(word, []).append(start + i)
    return Snapshot(
        user_id=user_id,
        ids=[r.id for r in rows],
        versions={r.id: (r.version, start + i) for i, r in enumerate(rows)},
        matrix=matrix,
        alive=np.ones(len(rows), dtype=bool),
        texts=[r.payload for r in rows],
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
        snap.ids[place], snap.versions[snap.ids[place]][0], snap.matrix[place], snap.texts[place], snap.user_id,
        snap.folded[place], snap.lex[place], snap.sessions[place], snap.categories[place],
        bool(snap.superseded[place]), snap.seqs[place],
    )  # fmt: skip


__all__ = ["Row", "Snapshot", "as_row", "build", "like_matcher", "tokens"]
