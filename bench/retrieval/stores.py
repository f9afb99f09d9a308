"""The retrieval benchmark's stores: one collection per evaluation file and write-side
setting, loaded through the product's write path once and reused while the file and the
settings are the same (a fingerprint), each query's store a user of its own."""

from __future__ import annotations

import hashlib
import os
import re
import sys
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.common.evaldata import RetrievalFile, Store
from bench.retrieval.embed_cache import cached_passages
from bench.retrieval.self_questions import SelfQuestion
from memory.language import lexical
from memory.language.indexing import INDEX_VERSION
from memory.settings import MemorySettings, load_settings
from memory.storage.store import MemoryStore

# Settings that change what is written (the index), not how it is searched: each
# combination is a collection of its own, loaded once.
WRITE_KNOBS = ("retrieval_index_context", "retrieval_index_dates")


# Variants of a file: as it is, and with each store's queries (and a paraphrase of each)
# stored as the user's earlier turns (bench/retrieval/self_questions.py, `--self-questions`).
PLAIN = "plain"


SELFQ = "selfq"


VARIANTS = (PLAIN, SELFQ)


DEFAULT_DATA_DIR = Path("/tmp/bench-memory")


# ------------------------------------------------------------------ loading
def collection_for(data: RetrievalFile, write: tuple[bool, ...] = (False, False), variant: str = PLAIN) -> str:
    suffix = "".join(f"_{k.removeprefix('retrieval_index_')}" for k, on in zip(WRITE_KNOBS, write, strict=True) if on)
    if variant != PLAIN:
        suffix += f"_{variant}"
    return "bench_" + re.sub(r"\W+", "_", data.name).strip("_").lower() + suffix


def user_for(store_id: str) -> str:
    return f"bench:{store_id}"


def bench_env(data_dir: Path) -> dict[str, str]:
    """The environment's MEMORY_/OPENAI_ variables, pointed at the bench's own data dir."""
    env = {k: v for k, v in os.environ.items() if k.startswith(("MEMORY_", "OPENAI_"))}
    env.pop("MEMORY_DATABASE_URL", None)  # never a real database
    env["MEMORY_DATA_DIR"] = str(data_dir)
    return env


def open_store(
    data: RetrievalFile, data_dir: Path, write: tuple[bool, ...] | None = None, variant: str = PLAIN
) -> MemoryStore:
    """The bench store of the file, for one combination of the write-side switches
    (`WRITE_KNOBS`; default: as the environment sets them) and one variant of the file
    (`VARIANTS`), in a collection of its own."""
    env = bench_env(data_dir)
    if write is None:
        write = write_side(load_settings(env, dotenv=False))
    for knob, on in zip(WRITE_KNOBS, write, strict=True):
        env["MEMORY_" + knob.upper()] = "on" if on else "off"
    env["MEMORY_COLLECTION"] = collection_for(data, write, variant)
    return MemoryStore.open(load_settings(env, dotenv=False))


def write_side(settings: MemorySettings) -> tuple[bool, ...]:
    return tuple(bool(getattr(settings.retrieval, k.removeprefix("retrieval_"))) for k in WRITE_KNOBS)


def fingerprint(s: Store, extra: Sequence[SelfQuestion] = ()) -> str:
    """What a store holds (ids and texts, the added turns of a variant, and the version of
    the index form): rows loaded from another version of the file with as many memories
    must not be reused."""
    digest = hashlib.sha256(f"index {INDEX_VERSION}\x00".encode())
    for m in s.memories:
        digest.update(f"{m.id}\x00{m.text}\x00".encode())
    for t in extra:  # (v2: a call of their own only where the file's memories have calls)
        digest.update(f"v2\x00{t.memory_id}\x00{t.text}\x00{t.timestamp}\x00".encode())
    return digest.hexdigest()[:16]


def load(
    store: MemoryStore,
    data: RetrievalFile,
    *,
    reload: bool = False,
    cache: Path | None = None,
    extra: Mapping[str, Sequence[SelfQuestion]] | None = None,
    category: str | None = None,
) -> None:
    """Write every store's memories through `add_raw`, unless they are already there;
    passage vectors from the disk cache `cache` when it has them. `extra`: turns a
    variant adds to each store (by store id), written after its memories, the same way.
    `category`: each memory written as a fact of it (GATED's look-ups read facts only)."""
    if cache is None:
        _load(store, data, reload=reload, extra=extra or {}, category=category)
        return
    with cached_passages(store, cache) as cached:
        _load(store, data, reload=reload, extra=extra or {}, category=category)
    if cached.hits or cached.misses:
        print(f"  embeddings: {cached.hits} from the cache, {cached.misses} computed", file=sys.stderr)


