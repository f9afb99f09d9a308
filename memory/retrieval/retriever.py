"""Finding the memories that matter for a user message, in English and Chinese.

`Retriever.retrieve` is the one entry point: both modes (NORMAL, and GATED with its
category filter) and the benchmark call it. Dense similarity alone misses short
queries ("颜色"), first versus second person ("我喜欢的颜色" against "你喜欢的颜色")
and exact names, so retrieval runs in stages:

1. keywords of the message, pronouns normalised (memory/language/lexical.py);
2. candidate recall, merged and de-duplicated:
   - full-text search over the user's memories on the payload key `lex` (a
     normalised, segmented form the store writes with each memory, GIN-indexed);
   - when that finds fewer than half the requested number, a substring search
     (ILIKE on the text, trigram-indexed), which also finds rows written before
     `lex` existed;
   - vector search (cosine, pgvector) on Mem0's table;
   the lexical recall (both its stages in one statement) runs in a worker thread
   while this one embeds the query, the slow part; one SQL round trip then fetches
   the vector hits, the cosine and payload of the lexical hits, and the raw turns
   said next to any of them. A look-up is thus two round trips to the database,
   one of them beside the embedding: what a remote database costs it
   (`python -m bench.latency.run --db-rtt-ms 2`, docs/scaling.md). With
   MEMORY_RETRIEVAL_ONE_TRIP, one statement after the embedding runs every stage
   (`Mem0Table.candidates`): the same candidates, one round trip, nothing beside the
   embedding (`python -m bench.latency.lookup_floor --ab`, docs/latency.md);
3. every candidate scored lexically (per keyword 1.0/0.7/0.3, keywords weighted
   by their rarity in everyday language and among the candidates) and by its
   cosine similarity, less how crowded the memory's neighbourhood is among the
   user's own memories (`_Density`), fused by a weighted sum, cut at a relevance
   threshold, best first.

Every stage and choice has a switch in `MemorySettings` (MEMORY_RETRIEVAL_*), so
its effect can be measured (`python -m bench.retrieval.run`) and rolled back without a
deploy. With MEMORY_RETRIEVAL_LEXICAL off, retrieval is Mem0's dense `store.search` alone.

Why the vector stage is our SQL (`Mem0Table.nearest_and_ids`) and not `store.search`:
Mem0's search adds its own keyword pass (a sequential to_tsvector over all the
user's rows, ~10 ms at 500 memories, blind to Chinese, replaced here by the
indexed full-text stage), folds
that into its score (so it is no plain cosine), and its pgvector filter passes the
JSON key as a parameter, so once psycopg prepares the statement the plan cannot
use the user index. Same table, same operator, same iterative HNSW settings; about
20 ms less per query on LoCoMo, which the latency budget needs.
"""

from __future__ import annotations

import logging
import math
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import date, datetime
from functools import cached_property
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np

from memory.language import hanzi, lexical
from memory.language.indexing import ASKS_KEY
from memory.language.prefilter import is_acknowledgement
from memory.language.validity import asks_about_past
from memory.ops.threads import DENSITY_POOL, RETRIEVAL_POOL
from memory.retrieval import ranking, structure, validity
from memory.retrieval.query import ParsedQuery
from memory.settings import EmbedderKind, MemoryMode, MemorySettings
from memory.storage.densities import DensityStore, Stored
from memory.storage.embedder import local_model
from memory.storage.lookup import LookupSource, Scope, rank_fulltext
from memory.storage.store import MemoryStore
from memory.types import MemoryRecord, canonical_key, parse_time

logger = logging.getLogger(__name__)

RRF_K = 60  # the usual reciprocal-rank-fusion constant
# The hubness correction (`_Density`): a user's densities are reused this long;
# computed from this many memories on (fewer say little) and up to this many (the
# cost grows with the square; past it, no correction); over this many neighbours.
_DENSITY_TTL = 300.0
_DENSITY_RETRY = 30.0  # after a failed computation
_DENSITY_MIN = 20
_DENSITY_MAX = 20_000
_DENSITY_K = 10

# Payload keys that are ours, not the caller's metadata.
_INTERNAL_KEYS = ("lex", "lex_v", "idx_v", "ctx", ASKS_KEY)
# The neutral pronoun forms match nearly every memory: useless as LIKE patterns.
_NEUTRAL = frozenset({lexical.USER_ZH, lexical.USER_EN})
# Most rows the substring stage examines per query (see `_substring`).
_SUBSTRING_SCAN = 500
# Longest text that can be a bare acknowledgement ("ok thanks so much!"): longer ones are
# not checked, which keeps the check off most candidates.
_ACK_MAX_CHARS = 40
# Sentence ends (kept with their sentence) for choosing what to embed.
_SENTENCE_END = re.compile(r"(?<=[.!?;。！？；…])\s*")


@dataclass
class Candidate:
    """One memory on its way through the stages, with the evidence for its score."""

    id: str
    payload: dict[str, Any] = field(default_factory=dict)
    stages: set[str] = field(default_factory=set)
    cosine: float | None = None
    lexical: float = 0.0
    score: float = 0.0
    levels: list[float] = field(default_factory=list)  # each keyword's match (`_score_lexically`)
    copies: list[str] = field(default_factory=list)  # ids of the copies folded into it (`worth_showing`)

    @property
    def turn(self) -> tuple[str, int] | None:
        """(session, position) of a raw turn that carries them; None for facts."""
        session, seq = self.payload.get("session_id"), self.payload.get("seq")
        return (str(session), int(seq)) if session is not None and isinstance(seq, int) else None

    @property
    def text(self) -> str:
        return self.payload.get("data") or ""

    def record(self) -> MemoryRecord:
        payload = {k: v for k, v in self.payload.items() if k not in _INTERNAL_KEYS}
        if self.copies:
            payload["copies"] = list(self.copies)  # the same said again: one line stands for them
        return MemoryRecord.from_payload(self.id, payload, self.score)


# What became of a candidate (`Retriever.explain`).
RECALLED = "recalled"
BELOW_THRESHOLD = "below_threshold"  # fused score under MEMORY_RETRIEVAL_THRESHOLD
COPY = "copy"  # the same text as a better-ranked memory
ACKNOWLEDGEMENT = "acknowledgement"  # a bare "ok" or 好的: never shown to a reply
PAST_TOP_K = "past_top_k"  # good enough, but MEMORY_TOP_K better ones came first
QUESTION = "question"  # a turn that only asks, beside memories that state something
NO_LOOK_UP = "no_look_up"  # the message gets no look-up at all (`MemoryService.wants_recall`)


