"""The configuration of everything around the memory: the speech and language models,
the LiveKit project, the operator's web server, the MCP server, the metrics port. Each
is read from a mapping of variables it is given. Pure: nothing here reads the process's
environment (`memory.settings.process` passes it in)."""

from __future__ import annotations

import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum

from memory.settings.parse import ConfigError, choice, flag, integer, listen, networks, number, origin


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


def stt_mode(env: Mapping[str, str]) -> SttMode:
    """`OPENAI_STT_MODE` (default realtime); raise `ConfigError` naming it."""
    return choice(env, "OPENAI_STT_MODE", SttMode, SttMode.REALTIME)


# Variables the LiveKit worker itself needs (checked by agent.py, not by tests).
LIVEKIT_VARS: tuple[str, ...] = ("LIVEKIT_URL", "LIVEKIT_API_KEY", "LIVEKIT_API_SECRET")


@dataclass(frozen=True)
class LiveKitCredentials:
    """The LiveKit project a token is minted for (`python -m memory.livekit.token`)."""

    url: str
    api_key: str
    api_secret: str


def livekit_credentials(env: Mapping[str, str]) -> LiveKitCredentials:
    """`LIVEKIT_URL`, `LIVEKIT_API_KEY`, `LIVEKIT_API_SECRET`; a `ConfigError` names each one missing."""
    values = {name: env.get(name, "").strip() for name in LIVEKIT_VARS}
    missing = [name for name, value in values.items() if not value]
    if missing:
        raise ConfigError(f"{', '.join(missing)} not set: copy them from your LiveKit project into .env")
    return LiveKitCredentials(*values.values())


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


def web_settings(env: Mapping[str, str]) -> WebSettings:
    """The web server's settings; a `ConfigError` names the variable. It never starts
    without `MEMORY_WEB_SECRET`: every page and the token endpoint need it."""
    secret = env.get("MEMORY_WEB_SECRET", "").strip()
    if len(secret) < WEB_SECRET_MIN_CHARS:
        state = "not set" if not secret else f"only {len(secret)} characters"
        raise ConfigError(
            f"MEMORY_WEB_SECRET is {state}: set at least {WEB_SECRET_MIN_CHARS} random characters, e.g. the output of "
            '`python -c "import secrets; print(secrets.token_urlsafe(32))"`'
        )
    host, port = listen(env.get("MEMORY_WEB_LISTEN", "").strip() or "127.0.0.1:8765")
    origins = tuple(
        origin("MEMORY_WEB_CORS_ORIGINS", o) for o in env.get("MEMORY_WEB_CORS_ORIGINS", "").split(",") if o.strip()
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
        public_origin=origin("MEMORY_WEB_PUBLIC_ORIGIN", public) if public else None,
        trusted_proxies=networks("MEMORY_WEB_TRUSTED_PROXIES", env.get("MEMORY_WEB_TRUSTED_PROXIES", "")),
        token_key=token_key,
        token_identities=identities,
        token_room_prefix=prefix,
        token_operator=flag(env, "MEMORY_WEB_TOKEN_OPERATOR", False),
    )


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

        found: frozenset[str] | None | bool = False
        for known, who in self.keys.items():
            if hmac.compare_digest(known.encode(), key.encode()):
                found = who
        if found is False:
            raise KeyError("not a key of this server")
        return found  # type: ignore[return-value]


def mcp_settings(env: Mapping[str, str], *, http: bool = True) -> McpSettings:
    """MEMORY_MCP_KEYS (KEY:alice,bob KEY2:*) and MEMORY_MCP_LISTEN; a `ConfigError` names the
    variable. Over HTTP the server never starts without a key: its keys are its own, never the
    web page's MEMORY_WEB_SECRET, and each says whose memory it opens."""
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
    host, port = listen(env.get("MEMORY_MCP_LISTEN", "").strip() or "127.0.0.1:8766", "MEMORY_MCP_LISTEN")
    hosts = tuple(h for h in env.get("MEMORY_MCP_ALLOWED_HOSTS", "").replace(",", " ").split() if h)
    for h in hosts:
        if "/" in h or "@" in h:
            raise ConfigError(f"MEMORY_MCP_ALLOWED_HOSTS: {h!r} is not HOST or HOST:PORT (mcp.example.com:443, name:*)")
    origins = tuple(
        origin("MEMORY_MCP_ALLOWED_ORIGINS", o)
        for o in env.get("MEMORY_MCP_ALLOWED_ORIGINS", "").split(",")
        if o.strip()
    )
    settings = McpSettings(
        keys=keys,
        host=host,
        port=port,
        allowed_hosts=hosts,
        allowed_origins=origins,
        sessions_per_key=integer(env, "MEMORY_MCP_SESSIONS_PER_KEY", 16, lo=1, hi=10_000),
        session_idle_s=number(env, "MEMORY_MCP_SESSION_IDLE_S", 600.0, lo=1.0, hi=86_400.0),
    )
    if http and not settings.loopback and not hosts:
        raise ConfigError(
            f"MEMORY_MCP_LISTEN={host}:{port} listens beyond this machine: set MEMORY_MCP_ALLOWED_HOSTS to the "
            "names clients reach it by (mcp.example.com, memory-mcp:8766), so that a request for another host "
            "(DNS rebinding) is refused"
        )
    return settings


def prometheus_port(env: Mapping[str, str]) -> int | None:
    """PROMETHEUS_PORT as a number; None when unset or not a number (start-up refuses
    the latter, naming the variable)."""
    raw = env.get("PROMETHEUS_PORT", "").strip()
    try:
        return int(raw) if raw else None
    except ValueError:
        return None


def idle_processes(env: Mapping[str, str]) -> int | None:
    """AGENT_IDLE_PROCESSES: job processes the worker keeps prewarmed (LiveKit's
    `num_idle_processes`); None when unset or not a number (start-up refuses the latter,
    naming the variable): LiveKit's default, one per CPU in `start`."""
    raw = env.get("AGENT_IDLE_PROCESSES", "").strip()
    try:
        return max(0, int(raw)) if raw else None
    except ValueError:
        return None


def llm_check(env: Mapping[str, str]) -> bool:
    """MEMORY_LLM_CHECK (default on): the worker and the chat ask the LLM server once, before
    the first prompt, whether it answers and knows the model; off for a worker started before
    its model server (it then finds out at the first reply) and for offline benchmarks."""
    return flag(env, "MEMORY_LLM_CHECK", True)


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


def cloud_models(env: Mapping[str, str]) -> CloudModels:
    """The cloud models as configured, with the documented defaults."""
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
