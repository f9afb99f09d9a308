"""Validated configuration, read once from the environment (and `.env`).

Every variable is read in this package and nowhere else, so a misconfiguration fails at
start-up with one message naming the variable, instead of a traceback on the first user
turn. It has two sides:

- the configuration, pure: frozen values read from a mapping of variables it is given
  (`core`: the memory's `MemorySettings`; `retrieval`: its MEMORY_RETRIEVAL_* knobs;
  `servers`: the models, LiveKit, the web and MCP servers; `checks`: start-up's problems;
  `parse`: the readers they share). They read no environment, write no file, touch no
  logging and start no thread (tests/agent/test_settings_pure.py);
- the process (`process`): the `.env` loaded into the environment, the settings read from
  `os.environ`, and the variables libraries read themselves, set before they load.

The names below are the package's surface; the `env=None` readers are `process`'s.
"""

from __future__ import annotations

from memory.settings.checks import LIVEKIT_VARS, VARIABLES, unknown_variables
from memory.settings.core import DURABLE_CATEGORIES, EmbedderKind, MemoryMode, MemorySettings, Site, read_settings
from memory.settings.parse import ConfigError
from memory.settings.process import (
    SPIN_COUNT,
    cloud_models,
    console_without_livekit,
    current_site,
    default_spill_dir,
    ensure_runtime_dir,
    env_file_note,
    idle_processes,
    livekit_credentials,
    llm_check,
    load_env_file,
    load_settings,
    log_transcripts_mode,
    mcp_settings,
    process_env,
    prometheus_multiproc_dir,
    prometheus_port,
    share_metrics_across_processes,
    startup_problems,
    stt_mode,
    tell_libraries,
    tell_mem0,
    web_settings,
)
from memory.settings.retrieval import RETRIEVAL_FUSIONS, RetrievalSettings
from memory.settings.servers import (
    DEFAULT_STT_MODELS,
    LOOPBACK_HOSTS,
    MCP_KEY_MIN_CHARS,
    WEB_SECRET_MIN_CHARS,
    CloudModels,
    LiveKitCredentials,
    McpSettings,
    SttMode,
    WebSettings,
)

__all__ = [
    "DEFAULT_STT_MODELS",
    "DURABLE_CATEGORIES",
    "LIVEKIT_VARS",
    "LOOPBACK_HOSTS",
    "MCP_KEY_MIN_CHARS",
    "RETRIEVAL_FUSIONS",
    "SPIN_COUNT",
    "VARIABLES",
    "WEB_SECRET_MIN_CHARS",
    "CloudModels",
    "ConfigError",
    "EmbedderKind",
    "LiveKitCredentials",
    "McpSettings",
    "MemoryMode",
    "MemorySettings",
    "RetrievalSettings",
    "Site",
    "SttMode",
    "WebSettings",
    "cloud_models",
    "console_without_livekit",
    "current_site",
    "default_spill_dir",
    "ensure_runtime_dir",
    "env_file_note",
    "idle_processes",
    "livekit_credentials",
    "llm_check",
    "load_env_file",
    "load_settings",
    "log_transcripts_mode",
    "mcp_settings",
    "process_env",
    "prometheus_multiproc_dir",
    "prometheus_port",
    "read_settings",
    "share_metrics_across_processes",
    "startup_problems",
    "stt_mode",
    "tell_libraries",
    "tell_mem0",
    "unknown_variables",
    "web_settings",
]