@dataclass(frozen=True)
class Considered:
    """One candidate of a look-up: the memory (its `score` the fused one, in [0, 1]), the
    scores that were fused (lexical in [0, 1]; `vector` the cosine mapped onto [0, 1] as
    the fusion takes it; `cosine` itself, after the density correction, in [-1, 1]), the
    stages that found it and what became of it."""

    record: MemoryRecord
    lexical: float
    vector: float
    cosine: float | None
    stages: tuple[str, ...]
    outcome: str


@dataclass(frozen=True)
class Explanation:
    """A look-up explained: the weighted keywords, the relevance threshold, how many a
    reply gets, and every candidate best first."""

    keywords: tuple[tuple[str, float], ...]
    threshold: float
    top_k: int
    considered: tuple[Considered, ...]

    @property
    def recalled(self) -> list[MemoryRecord]:
        """What the reply gets, best first (`Retriever.retrieve`'s answer)."""
        return [c.record for c in self.considered if c.outcome == RECALLED]


@dataclass(frozen=True)
class _Density:
    """How crowded each memory's neighbourhood is, for the hubness correction.

    A small embedder puts every text in a narrow cone. Memories in a crowded part
    of it (the user's everyday chatter, one fact said five ways) are close to
    almost any query and fill the top of every list: "hubs". Cross-domain
    similarity local scaling (CSLS, Conneau et al. 2018) takes each memory's mean
    cosine to its K nearest fellow memories (its density) off its cosine with the
    query: to rank high, a memory must be closer to the query than to its own
    neighbours. We take `weight` times its excess over the user's mean density,
    so a typical memory keeps its cosine and the fusion band stays calibrated.
    Memories written after the densities were computed are left as they are.
    """

    of: Mapping[str, float] = field(default_factory=dict)  # memory id -> density
    mean: float = 0.0
    weight: float = 0.0
    # The user's unit vectors (float16) by memory id, kept when near-copies are folded by
    # them (MEMORY_RETRIEVAL_NEAR_COPIES): read once with the densities, not per look-up.
    rows: Mapping[str, int] = field(default_factory=dict)
    vectors: np.ndarray | None = None

    def vector(self, mem_id: str) -> np.ndarray | None:
        """The memory's unit vector, if it was there when they were read."""
        row = self.rows.get(mem_id)
        return None if row is None or self.vectors is None else self.vectors[row]

    def adjust(self, mem_id: str, cos: float | None) -> float | None:
        """The cosine, less the memory's excess density."""
        if cos is None:
            return None
        density = self.of.get(mem_id)
        return float(cos) if density is None else float(cos) - self.weight * (density - self.mean)


_NO_DENSITY = _Density()


def knn_density(vectors: np.ndarray, k: int, *, block: int = 512) -> np.ndarray:
    """Each row's mean cosine to its k nearest other rows (rows unit length).

    Blocked so memory stays at `block` x n floats; the matrix product runs in BLAS,
    outside the GIL.
    """
    n = len(vectors)
    k = min(k, n - 1)
    out = np.empty(n, dtype=np.float32)
    for start in range(0, n, block):
        sims = vectors[start : start + block] @ vectors.T
        rows = np.arange(sims.shape[0])
        sims[rows, start + rows] = -np.inf  # a memory is not its own neighbour
        out[start : start + block] = np.partition(sims, n - k, axis=1)[:, n - k :].mean(axis=1)
    return out


@dataclass(frozen=True)
class _Query:
    """What a query was turned into: weighted keywords and the search vector."""

    words: list[str]
    weights: list[float]
    vector: list[float] | None
    # The weights scoring used (rarity and idf applied): what a conversation's match reads.
    effective_weights: list[float] = field(default_factory=list)


