"""Validated configuration, read once from the environment (and `.env`).

Every variable is read here and nowhere else, so a misconfiguration fails at
start-up with one message naming the variable, instead of a traceback on the
first user turn.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from dotenv import load_dotenv


class ConfigError(ValueError):
    """A configuration problem; the message names the variable(s) and the fix."""


class MemoryMode(str, Enum):
    """`MEM0_SETTING`: NORMAL stores and recalls every turn; GATED is selective."""

    NORMAL = "NORMAL"
    GATED = "GATED"


class EmbedderKind(str, Enum):
    """`MEMORY_EMBEDDER`: the local model (default) or OpenAI's API."""

    LOCAL = "local"
    OPENAI = "openai"


DURABLE_CATEGORIES: tuple[str, ...] = ("relationships", "preferences", "goals", "personal_facts")

# Variables the LiveKit worker itself needs (checked by agent.py, not by tests).
LIVEKIT_VARS: tuple[str, ...] = ("LIVEKIT_URL", "LIVEKIT_API_KEY", "LIVEKIT_API_SECRET")


@dataclass(frozen=True)
class MemorySettings:
    """Everything the memory module needs; built by `load_settings`."""

    mode: MemoryMode = MemoryMode.NORMAL
    data_dir: Path = Path(".data")
    database_url: str | None = None
    collection: str = "memories"
    embedder: EmbedderKind = EmbedderKind.LOCAL
    openai_embedding_model: str = "text-embedding-3-small"
    openai_api_key: str | None = None
    openai_base_url: str | None = None
    recall_top_k: int = 5
    recall_threshold: float = 0.0
    recall_budget_ms: float = 150.0
    profile_max_chars: int = 600
    profile_max_items: int = 12
    max_turn_chars: int = 2000
    durable_categories: tuple[str, ...] = field(default=DURABLE_CATEGORIES)

    @property
    def embedding_dims(self) -> int:
        return 384 if self.embedder is EmbedderKind.LOCAL else 1536

    @property
    def mem0_dir(self) -> Path:
        return self.data_dir / "mem0"

    @property
    def pgdata(self) -> Path:
        return self.data_dir / "pg"


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


def load_settings(env: Mapping[str, str] | None = None, *, dotenv: bool = True) -> MemorySettings:
    """Read and validate the memory settings; raise `ConfigError` naming the variable."""
    if env is None:
        if dotenv:
            load_dotenv(override=False)
        env = os.environ
    mode = _choice(env, "MEM0_SETTING", MemoryMode, MemoryMode.NORMAL)
    embedder = _choice(env, "MEMORY_EMBEDDER", EmbedderKind, EmbedderKind.LOCAL)
    openai_key = env.get("OPENAI_API_KEY") or None
    if embedder is EmbedderKind.OPENAI and not openai_key:
        raise ConfigError("MEMORY_EMBEDDER=openai needs OPENAI_API_KEY")
    database_url = env.get("MEMORY_DATABASE_URL", "").strip() or None
    if database_url and not database_url.startswith(("postgres://", "postgresql://")):
        raise ConfigError("MEMORY_DATABASE_URL must be a postgresql:// URL")
    collection = env.get("MEMORY_COLLECTION", "memories").strip() or "memories"
    if not collection.replace("_", "").isalnum():
        raise ConfigError(f"MEMORY_COLLECTION={collection!r} must be letters, digits and _")
    return MemorySettings(
        mode=mode,  # type: ignore[arg-type]
        data_dir=Path(env.get("MEMORY_DATA_DIR", "").strip() or ".data").expanduser().resolve(),
        database_url=database_url,
        collection=collection,
        embedder=embedder,  # type: ignore[arg-type]
        openai_embedding_model=env.get("OPENAI_EMBEDDING_MODEL", "").strip()
        or "text-embedding-3-small",
        openai_api_key=openai_key,
        openai_base_url=env.get("OPENAI_BASE_URL") or None,
        recall_top_k=int(_number(env, "MEMORY_TOP_K", 5, lo=1, hi=50)),
        recall_threshold=_number(env, "MEMORY_THRESHOLD", 0.0, lo=0.0, hi=1.0),
        recall_budget_ms=_number(env, "MEMORY_BUDGET_MS", 150.0, lo=0.0, hi=10_000.0),
        profile_max_chars=int(_number(env, "MEMORY_PROFILE_MAX_CHARS", 600, lo=50, hi=8000)),
    )


# Which variables each LiveKit CLI command needs before it can do anything useful.
_COMMAND_NEEDS: dict[str, tuple[str, ...]] = {
    "dev": (*LIVEKIT_VARS, "OPENAI_API_KEY"),
    "start": (*LIVEKIT_VARS, "OPENAI_API_KEY"),
    "connect": (*LIVEKIT_VARS, "OPENAI_API_KEY"),
    "console": ("OPENAI_API_KEY",),
}


def startup_problems(command: str | None, env: Mapping[str, str]) -> list[str]:
    """Every configuration problem for `command`, as lines naming the variables."""
    problems: list[str] = []
    missing = [name for name in _COMMAND_NEEDS.get(command or "", ()) if not env.get(name, "").strip()]
    if missing:
        problems.append(f"missing environment variables for '{command}': {', '.join(missing)}")
    try:
        load_settings(env, dotenv=False)
    except ConfigError as exc:
        problems.append(str(exc))
    return problems
