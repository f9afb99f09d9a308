"""The look-up seam: what a look-up may read (`Scope`) and the calls it reads with (`LookupSource`).

Two sources implement `LookupSource`, with the same names, signatures and meaning:

- `mem0_table.Mem0Table`: SQL statements on Mem0's table (through the read router);
- `snapshot.Snapshot`: the caller's rows held in the job process, the same stages in numpy.

`session_index.RoutedSource` is the one place that chooses between them for each call
(the snapshot when it may be read and measured faster for the user, else SQL); the store
hands it to the retriever as `MemoryStore.lookup`, and the retriever calls nothing else
for its candidates. `tests/storage/test_lookup_contract.py` runs the same look-ups over
every source (SQL, snapshot, the routed one, and the one-trip `candidates` of each) and
asks for the same ids, stages, order and scores.

Rows a look-up returns:
- `Hit`: (id, cosine or None, payload, stage), stage one of "vector", "id", "fulltext",
  "substring", "neighbour";
- `Turn`: (id, cosine or None, payload) of a raw turn at a (session, position);
- `LexicalHits`: ([(id, lex)] of the full-text stage, [id] of the substring stage).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

Hit = tuple[str, float | None, dict[str, Any], str]
Turn = tuple[str, float | None, dict[str, Any]]
LexicalHits = tuple[list[tuple[str, str | None]], list[str]]


@dataclass(frozen=True)
class Scope:
    """Whose memories a look-up may return: the user's, of these categories (None: any),
    not of the session being served (its turns are in the chat already), and with
    `past` the values a GATED fact held before it changed (rows with `valid_until`);
    without it only what holds now. A look-up does not filter by the days a question
    names: those rank (`memory/retrieval/structure.py`, `validity.py`), they do not hide."""

    user_id: str
    categories: Sequence[str] | None = None
    exclude_session: str | None = None
    past: bool = True


@runtime_checkable
class LookupSource(Protocol):
    """The reads a look-up makes, and nothing else (writes go through the store)."""

    def check_fresh(self, user_id: str) -> None:
        """Before a look-up's first stage: what the later calls read is not older than the
        last forget, redaction or import of the user (any process). SQL and a snapshot are
        what they are; the routed source drops held rows another process made stale."""
        ...

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
        """Every full-text hit of `terms` (id, lex) and, only when those are fewer than
        `substring_below`, the first `scan` rows matching any ILIKE pattern, the `limit`
        matching the most patterns."""
        ...

    def nearest_and_ids(
        self, scope: Scope, vector: Sequence[float], limit: int, ids: Sequence[str], *, neighbours: bool = False
    ) -> list[Hit]:
        """The scope's `limit` rows nearest to `vector` ("vector"), the user's rows with
        these ids ("id"), with `neighbours` the raw turns said just before or after any
        of those ("neighbour"); every row with its cosine."""
        ...

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
        """Every stage at once (MEMORY_RETRIEVAL_ONE_TRIP): the "vector" rows, the lexical
        hits as "fulltext" (cut to `limit` by `rank_fulltext`) and "substring" rows, each
        with its cosine, and with `neighbours` the raw turns next to any of them."""
        ...

    def payloads(self, user_id: str, ids: Sequence[str]) -> list[Hit]:
        """(id, None, payload, "id") of the user's rows with these ids (a look-up without a vector)."""
        ...

    def turns(
        self, user_id: str, sessions: Sequence[str], seqs: Sequence[str], vector: Sequence[float] | None
    ) -> list[Turn]:
        """The user's raw turns in these sessions at these positions (any pairing)."""
        ...

    def user_vectors(self, user_id: str, limit: int) -> list[tuple[str, np.ndarray]]:
        """(id, vector) of up to `limit` of the user's rows, in id order (the densities)."""
        ...

    def user_has_more_than(self, user_id: str, n: int) -> bool:
        """Does the user have more than `n` rows?"""
        ...


def rank_fulltext(terms: Sequence[str], rows: Sequence[tuple[str, str | None]], limit: int) -> list[str]:
    """Ids of the full-text hits, best first, at most `limit`: by the summed rarity among
    the hits (ln(1 + n / df)) of the terms each row's `lex` holds, ties by id. Every hit,
    in the order given, when there are no more than `limit`. `Mem0Table.candidates` makes
    the same cut in SQL."""
    if len(rows) <= limit:
        return [r[0] for r in rows]
    wanted = set(terms)
    held = [wanted.intersection((lex or "").split()) for _, lex in rows]
    df: dict[str, int] = {}
    for terms_held in held:
        for term in terms_held:
            df[term] = df.get(term, 0) + 1
    n = len(rows)
    scores = [sum(math.log(1.0 + n / df[t]) for t in terms_held) for terms_held in held]
    order = sorted(range(n), key=lambda i: (-scores[i], rows[i][0]))  # ties by id: repeatable
    return [rows[i][0] for i in order[:limit]]


__all__ = ["Hit", "LexicalHits", "LookupSource", "Scope", "Turn", "rank_fulltext"]