class Retriever:
    """One user's query in, the top memories out, best first. Thread-safe."""

    def __init__(self, store: MemoryStore, settings: MemorySettings, *, load_segmenter: bool = True) -> None:
        self.store = store
        self.settings = settings
        self._densities: dict[str, tuple[float, _Density]] = {}
        self._refreshing: dict[str, Future[_Density]] = {}
        self._densities_lock = threading.Lock()
        self._zone = ZoneInfo(settings.timezone)
        # Load the segmenter (about a second) now, off the caller's thread, not on the first turn;
        # `load_segmenter=False` for a caller that loads it itself, when it suits it.
        if load_segmenter:
            RETRIEVAL_POOL.submit(lexical.warm_up)

    @property
    def _source(self) -> LookupSource:
        """What the look-up reads (`lookup.py`): the store's routed source, the held rows or SQL."""
        return self.store.lookup

    # ------------------------------------------------------------ public API
    def retrieve(
        self,
        user_id: str,
        query: str,
        *,
        top_k: int | None = None,
        categories: Sequence[str] | None = None,
        context: Sequence[str] = (),
        exclude_session: str | None = None,
        now: datetime | None = None,
    ) -> list[MemoryRecord]:
        """The top memories for `query`, best first.

        `context`: the user's earlier turns in this session, oldest first. A spoken
        turn often leans on them ("what should I wear to it?"); the last
        `retrieval_context_turns` add their keywords and their vector to the query's,
        at `retrieval_context_weight`. `exclude_session`: memories written in this
        session are left out; they are in the conversation already. `now`: when the
        query is asked (default: now), for the days it names ("last week").
        """
        if not query.strip():
            return []
        s = self.settings
        k = top_k or s.recall_top_k
        if not s.retrieval.lexical:  # Mem0's dense search alone
            hits = self.store.search(user_id, query, top_k=k, categories=categories, threshold=s.recall_threshold)
            past = asks_about_past(query, self._today(now))
            return [h for h in hits if (exclude_session is None or h.metadata.get("session_id") != exclude_session)
                    and (past or not h.metadata.get("valid_until"))]  # fmt: skip
        scope = Scope(user_id, categories, exclude_session)
        ranked, floor, _ = self._ranked(scope, self.parse(query, context, now), k, context)
        relevant = ranking.beside_statements([c for c in ranked if c.score >= floor])
        shown = worth_showing(relevant, near=self._near(user_id), limit=k)
        ranking.mark_newer(shown)
        return [c.record() for c in shown]

    def explain(
        self,
        user_id: str,
        query: str,
        *,
        top_k: int | None = None,
        categories: Sequence[str] | None = None,
        context: Sequence[str] = (),
        exclude_session: str | None = None,
        now: datetime | None = None,
    ) -> Explanation:
        """What `retrieve` returns for the same arguments, and why: every candidate with
        the scores that ranked it and what became of it (the operator's "what would it
        recall" page). The same stages in the same order; the recalled are `retrieve`'s."""
        s = self.settings
        k = top_k or s.recall_top_k
        if not query.strip():
            return Explanation((), self.cut(), k, ())
        if not s.retrieval.lexical:  # Mem0's dense search: its score is all there is
            hits = self.retrieve(user_id, query, top_k=k, categories=categories, context=context,
                                 exclude_session=exclude_session, now=now)  # fmt: skip
            considered = tuple(Considered(h, 0.0, h.score, None, ("mem0",), RECALLED) for h in hits)
            return Explanation((), s.recall_threshold, k, considered)
        scope = Scope(user_id, categories, exclude_session)
        ranked, floor, q = self._ranked(scope, self.parse(query, context, now), k, context)
        relevant = ranking.beside_statements([c for c in ranked if c.score >= floor])
        shown = [c.id for c in worth_showing(relevant, near=self._near(user_id))]
        recalled, kept, beside = set(shown[:k]), set(shown), {c.id for c in relevant}
        considered = []
        for c in ranked:
            if c.id in recalled:
                outcome = RECALLED
            elif c.score < floor:
                outcome = BELOW_THRESHOLD
            elif c.id not in beside:
                outcome = QUESTION
            elif c.id in kept:
                outcome = PAST_TOP_K
            elif len(canonical_key(c.text)) <= _ACK_MAX_CHARS and is_acknowledgement(c.text):
                outcome = ACKNOWLEDGEMENT
            else:
                outcome = COPY
            vector = calibrated_cosine(c.cosine, s.retrieval.cos_floor, s.retrieval.cos_ceil)
            cosine = None if c.cosine is None else min(1.0, max(-1.0, c.cosine))  # the density shift can pass 1
            considered.append(Considered(c.record(), c.lexical, vector, cosine, tuple(sorted(c.stages)), outcome))
        return Explanation(tuple(zip(q.words, q.weights, strict=True)), floor, k, tuple(considered))

    def _today(self, now: datetime | None) -> date:
        return (now or datetime.now(self._zone)).astimezone(self._zone).date()

    def parse(self, query: str, context: Sequence[str] = (), now: datetime | None = None) -> ParsedQuery:
        """The message as the look-up reads it, once (`query.ParsedQuery`): the stages take it
        as a value instead of reading the text again."""
        asked = self.embedding_text(query)
        words, weights = self.query_terms(query, context, asked=asked)
        return ParsedQuery(query, asked, self._today(now), tuple(words), tuple(weights))

    def _ranked(
        self, scope: Scope, p: ParsedQuery, k: int, context: Sequence[str]
    ) -> tuple[list[Candidate], float, _Query]:
        """Every candidate of every stage, scored and sorted best first; the threshold. A
        look-up's scope holds the values a GATED fact held before it changed too, for every
        question (`validity.for_its_time` ranks them by the time asked)."""
        s = self.settings
        cands, q, turns = self._candidates(scope, p, top_k=k, context=context)
        ranked = self.with_structure(self.rank(cands), q, p)
        if scope.past:  # each fact's value for the time the question asks about
            ranked = validity.for_its_time(ranked, p.asked, p.today, span=p.span)
        if self._neighbours_count:
            ranked = self.with_neighbours(scope, ranked, q, top_k=k, fetched=turns)
        ranked = self.with_speech_acts(ranked, p.text)
        if scope.past:  # a question about now gets no past value, whatever the stages above did
            ranked = validity.current_first(ranked, p.asked, p.today, span=p.span)
        # The threshold is calibrated on the weighted score; RRF scores are ranks only.
        floor = self.cut() if s.retrieval.fusion == "weighted" else 0.0
        return ranked, floor, q

    def cut(self) -> float:
        """The relevance cut of this mode: GATED's facts are canonical and looked up only
        when the message needs memory (`MEMORY_RETRIEVAL_GATED_THRESHOLD`)."""
        r = self.settings.retrieval
        return r.gated_threshold if self.settings.mode is MemoryMode.GATED else r.threshold

    def with_structure(self, ranked: list[Candidate], q: _Query, p: ParsedQuery) -> list[Candidate]:
        """The fused scores plus what structure says (`structure`): the conversation a
        turn is in, the days the query names, a day said where the query asks when."""
        r = self.settings.retrieval
        if r.fusion != "weighted" or not ranked or (r.sessions <= 0 and r.time_weight <= 0 and r.when_weight <= 0):
            return ranked
        if r.sessions > 0:
            band = (r.cos_floor, r.cos_ceil)
            match = structure.session_scores(
                ranked, q.effective_weights, r.lexical_weight, lambda c: calibrated_cosine(c, *band)
            )
            structure.session_bonus(ranked, match, r.sessions)
        # The time a message asks about is in its last sentences (what the reply answers),
        # not in the chatter before them ("saw a film yesterday... anyway, where do I work?"):
        # `p.span` and `p.asks_when` are read from `p.asked`.
        if r.time_weight > 0:
            structure.time_bonus(ranked, p.span, r.time_weight, self._zone, p.today)
        if r.when_weight > 0 and p.asks_when:
            structure.when_bonus(ranked, r.when_weight)
        return sorted(ranked, key=_best_first)

    def _near(self, user_id: str) -> ranking.NearCopies | None:
        """How near-copies are told for this user's look-up (None: off): by their vectors,
        read at session start with the densities."""
        threshold = self.settings.retrieval.near_copies
        if threshold <= 0:
            return None
        return ranking.NearCopies(threshold, self.density(user_id).vector)

    def with_speech_acts(self, ranked: list[Candidate], query: str) -> list[Candidate]:
        """What was said before what was asked (`ranking`): turns that only ask, and turns
        that only repeat the message, scaled down; then every score `ranking.bounded`
        into [0, 1]."""
        r = self.settings.retrieval
        if not ranked:
            return ranked
        ranking.speech_acts(
            ranked, query, question_weight=r.question_weight, echo_weight=r.echo_weight, pronouns=r.pronouns
        )
        if r.unit_score:
            ranking.bound_scores(ranked)
        return sorted(ranked, key=_best_first)

    def warm_up(self) -> None:
        """Load the segmenter before the first turn (it takes about a second)."""
        lexical.warm_up()

    def embedding_text(self, query: str) -> str:
        """The part of the message that is embedded: all of it, or for the local model
        the last sentences within `retrieval_embed_tokens` tokens.

        The local embedder costs ~0.7 ms per token on two cores (a 300-character
        Chinese turn: ~65 ms, past the reply budget), while keyword recall reads the
        whole message at no cost. In a spoken turn the latest sentences are what
        the reply answers, so the tail is kept.
        """
        limit = self.settings.retrieval.embed_tokens
        if limit <= 0 or self.settings.embedder is not EmbedderKind.LOCAL:
            return query
        count = local_model().token_count
        if count(query, True) <= limit:
            return query
        kept = ""
        for sentence in reversed(_SENTENCE_END.split(query.strip())):
            if not sentence.strip():
                continue
            joint = "" if sentence.rstrip()[-1] in "。！？；…" else " "
            longer = f"{sentence.rstrip()}{joint}{kept}" if kept else sentence
            if count(longer, True) > limit:
                if kept:
                    return kept
                return _tail_within(sentence, limit, count) or sentence[-8:]
            kept = longer
        return kept or query

    def candidates(
        self,
        user_id: str,
        query: str,
        *,
        top_k: int,
        categories: Sequence[str] | None = None,
        context: Sequence[str] = (),
    ) -> list[Candidate]:
        """All stages' candidates for one query, merged, with cosine and lexical scores."""
        return self._candidates(Scope(user_id, categories), self.parse(query, context), top_k=top_k, context=context)[0]

    def query_terms(
        self, query: str, context: Sequence[str] = (), *, asked: str | None = None
    ) -> tuple[list[str], list[float]]:
        """The keywords to match and the weight of each.

        Keywords of the part that is embedded (the whole message, or the tail of a
        long one) weigh 1; those only in the earlier part `retrieval_head_weight`
        (chit-chat before the real question dilutes it); those only in the earlier
        turns of the session (`context`) `retrieval_context_weight`. The word a
        question asks for (`lexical.question_focus`) is then weighed down to
        `retrieval_focus_weight`: its answer seldom repeats it.
        """
        s = self.settings
        words: dict[str, float] = {}
        tail = self.embedding_text(query) if asked is None else asked
        parts = [(tail, 1.0), (query, s.retrieval.head_weight)]
        turns = list(context)[-s.retrieval.context_turns :] if s.retrieval.context_turns else []
        parts += [(turn, s.retrieval.context_weight) for turn in turns]
        for text, weight in parts:
            if weight <= 0:
                continue
            for word in lexical.keywords(text, pronouns=s.retrieval.pronouns):
                words.setdefault(word, weight)
        if s.retrieval.focus_weight < 1.0:
            for word in lexical.question_focus(query, pronouns=s.retrieval.pronouns):
                if word in words:
                    words[word] *= s.retrieval.focus_weight
        return list(words), list(words.values())

    def query_vector(self, query: str, context: Sequence[str] = (), *, asked: str | None = None) -> list[float]:
        """The embedded message, plus the mean vector of the session's earlier turns at
        `retrieval_context_weight`.

        Only earlier turns whose vectors are in the embedder's query cache count:
        each was embedded by its own look-up when it was said, so this costs
        nothing; a turn that had no look-up (GATED skips them) is left out rather
        than embedded on the reply's clock.
        """
        s = self.settings
        model = self.store.embedder
        vector = model.embed(self.embedding_text(query) if asked is None else asked, "search")
        turns = list(context)[-s.retrieval.context_turns :] if s.retrieval.context_turns else []
        peek = getattr(model, "cached", None)
        if not turns or s.retrieval.context_weight <= 0 or peek is None:
            return vector
        earlier = [v for v in (peek(self.embedding_text(t)) for t in turns if t.strip()) if v is not None]
        if not earlier:
            return vector
        share = s.retrieval.context_weight / len(earlier)
        mixed = list(vector)
        for other in earlier:
            for i, x in enumerate(other):
                mixed[i] += share * x
        norm = math.sqrt(sum(x * x for x in mixed)) or 1.0
        return [x / norm for x in mixed]

    def _candidates(
        self,
        scope: Scope,
        p: ParsedQuery,
        *,
        top_k: int,
        context: Sequence[str],
    ) -> tuple[list[Candidate], _Query, dict[tuple[str, int], Candidate] | None]:
        """The candidates, the query, and the raw turns next to them (None: not fetched)."""
        s = self.settings
        words, weights = list(p.words), list(p.weights)
        pool = max(s.retrieval.pool, top_k)
        fetch = self._fetch_size(pool)
        if s.retrieval.one_trip and s.retrieval.vector:
            self._source.check_fresh(scope.user_id)  # another process's forget or redaction: never served
            return self._candidates_in_one_trip(scope, p, context, pool, top_k)
        lexical = bool(words) and (s.retrieval.fulltext or s.retrieval.substring)
        # Beside the query's embedding, before any stage reads the held rows: the freshness
        # check's round trip is hidden behind the embedding instead of added to the look-up.
        recall = RETRIEVAL_POOL.submit(self._fresh_lexical_recall, scope, words if lexical else [], fetch, top_k)
        vector: list[float] | None = None
        try:
            if s.retrieval.vector:
                vector = self.query_vector(p.text, context, asked=p.asked)
        finally:
            lexical_hits = recall.result()
        q = _Query(words, weights, vector)
        merged, turns = self._fetch(scope, vector, lexical_hits, fetch)
        merged = self._statements_first(merged, list(lexical_hits), p.text, pool)
        if words:
            self._score_lexically(q, merged)
        return merged, q, turns

    def _fetch_size(self, pool: int) -> int:
        """Rows each stage fetches: half as many again as its pool when turns that only ask
        have a quota (`_statements_first` then keeps `pool` statements), else the pool.
        Twice the pool cost a look-up about 3 ms (the rows' payloads and their neighbours)."""
        quota = self.settings.retrieval.question_pool
        return pool if quota < 0 or quota >= pool else pool + pool // 2

    def _statements_first(self, cands: list[Candidate], lexical_order: Sequence[str], query: str, pool: int
                          ) -> list[Candidate]:  # fmt: skip
        """Each stage's candidates with what was stated first: per stage (the vector stage
        by cosine, the lexical stages in their own order), the first `pool` turns that
        state something, and at most MEMORY_RETRIEVAL_QUESTION_POOL that only ask or only
        repeat the message (`ranking.asks`, `ranking.echo`). A user who asked the same thing
        ten times had ten of the twenty places; the question turns stay in the store, the
        archive and the page, they only stop taking a statement's place in the pool."""
        quota = self.settings.retrieval.question_pool
        if quota < 0 or quota >= pool or len(cands) <= pool:
            return cands
        pronouns = self.settings.retrieval.pronouns
        said: tuple[str, ...] | None = None
        seen: dict[str, bool] = {}

        def only_asks(c: Candidate) -> bool:  # read once per candidate, and only as far as the walk goes
            nonlocal said
            if c.id not in seen:
                flag = False
                if not c.payload.get("category"):
                    if said is None:
                        said = ranking.words(query, pronouns)
                    flag = ranking.asks(c.payload, c.text) or ranking.echo(said, c.text, pronouns=pronouns)
                seen[c.id] = flag
            return seen[c.id]

        by_id = {c.id: c for c in cands}
        vector = sorted((c for c in cands if "vector" in c.stages), key=lambda c: -(c.cosine or 0.0))
        lexical = [by_id[i] for i in lexical_order if i in by_id]
        kept: set[str] = set()
        for order in (vector, lexical):
            stated = asked = 0
            for c in order:
                if stated >= pool and asked >= quota:
                    break
                if only_asks(c):
                    if asked < quota:
                        asked += 1
                        kept.add(c.id)
                elif stated < pool:
                    stated += 1
                    kept.add(c.id)
        return [c for c in cands if c.id in kept]

    def _candidates_in_one_trip(
        self,
        scope: Scope,
        p: ParsedQuery,
        context: Sequence[str],
        pool: int,
        top_k: int,
    ) -> tuple[list[Candidate], _Query, dict[tuple[str, int], Candidate] | None]:
        """`_candidates` with one call after the query's embedding (`LookupSource.candidates`;
        in SQL one round trip): the same candidates as the lexical recall beside the
        embedding and the vector stage after it, without the second trip, and without the
        keyword SQL's backend taking a core from the embedding's two threads."""
        words, weights = list(p.words), list(p.weights)
        terms, patterns = self._lexical_terms(words)
        vector = self.query_vector(p.text, context, asked=p.asked)
        density = self.density(scope.user_id)
        rows = self._source.candidates(
            scope, vector, terms, patterns, limit=self._fetch_size(pool), scan=_SUBSTRING_SCAN,
            substring_below=top_k / 2, neighbours=self._neighbours_count,
        )  # fmt: skip
        lexical_hits: dict[str, Candidate] = {}
        for mem_id, _cos, _payload, stage in rows:
            if stage in ("fulltext", "substring"):
                lexical_hits.setdefault(mem_id, Candidate(mem_id)).stages.add(stage)
        merged, turns = self._merge(rows, lexical_hits, density, vector)
        merged = self._statements_first(merged, list(lexical_hits), p.text, pool)
        q = _Query(words, weights, vector)
        if words:
            self._score_lexically(q, merged)
        return merged, q, turns

    def rank(self, candidates: list[Candidate]) -> list[Candidate]:
        """Fuse the lexical score with the vector similarity and sort, best first."""
        s = self.settings
        if s.retrieval.fusion == "rrf":
            for cand in candidates:
                cand.score = 0.0
            for signal in (lambda c: c.cosine or 0.0, lambda c: c.lexical):
                for rank, cand in enumerate(sorted(candidates, key=signal, reverse=True)):
                    if signal(cand) > 0:
                        cand.score += 1.0 / (RRF_K + rank + 1)
        else:
            w = s.retrieval.lexical_weight
            for cand in candidates:
                cos = calibrated_cosine(cand.cosine, s.retrieval.cos_floor, s.retrieval.cos_ceil)
                cand.score = (1.0 - w) * cos + w * cand.lexical
        return sorted(candidates, key=_best_first)

    def prepare(self, user_id: str) -> _Density:
        """The user's memory densities (see `_Density`), computed now or by the run
        already going; blocks. For callers off the reply path (the benchmark)."""
        return self.prepare_future(user_id).result()

    def prepare_future(self, user_id: str) -> Future[_Density]:
        """The user's densities as a future: done when cached and fresh, else the
        computation (started if none is running). Session start awaits it
        (`MemoryService.prepare`) without holding a memory read slot."""
        if not self._reads_vectors:
            return _done(_NO_DENSITY)
        with self._densities_lock:
            cached = self._densities.get(user_id)
            if cached is not None and time.monotonic() - cached[0] < _DENSITY_TTL:
                return _done(cached[1])
            return self._start_density(user_id)

    def density(self, user_id: str) -> _Density:
        """The user's densities for a look-up; never computed on the caller's thread.

        Cached per process. Until the first computation has finished (session start
        begins it), look-ups go uncorrected rather than wait: a ranking nicety is not
        worth a stalled reply. After `_DENSITY_TTL` seconds the cached ones are still
        used while fresh ones are computed in the background: they move little when a
        few memories are added.
        """
        if not self._reads_vectors:
            return _NO_DENSITY
        with self._densities_lock:
            cached = self._densities.get(user_id)
            if cached is None or time.monotonic() - cached[0] >= _DENSITY_TTL:
                self._start_density(user_id)
        return cached[1] if cached is not None else _NO_DENSITY

    @property
    def _reads_vectors(self) -> bool:
        """Are the user's vectors read at session start: for the densities, or for near-copies."""
        r = self.settings.retrieval
        return r.density > 0 or r.near_copies > 0

    def _start_density(self, user_id: str) -> Future[_Density]:
        """The running computation for the user, or a new one. Hold `_densities_lock`."""
        running = self._refreshing.get(user_id)
        if running is None:
            running = self._refreshing[user_id] = DENSITY_POOL.submit(self._compute_density, user_id)
        return running

    def _compute_density(self, user_id: str) -> _Density:
        """One read of the user's vectors, the k-nearest-neighbour means in numpy;
        the result goes into the cache. About 1 s at 10,000 memories on 2 cores.

        When the store fails, the densities held so far (or none) are kept and the
        next try waits `_DENSITY_RETRY` seconds: a store in trouble gets no stream of
        store-wide reads from every look-up.
        """
        try:
            density = _NO_DENSITY
            r = self.settings.retrieval
            # Past the bound there is no correction: counted first, not found out by reading the vectors.
            too_many = self._source.user_has_more_than(user_id, _DENSITY_MAX)
            # A process's first densities of the user are the stored ones when still good; a
            # process that held them past the TTL (a long call) computes them with what was added.
            with self._densities_lock:
                held = user_id in self._densities
            stored = None if too_many or held else self._stored_density(user_id)
            # The vectors are read when the densities must be computed, or for the near-copies'
            # fold (which needs them whatever is stored); the k-NN pass only for the former.
            need_vectors = not too_many and (stored is None or r.near_copies > 0)
            rows = self._source.user_vectors(user_id, _DENSITY_MAX + 1) if need_vectors else []
            vectors: np.ndarray | None = None
            if 2 <= len(rows) <= _DENSITY_MAX:
                vectors = np.stack([v for _, v in rows]).astype(np.float32)
                vectors /= np.linalg.norm(vectors, axis=1, keepdims=True) + 1e-12
            kept = r.near_copies > 0 and vectors is not None  # half the floats' size: a near-copy is 0.97 or more alike
            index = {mem_id: i for i, (mem_id, _) in enumerate(rows)} if kept else {}
            copies = vectors.astype(np.float16) if kept and vectors is not None else None
            if stored is not None:  # computed by an earlier process: no k-NN
                of_stored = dict(zip(stored.ids, stored.values.tolist(), strict=True))
                density = _Density(of_stored, stored.mean, r.density, index, copies)
            elif vectors is not None:
                of: dict[str, float] = {}
                mean = 0.0
                if r.density > 0 and len(rows) >= _DENSITY_MIN:
                    values = knn_density(vectors, _DENSITY_K)
                    of = {mem_id: float(d) for (mem_id, _), d in zip(rows, values, strict=True)}
                    mean = float(values.mean())
                    self._store_density(user_id, [m for m, _ in rows], values, mean)
                density = _Density(of, mean, r.density, index, copies)
            now = time.monotonic()
            with self._densities_lock:
                # Users quiet for a few TTLs leave: the cache stays as small as the active set.
                for quiet in [u for u, (at, _) in self._densities.items() if now - at >= 3 * _DENSITY_TTL]:
                    del self._densities[quiet]
                self._densities[user_id] = (now, density)
            return density
        except Exception as exc:  # noqa: BLE001 - a ranking nicety; look-ups go on uncorrected
            logger.warning("memory densities not computed: %r", exc)
            with self._densities_lock:
                held = self._densities.get(user_id)
                kept = held[1] if held is not None else _NO_DENSITY
                self._densities[user_id] = (time.monotonic() - _DENSITY_TTL + _DENSITY_RETRY, kept)
            return kept
        finally:
            with self._densities_lock:
                self._refreshing.pop(user_id, None)

    def _stored_density(self, user_id: str) -> Stored | None:
        """The user's densities as an earlier process stored them, if still good for the
        user's rows now (`densities.Stored.fresh`)."""
        if self.settings.retrieval.density <= 0:
            return None
        try:
            stored = self._density_store.read(user_id)
            if stored is None or stored.k != _DENSITY_K:
                return None
            return stored if stored.fresh(*self._density_store.memories(user_id, stored.ids)) else None
        except Exception as exc:  # noqa: BLE001 - computed here instead
            logger.warning("stored memory densities not read: %r", exc)
            return None

    def _store_density(self, user_id: str, ids: list[str], values: np.ndarray, mean: float) -> None:
        """Keep what was computed for the user's next process (`memory/storage/densities.py`)."""
        try:
            self._density_store.write(user_id, ids, values, mean, _DENSITY_K)
        except Exception as exc:  # noqa: BLE001 - the next process computes them again
            logger.warning("memory densities not stored: %r", exc)

    @cached_property
    def _density_store(self) -> DensityStore:
        return DensityStore(self.store.pool, self.store.table)

    # ---------------------------------------------------------------- stages
    def _fresh_lexical_recall(self, scope: Scope, words: Sequence[str], pool: int, top_k: int) -> dict[str, Candidate]:
        """Another process's forget or redaction seen first (`MemoryStore.check_fresh`: the
        held rows are dropped if the user's generation moved), then the lexical recall."""
        self._source.check_fresh(scope.user_id)
        return self._lexical_recall(scope, words, pool, top_k) if words else {}

    def _lexical_recall(self, scope: Scope, words: Sequence[str], pool: int, top_k: int) -> dict[str, Candidate]:
        """Ids found by full text, then by substring when full text found under top_k / 2:
        one statement, one round trip to the database (`Mem0Table.lexical_hits`)."""
        terms, patterns = self._lexical_terms(words)
        found: dict[str, Candidate] = {}
        if not terms and not patterns:
            return found
        # The scan bound: past `_SUBSTRING_SCAN` matches, more rows would not change what is kept much.
        full, sub = self._source.lexical_hits(
            scope, terms, patterns, scan=_SUBSTRING_SCAN, limit=pool, substring_below=top_k / 2
        )
        for mem_id in rank_fulltext(terms, full, pool):  # the index ranks the hits here, not ts_rank
            found.setdefault(mem_id, Candidate(mem_id)).stages.add("fulltext")
        if len(found) < top_k / 2:  # as the statement decided: substring rows came only then
            for mem_id in sub:
                found.setdefault(mem_id, Candidate(mem_id)).stages.add("substring")
        return found

    def _lexical_terms(self, words: Sequence[str]) -> tuple[list[str], list[str]]:
        """The full-text terms and the substring patterns of the keywords (none for a stage
        that is off). The neutral pronoun forms (用户, user) are in most memories: as recall
        terms they would fetch nearly the whole store (they still count in scoring)."""
        s = self.settings
        terms = [t for t in lexical.search_terms(words) if t not in _NEUTRAL] if s.retrieval.fulltext else []
        patterns = _like_patterns(words) if s.retrieval.substring else []
        return terms, patterns

    def _fetch(
        self,
        scope: Scope,
        vector: list[float] | None,
        lexical_hits: dict[str, Candidate],
        pool: int,
    ) -> tuple[list[Candidate], dict[tuple[str, int], Candidate] | None]:
        """One round trip: the vector stage's top `pool` for the user, plus the cosine
        and payload of every lexical hit, plus (when neighbours count) the raw turns said
        just before and after any of them, returned apart by (session, position) for
        `with_neighbours`. Without a vector, payloads only, and no neighbours (None)."""
        ids = list(lexical_hits)
        density = self.density(scope.user_id) if vector is not None else _NO_DENSITY
        rows: Sequence[tuple[str, float | None, dict[str, Any], str]]
        if vector is None:
            if not ids:
                return [], None
            rows = self._source.payloads(scope.user_id, ids)
        else:
            rows = self._source.nearest_and_ids(scope, vector, pool, ids, neighbours=self._neighbours_count)
        return self._merge(rows, lexical_hits, density, vector)

    def _merge(
        self,
        rows: Sequence[tuple[str, float | None, dict[str, Any], str]],
        lexical_hits: dict[str, Candidate],
        density: _Density,
        vector: list[float] | None,
    ) -> tuple[list[Candidate], dict[tuple[str, int], Candidate] | None]:
        """The fetched rows as candidates (a vector hit under MEMORY_THRESHOLD dropped, one
        candidate per id whatever the stages that found it), and the neighbour rows apart
        by (session, position); None when neighbours were not fetched (no vector)."""
        turns: dict[tuple[str, int], Candidate] | None = {} if vector is not None and self._neighbours_count else None
        floor = self.settings.recall_threshold  # MEMORY_THRESHOLD keeps its meaning: a cosine floor
        merged: dict[str, Candidate] = {}
        for mem_id, cos, payload, stage in rows:
            if stage == "neighbour":
                near = Candidate(mem_id, payload or {}, cosine=density.adjust(mem_id, cos))
                if turns is not None and near.turn is not None:
                    turns[near.turn] = near
                continue
            if stage == "vector" and cos < floor:
                continue
            cand = merged.get(mem_id) or lexical_hits.get(mem_id) or Candidate(mem_id)
            cand.payload = payload or {}
            cand.cosine = density.adjust(mem_id, cos)
            if stage == "vector":
                cand.stages.add("vector")
            merged[mem_id] = cand
        return list(merged.values()), turns

    @property
    def _neighbours_count(self) -> bool:
        """Do raw turns take a share of their neighbours' scores (`with_neighbours`)?"""
        return self.settings.retrieval.neighbours > 0 and self.settings.retrieval.fusion == "weighted"

    def _score_lexically(self, q: _Query, cands: list[Candidate]) -> None:
        """Keyword match score of every candidate, each keyword weighted by where it
        came from (`query_terms`) and, with `retrieval_idf`, by its rarity: a keyword
        found in most candidates, like the neutral 用户 or a speaker's name, says
        little about which one is meant.

        Document frequencies are counted in the candidate pool, not the whole store:
        that costs no query and measured the same as store-wide counts.
        """
        s = self.settings
        levels = [self._levels(q.words, c) for c in cands]
        weights = list(q.weights)
        if s.retrieval.rarity > 0:
            weights = [w * lexical.rarity(word) ** s.retrieval.rarity for w, word in zip(weights, q.words, strict=True)]
        if s.retrieval.idf:
            n = len(cands)
            for i in range(len(q.words)):
                df = sum(1 for lv in levels if lv[i] >= lexical.SUBSTRING)
                weights[i] *= math.log(1.0 + (n + 1) / (df + 1))
        for cand, lv in zip(cands, levels, strict=True):
            cand.lexical = lexical.weighted_mean(lv, weights)
            cand.levels = lv
        q.effective_weights[:] = weights

    def _levels(self, words: Sequence[str], cand: Candidate) -> list[float]:
        """Each keyword's match in the memory's text, or, at `retrieval_context_share`,
        in what it is indexed under beside it (the turn it answers, its resolved dates)."""
        r = self.settings.retrieval
        own = lexical.match_levels(words, lexical.analyse(cand.text, r.pronouns), partial=r.partial)
        extra = _index_extra(cand.payload)
        if not extra or r.context_share <= 0 or all(lv >= lexical.EXACT for lv in own):
            return own
        beside = lexical.match_levels(words, lexical.analyse(extra, r.pronouns), partial=r.partial)
        return [max(a, r.context_share * b) for a, b in zip(own, beside, strict=True)]

    def with_neighbours(
        self,
        scope: Scope,
        ranked: list[Candidate],
        q: _Query,
        *,
        top_k: int,
        fetched: Mapping[tuple[str, int], Candidate] | None = None,
    ) -> list[Candidate]:
        """Raw turns scored with their neighbours: a turn gets `retrieval_neighbours`
        times the score of the better of the turns just before and after it in its
        session, and those neighbours join the candidates.

        A spoken turn often makes sense only next to the one before it ("I've had
        them for three years" answers "how long have you had turtles?"); the memory
        stores each turn alone. Facts (GATED) carry no position and are unchanged.
        `fetched`: the neighbours the look-up's vector query brought along (`_fetch`);
        without them they cost a round trip of their own.
        """
        s = self.settings
        head = [c for c in ranked[: max(top_k, 10)] if c.turn is not None]
        if not head:
            return ranked
        by_turn = {c.turn: c for c in ranked if c.turn is not None}
        wanted = {(session, seq + d) for session, seq in (c.turn for c in head) for d in (-1, 1)}
        missing = [t for t in wanted if t not in by_turn]
        if missing:
            if fetched is not None:
                extra = [fetched[t] for t in missing if t in fetched]
            else:
                extra = self.fetch_turns(scope.user_id, missing, q.vector)
            extra = [c for c in extra if scope.exclude_session is None or c.turn[0] != scope.exclude_session]
            if q.words:
                self._score_lexically(q, extra)
            floor, ceil, w = s.retrieval.cos_floor, s.retrieval.cos_ceil, s.retrieval.lexical_weight
            for cand in extra:
                cand.score = (1.0 - w) * calibrated_cosine(cand.cosine, floor, ceil) + w * cand.lexical
                cand.stages.add("neighbour")
                by_turn[cand.turn] = cand
            ranked = ranked + extra
        own = {c.id: c.score for c in ranked}
        for cand in ranked:
            if cand.turn is None:
                continue
            session, seq = cand.turn
            near = [by_turn[t] for t in ((session, seq - 1), (session, seq + 1)) if t in by_turn]
            if near:
                cand.score = own[cand.id] + s.retrieval.neighbours * max(own[n.id] for n in near)
        return sorted(ranked, key=_best_first)

    def fetch_turns(self, user_id: str, turns: list[tuple[str, int]], vector: list[float] | None) -> list[Candidate]:
        """The user's raw turns at these (session, position) pairs, with their cosine."""
        sessions = sorted({t[0] for t in turns})
        wanted = set(turns)
        density = self.density(user_id) if vector is not None else _NO_DENSITY
        rows = self._source.turns(user_id, sessions, sorted({str(t[1]) for t in turns}), vector)
        out = []
        for mem_id, c, payload in rows:
            cand = Candidate(mem_id, payload or {}, cosine=density.adjust(mem_id, c))
            if cand.turn in wanted:
                out.append(cand)
        return out


