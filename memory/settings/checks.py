"""Start-up's view of the configuration: every variable the worker reads, what each
command needs, and every problem with a given mapping of variables, as lines naming them.
Pure: the mapping and the site are given; nothing here reads the process's environment."""

from __future__ import annotations

import difflib
from collections.abc import Mapping

from memory.settings.core import Site, read_settings
from memory.settings.parse import ConfigError, has_url_form, integer
from memory.settings.retrieval import REPLACED
from memory.settings.servers import LIVEKIT_VARS, llm_check, stt_mode

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
MEM0_OWN = frozenset(
    "MEM0_API_KEY MEM0_DIR MEM0_SOURCE MEM0_CLIENT_STACK MEM0_APPLICATION MEM0_TELEMETRY "
    "MEM0_TELEMETRY_SAMPLE_RATE".split()
)
_OURS = ("MEMORY_", "MEM0_")  # our prefixes: an unknown name close to one of ours is a typo


def unknown_variables(env: Mapping[str, str]) -> list[str]:
    """Problems for set variables with our prefixes that nothing reads and that are one
    slip away from one we do (MEM0_SETTINGS, MEMORY_TOPK): without this the worker would
    start in its defaults without a word. Other such names are left alone: platforms set
    their own (Kubernetes' MEMORY_DB_SERVICE_HOST for a service "memory-db", MEMORY_LIMIT)."""

    out = []
    for name in sorted(env):
        if name.startswith(_OURS) and name not in VARIABLES | MEM0_OWN | REPLACED.keys():
            near = difflib.get_close_matches(name, sorted(VARIABLES), n=1, cutoff=0.85)
            if near:
                out.append(f"{name} is not a variable this worker reads; did you mean {near[0]}?")
    return out


# The value `.env.example` ships with: left in place, LiveKit's client would retry it
# for minutes before giving up.
_EXAMPLE_LIVEKIT_URL = "wss://your-project.livekit.cloud"


def _livekit_url_problems(url: str) -> list[str]:
    if url == _EXAMPLE_LIVEKIT_URL:
        return [f"LIVEKIT_URL is still the example value {url!r}: set your LiveKit project's URL"]
    if not has_url_form(url, ("ws", "wss", "http", "https")):
        return [f"LIVEKIT_URL={url!r} is not a ws://, wss://, http:// or https:// URL with a host"]
    return []


def _base_url_problems(url: str) -> list[str]:
    """OPENAI_BASE_URL, when set ("localhost:8000/v1" without its scheme started a worker
    whose every STT, LLM and TTS request failed)."""
    if url and not has_url_form(url, ("http", "https")):
        return [f"OPENAI_BASE_URL={url!r} is not an http:// or https:// URL with a host (http://localhost:8000/v1)"]
    return []


def startup_problems(command: str | None, env: Mapping[str, str], site: Site) -> list[str]:
    """Every configuration problem for `command`, as lines naming the variables (`site`: where
    relative paths start, as `read_settings` takes it)."""
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
        read_settings(env, site)
        stt_mode(env)
        integer(env, "PROMETHEUS_PORT", 0, lo=1, hi=65535)
        integer(env, "AGENT_IDLE_PROCESSES", 0, lo=0, hi=256)
        llm_check(env)
    except ConfigError as exc:
        problems.append(str(exc))
    return problems