def _load(
    store: MemoryStore,
    data: RetrievalFile,
    *,
    reload: bool,
    extra: Mapping[str, Sequence[SelfQuestion]],
    category: str | None = None,
) -> None:
    counts = _counts(store)
    for s in data.stores:
        user = user_for(s.store_id)
        turns = turn_positions(s)
        added = extra.get(s.store_id, ())
        stamp = fingerprint(s, added)
        size = len(s.memories) + len(added)
        if not reload and counts.get(user, (0, 0))[0] == size and _stamped(store, user, stamp):
            if counts[user][1] < size:  # written by an older `index_text`
                store.reindex_lex(user, pause_s=0.0)
            _refresh_turns(store, user, turns)
            continue
        _delete_user_rows(store, user)
        started = time.perf_counter()
        before: dict[object, str] = {}  # the turn before each, per session: what it answers
        for i, m in enumerate(s.memories, 1):
            meta = {
                "memory_id": m.id,
                "store_id": s.store_id,
                "timestamp": m.timestamp,
                "speaker": m.speaker,
                "session": m.session,
                "bench_store": stamp,
                "category": category,
                **({} if category else turns.get(m.id, {})),  # a fact has no place in a call
            }
            context = [before[m.session]] if m.session is not None and m.session in before else []
            store.add_raw(user, m.text, metadata={k: v for k, v in meta.items() if v is not None}, context=context)
            if m.session is not None:
                before[m.session] = m.text
            if i % 250 == 0 or i == len(s.memories):
                rate = i / (time.perf_counter() - started)
                print(f"  loading {s.store_id}: {i}/{len(s.memories)} ({rate:.0f}/s)", file=sys.stderr)
        # A variant's turns: each the first turn of a call of its own where the file's memories
        # are turns of calls; where they are not (MemDaily's, MADial's), without one either, so
        # that only what they say tells them from the file's memories, not their structure.
        calls = any(m.session is not None for m in s.memories)
        for t in added:
            meta = {"memory_id": t.memory_id, "store_id": s.store_id, "timestamp": t.timestamp,
                    "session_id": t.session if calls else None, "seq": 0 if calls else None,
                    "bench_store": stamp}  # fmt: skip
            store.add_raw(user, t.text, metadata={k: v for k, v in meta.items() if v is not None})
        if added:
            print(f"  loading {s.store_id}: {len(added)} earlier questions", file=sys.stderr)


def turn_positions(s: Store) -> dict[str, dict[str, Any]]:
    """`session_id` and `seq` of each memory that has a session, as the agent writes them
    for a raw turn: the session, and the position in it (the file's order)."""
    out: dict[str, dict[str, Any]] = {}
    seqs: dict[str, int] = defaultdict(int)
    for m in s.memories:
        if m.session is None:
            continue
        session = f"{s.store_id}:{m.session}"
        out[m.id] = {"session_id": session, "seq": seqs[session]}
        seqs[session] += 1
    return out


def _refresh_turns(store: MemoryStore, user: str, turns: dict[str, dict[str, Any]]) -> None:
    """Add `session_id`/`seq` to rows loaded before the bench wrote them."""
    from psycopg import sql
    from psycopg.types.json import Jsonb

    if not turns:
        return
    t = sql.Identifier(store.table)
    with store.pool.connection() as conn:
        rows = conn.execute(
            sql.SQL(
                "SELECT id, payload->>'memory_id' FROM {} WHERE payload->>'user_id' = %s AND NOT payload ? 'seq'"
            ).format(t),
            [user],
        ).fetchall()
        for row_id, memory_id in rows:
            if memory_id in turns:
                conn.execute(sql.SQL("UPDATE {} SET payload = payload || %s WHERE id = %s").format(t),
                             [Jsonb(turns[memory_id]), row_id])  # fmt: skip


def _counts(store: MemoryStore) -> dict[str, tuple[int, int]]:
    """Rows per user, and how many carry the current `lex` version."""
    from psycopg import sql

    query = sql.SQL(
        "SELECT payload->>'user_id', count(*), count(*) FILTER (WHERE payload->>'lex_v' = %s) FROM {} GROUP BY 1"
    ).format(sql.Identifier(store.table))
    with store.pool.connection() as conn:
        rows = conn.execute(query, [str(lexical.LEX_VERSION)]).fetchall()
    return {r[0]: (r[1], r[2]) for r in rows}


def _stamped(store: MemoryStore, user: str, stamp: str) -> bool:
    """Were all of the user's rows loaded from this very store?"""
    from psycopg import sql

    query = sql.SQL(
        "SELECT bool_and(payload->>'bench_store' IS NOT DISTINCT FROM %s) FROM {} WHERE payload->>'user_id' = %s"
    )
    with store.pool.connection() as conn:
        (same,) = conn.execute(query.format(sql.Identifier(store.table)), [stamp, user]).fetchone()
    return bool(same)


def _delete_user_rows(store: MemoryStore, user: str) -> None:
    """Bench collections only: drop a half-loaded store before loading it again."""
    from psycopg import sql

    with store.pool.connection() as conn:
        conn.execute(
            sql.SQL("DELETE FROM {} WHERE payload->>'user_id' = %s").format(sql.Identifier(store.table)), [user]
        )