def _index_extra(payload: Mapping[str, Any]) -> str:
    """The words a memory is indexed under beside its text (`memory/language/indexing.py`)."""
    ctx = payload.get("ctx")
    days = payload.get("dates")
    parts = [ctx] if isinstance(ctx, str) and ctx else []
    if isinstance(days, list):
        parts += [d for d in days if isinstance(d, str)]
    return "\n".join(parts)


def worth_showing(
    ranked: Iterable[Candidate], *, near: ranking.NearCopies | None = None, limit: int | None = None
) -> list[Candidate]:
    """The candidates a reply can use, best first (the first `limit`): not a copy of a
    better one, and not a bare "ok", "thanks" or 哈哈. With `near`
    (MEMORY_RETRIEVAL_NEAR_COPIES), a memory whose vector is that close to a better
    one's (`ranking.NearCopies`) is a copy too.

    NORMAL keeps every turn, so a user who said "I'm vegetarian" in five sessions has
    five rows, and they filled the block and pushed out the peanut allergy; and turns
    that were only an acknowledgement ("ok", "yeah", 好的) came back as memories. Copies
    are the same text once case, width, spacing and final punctuation are folded
    (`canonical_key`), or with `near` nearly the same meaning: look-alikes that say
    different things are kept. Each memory kept lists the copies of it among all the
    candidates (`Candidate.copies`: one line stands for them) and carries the latest
    date any copy has.
    """
    ranked = list(ranked)
    newest: dict[str, tuple[datetime, str]] = {}  # the latest date each text was said
    for cand in ranked:
        said = cand.payload.get("updated_at") or cand.payload.get("created_at")
        when = parse_time(said)
        key = canonical_key(cand.text)
        if when is not None and (key not in newest or when > newest[key][0]):
            newest[key] = (when, str(said))
    seen: dict[str, Candidate] = {}
    kept: list[Candidate] = []
    for cand in ranked:
        key = canonical_key(cand.text)
        if key in seen:
            seen[key].copies.append(cand.id)
            continue
        full = limit is not None and len(kept) >= limit
        if full and near is None:
            continue  # past the last place: only an exact copy (above) can join a kept memory
        if len(key) <= _ACK_MAX_CHARS and is_acknowledgement(cand.text):
            continue
        like = near.of(cand, kept) if near is not None else None
        if like is not None:
            kept[like].copies.append(cand.id)
            continue
        if full:
            continue
        seen[key] = cand
        kept.append(cand)
    for cand in kept:
        latest = newest.get(canonical_key(cand.text))
        if latest is not None and latest[1] != (cand.payload.get("updated_at") or cand.payload.get("created_at")):
            # The copy kept is the best ranked; the date shown is when it was last said,
            # or "the later note is current" would pick an older fact over it.
            cand.payload = {**cand.payload, "updated_at": latest[1]}
    return kept


def _done(value: _Density) -> Future[_Density]:
    future: Future[_Density] = Future()
    future.set_result(value)
    return future


def _best_first(cand: Candidate) -> tuple[float, str]:
    """Sort key: score descending, ties by id, so the same store gives the same answer."""
    return (-cand.score, cand.id)


def calibrated_cosine(cos: float | None, floor: float, ceil: float) -> float:
    """Cosine mapped from the embedder's working band [floor, ceil] onto [0, 1].

    Cosines of multilingual-e5 are squeezed into a narrow high band (unrelated
    memories ~0.75-0.85, relevant ones ~0.8-0.9), so the raw value cannot be
    added to a keyword score in [0, 1]; the band is a per-embedder setting
    (MEMORY_RETRIEVAL_COS_FLOOR / _CEIL). 0 when unknown (no vector stage).
    """
    if cos is None or ceil <= floor:
        return 0.0
    return min(1.0, max(0.0, (cos - floor) / (ceil - floor)))


def _tail_within(text: str, limit: int, count: Callable[[str, bool], int]) -> str:
    """The longest tail of `text` within `limit` tokens (binary search on the start)."""
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi) // 2
        if count(text[mid:], True) <= limit:
            hi = mid
        else:
            lo = mid + 1
    return text[lo:]


def _like_patterns(words: Sequence[str]) -> list[str]:
    """ILIKE patterns for the keywords: the word itself, or an English stem of 4+ letters
    so that 'hikes' also finds 'hiking'; a Chinese word in traditional characters as well,
    since keywords are folded to simplified and the stored text is not. Neutral pronouns
    and 1-2 letter words would match nearly everything."""
    out: dict[str, None] = {}
    for word in words:
        if word in _NEUTRAL:
            continue
        if word.isascii():
            stem = lexical.stem(word)
            word = stem if len(stem) >= 4 else word
            if len(word) < 3:
                continue
        for form in (word, *hanzi.traditional_forms(word)):
            escaped = re.sub(r"([\\%_])", r"\\\1", form)
            out.setdefault(f"%{escaped}%", None)
    return list(out)


__all__ = ["Candidate", "Considered", "Explanation", "Retriever", "calibrated_cosine"]
