"""Configuration errors fail fast and name the variable."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import memory.settings.checks as settings_checks
import memory.settings.retrieval as settings_retrieval
from memory.settings import ConfigError, MemoryMode, load_settings, startup_problems
from tests.conftest import HANG_GUARD_S

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("raw", ["normal", "NORMAL", " Normal "])
def test_mode_normal_in_any_case(raw: str) -> None:
    assert load_settings({"MEM0_SETTING": raw}, dotenv=False).mode is MemoryMode.NORMAL


def test_mode_gated_in_any_case() -> None:
    assert load_settings({"MEM0_SETTING": "gAtEd"}, dotenv=False).mode is MemoryMode.GATED


def test_bad_mode_names_variable_and_allowed_values() -> None:
    with pytest.raises(ConfigError) as err:
        load_settings({"MEM0_SETTING": "sometimes"}, dotenv=False)
    message = str(err.value)
    assert "MEM0_SETTING" in message and "'sometimes'" in message
    assert "NORMAL" in message and "GATED" in message


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"MEMORY_BUDGET_MS": "fast"}, "MEMORY_BUDGET_MS"),
        ({"MEMORY_TOP_K": "0"}, "MEMORY_TOP_K"),
        ({"MEMORY_EMBEDDER": "word2vec"}, "MEMORY_EMBEDDER"),
        ({"MEMORY_EMBEDDER": "openai"}, "OPENAI_API_KEY"),
        ({"MEMORY_DATABASE_URL": "mysql://x"}, "MEMORY_DATABASE_URL"),
        ({"MEMORY_COLLECTION": "mem; drop table"}, "MEMORY_COLLECTION"),
    ],
)
def test_other_bad_values_name_their_variable(env: dict[str, str], variable: str) -> None:
    with pytest.raises(ConfigError, match=variable):
        load_settings(env, dotenv=False)


def test_dev_without_credentials_lists_every_missing_variable() -> None:
    problems = startup_problems("dev", {"LIVEKIT_URL": "wss://x"})
    assert len(problems) == 1
    for name in ("LIVEKIT_API_KEY", "LIVEKIT_API_SECRET", "OPENAI_API_KEY"):
        assert name in problems[0]
    assert "LIVEKIT_URL" not in problems[0]


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("wss://your-project.livekit.cloud", "example value"),  # .env.example's, left in place
        ("not a url", "not a ws://"),
        ("livekit.example.com", "not a ws://"),
        ("wss://", "not a ws://"),
        ("ws://[::1:7880", "not a ws://"),  # urlsplit raises on it
    ],
)
def test_a_livekit_url_that_cannot_work_is_refused_at_start_up(url: str, problem: str) -> None:
    # LiveKit's client retried such a URL for about 2.5 minutes before giving up.
    keys = {"LIVEKIT_API_KEY": "k", "LIVEKIT_API_SECRET": "s", "OPENAI_API_KEY": "sk"}
    (line,) = startup_problems("start", {"LIVEKIT_URL": url, **keys})
    assert line.startswith("LIVEKIT_URL") and problem in line
    assert startup_problems("start", {"LIVEKIT_URL": "wss://my-app.livekit.cloud", **keys}) == []
    assert startup_problems("dev", {"LIVEKIT_URL": "http://localhost:7880", **keys}) == []


def test_download_files_needs_no_credentials() -> None:
    assert startup_problems("download-files", {}) == []


def _run_agent(args: list[str], env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    # Run from an empty directory so no developer's .env leaks into the test.
    return subprocess.run(
        [sys.executable, str(ROOT / "agent.py"), *args],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "MEMORY_LLM_CHECK": "off", **env},  # no LLM server here
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )


def test_agent_dev_without_credentials_exits_with_one_clear_message(tmp_path: Path) -> None:
    proc = _run_agent(["dev"], {"PYTHONPATH": str(ROOT)}, tmp_path)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert "LIVEKIT_URL" in proc.stderr and "OPENAI_API_KEY" in proc.stderr


def test_agent_help_needs_no_configuration_and_flags_count_as_their_variables(tmp_path: Path) -> None:
    helped = _run_agent(["start", "--help"], {"PYTHONPATH": str(ROOT)}, tmp_path)
    assert helped.returncode == 0 and "cannot start" not in helped.stderr
    flags = ["--url", "not a url", "--api-key", "k", "--api-secret=s"]
    proc = _run_agent(["start", *flags], {"PYTHONPATH": str(ROOT), "OPENAI_API_KEY": "sk"}, tmp_path)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "LIVEKIT_URL='not a url'" in proc.stderr  # the flag's value is what was checked
    assert "LIVEKIT_API_KEY" not in proc.stderr and "LIVEKIT_API_SECRET" not in proc.stderr


def test_a_table_made_for_another_embedder_stops_the_worker_at_start_up(tmp_path: Path, store) -> None:
    # Found only in the job processes, it failed each one's start, and LiveKit started
    # another, and another (18 in a minute), without the worker ever stopping.
    env = {
        "PYTHONPATH": str(ROOT), "MEMORY_DATA_DIR": str(store.settings.data_dir), "MEMORY_EMBEDDER": "openai",
        "OPENAI_API_KEY": "sk", "LIVEKIT_URL": "wss://my-app.livekit.cloud", "LIVEKIT_API_KEY": "k",
        "LIVEKIT_API_SECRET": "s",
    }  # fmt: skip
    proc = _run_agent(["start"], env, tmp_path)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "MEMORY_EMBEDDER=openai" in proc.stderr and "384-d" in proc.stderr


def test_agent_with_bad_mode_exits_naming_it(tmp_path: Path) -> None:
    proc = _run_agent(["download-files"], {"PYTHONPATH": str(ROOT), "MEM0_SETTING": "maybe"}, tmp_path)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert "MEM0_SETTING" in proc.stderr and "GATED" in proc.stderr


def test_env_example_lists_every_variable_the_worker_reads() -> None:
    root = Path(__file__).resolve().parents[2]
    code = (
        "".join(p.read_text() for p in sorted((root / "memory" / "settings").glob("*.py")) if p.name != "__init__.py")
        + (root / "agent.py").read_text()
    )
    read = set(re.findall(r'"((?:MEMORY|OPENAI|LIVEKIT|MEM0|PROMETHEUS)_[A-Z_]+)"', code))
    read -= set(settings_retrieval.REPLACED)  # read only to be refused, named in the error
    example = (root / ".env.example").read_text()
    listed = set(re.findall(r"^([A-Z][A-Z0-9_]+)=", example, flags=re.M))
    assert "MEMORY_RETRIEVAL_NEIGHBOURS" in read  # the scan sees the retrieval switches
    read -= settings_checks.MEM0_OWN  # Mem0's own, named only to be let through
    assert read - listed == set()
    assert settings_checks.VARIABLES == listed  # what start-up accepts is what is documented
    for name in read:  # each with a comment line right above it (or above its group)
        before = example.split(f"\n{name}=")[0].rstrip().splitlines()
        assert any(line.startswith("#") for line in before[-3:]), name


def test_a_replaced_variable_fails_fast_naming_its_successor() -> None:
    with pytest.raises(ConfigError, match="MEMORY_RETRIEVAL_CENTERING.*MEMORY_RETRIEVAL_DENSITY"):
        load_settings({"MEMORY_RETRIEVAL_CENTERING": "0.5"}, dotenv=False)


@pytest.mark.parametrize(("name", "hint"), [("MEM0_SETTINGS", "MEM0_SETTING"), ("MEMORY_TOPK", "MEMORY_TOP_K")])
def test_a_misspelt_variable_fails_fast_with_the_likely_name(name: str, hint: str) -> None:
    problems = startup_problems("download-files", {name: "GATED"})
    assert problems == [f"{name} is not a variable this worker reads; did you mean {hint}?"]
    assert startup_problems("download-files", {"MEM0_TELEMETRY": "False", "MEM0_DIR": "/x"}) == []
    # Names a platform sets (Kubernetes services "memory-db" and "mem0", a memory limit) pass.
    platform = {"MEMORY_DB_SERVICE_HOST": "10.0.0.1", "MEMORY_DB_PORT": "tcp://10.0.0.1:5432",
                "MEM0_PORT": "tcp://10.0.0.2:8000", "MEMORY_LIMIT": "2G"}  # fmt: skip
    assert startup_problems("download-files", platform) == []


@pytest.mark.parametrize("name", ["MEMORY_TOP_K", "MEMORY_RETRIEVAL_POOL", "PROMETHEUS_PORT"])
def test_a_fraction_where_a_whole_number_belongs_is_refused(name: str) -> None:
    problems = startup_problems("download-files", {name: "9090.5" if name == "PROMETHEUS_PORT" else "2.7"})
    assert len(problems) == 1 and name in problems[0] and "whole number" in problems[0]


def test_the_env_file_is_read_from_where_the_worker_starts(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("MEM0_SETTING=sometimes\n")
    proc = _run_agent(["download-files"], {"PYTHONPATH": str(ROOT)}, tmp_path)
    assert proc.returncode != 0 and "MEM0_SETTING='sometimes'" in proc.stderr


def test_a_worker_that_could_not_keep_memories_exits_naming_the_variable(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")  # a data directory inside a file: unwritable for any user, root too
    env = {"PYTHONPATH": str(ROOT), "LIVEKIT_URL": "ws://127.0.0.1:1", "LIVEKIT_API_KEY": "k",
           "LIVEKIT_API_SECRET": "s", "OPENAI_API_KEY": "k", "MEMORY_DATA_DIR": str(blocker / "data"),
           "MEMORY_DATABASE_URL": "postgresql://nobody:secret@127.0.0.1:1/memories"}  # fmt: skip
    proc = _run_agent(["start"], env, tmp_path)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "MEMORY_DATA_DIR" in proc.stderr and "MEMORY_DATABASE_URL cannot be reached" in proc.stderr
    # libpq's reason, with the host and port that failed, not only its closing hint
    assert 'connection to server at "127.0.0.1", port 1 failed: Connection refused' in proc.stderr
    assert "secret" not in proc.stderr  # the URL's password is not printed


def test_a_metrics_port_in_use_stops_the_worker_naming_the_variable(tmp_path: Path) -> None:
    # LiveKit found out after start-up, logged a traceback and exited 0: a supervisor that
    # restarts on failure took the worker for stopped on purpose.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {"PYTHONPATH": str(ROOT), "LIVEKIT_URL": "ws://127.0.0.1:1", "LIVEKIT_API_KEY": "k",
               "LIVEKIT_API_SECRET": "s", "OPENAI_API_KEY": "k", "MEMORY_DATA_DIR": str(tmp_path / "data"),
               "PROMETHEUS_PORT": str(port)}  # fmt: skip
        proc = _run_agent(["dev"], env, tmp_path)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert f"PROMETHEUS_PORT={port} cannot be listened on" in proc.stderr


def test_a_worker_that_stops_on_an_error_exits_non_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    """LiveKit's CLI logs the worker's failure (LiveKit unreachable after its retries, a
    port taken after the start-up check) and returns; the process must still fail."""
    import asyncio

    from livekit.agents import AgentServer

    import agent

    async def fails(self: AgentServer, **_: object) -> None:
        raise OSError("address already in use")

    def run_app(server: AgentServer) -> None:  # as LiveKit's CLI: the failure is logged, not raised
        async def worker() -> None:
            try:
                await server.run(devmode=True, unregistered=False)
            except Exception:  # noqa: BLE001 - any failure here is reported, never raised
                pass

        loop = asyncio.new_event_loop()
        try:
            loop.run_until_complete(worker())
        finally:
            loop.close()
        raise SystemExit(0)  # click's standalone mode ends every command so

    monkeypatch.setattr(AgentServer, "run", fails)
    monkeypatch.setattr(agent.cli, "run_app", run_app)
    monkeypatch.setattr(agent.server, "failed", False, raising=False)
    monkeypatch.setattr(sys, "argv", ["agent.py", "download-files"])
    with pytest.raises(SystemExit) as stopped:
        agent.main()
    assert stopped.value.code not in (0, None)


def _has_portaudio() -> bool:
    try:
        import sounddevice  # noqa: F401 - whether PortAudio loads is the check
    except OSError:
        return False
    return True


@pytest.mark.skipif(_has_portaudio(), reason="this machine has PortAudio: console would open the microphone")
def test_console_without_portaudio_exits_naming_what_to_install(tmp_path: Path) -> None:
    # LiveKit's console stopped with a long traceback from deep inside its audio code.
    env = {"PYTHONPATH": str(ROOT), "OPENAI_API_KEY": "sk", "MEMORY_DATA_DIR": str(tmp_path / "data")}
    proc = _run_agent(["console"], env, tmp_path)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "PortAudio" in proc.stderr and "apt install libportaudio2" in proc.stderr
    assert not (tmp_path / "data" / "pg").exists()  # refused before anything was started


def test_the_time_zone_is_an_iana_name_or_start_up_fails_naming_it() -> None:
    assert load_settings({"MEMORY_TIMEZONE": "Asia/Shanghai"}, dotenv=False).timezone == "Asia/Shanghai"
    assert load_settings({}, dotenv=False).timezone == "UTC"
    with pytest.raises(ConfigError, match="MEMORY_TIMEZONE='Beijing'"):
        load_settings({"MEMORY_TIMEZONE": "Beijing"}, dotenv=False)


def test_an_empty_openai_base_url_from_the_example_env_means_openai(tmp_path: Path) -> None:
    # `cp .env.example .env` leaves OPENAI_BASE_URL empty; the OpenAI SDK read that
    # itself as its base URL and every STT, LLM and TTS request failed.
    (tmp_path / ".env").write_text("OPENAI_BASE_URL=\nOPENAI_API_KEY=sk-test\n")
    probe = (
        "import agent, memory\nfrom livekit.plugins import silero\n"
        "memory.load_settings()\n"  # as each job process's prewarm does: it reads .env again
        "plugins = agent.make_plugins(None, silero.VAD.load())\n"
        "print(plugins.llm._client.base_url, plugins.tts._client.base_url, plugins.stt._client.base_url)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=HANG_GUARD_S,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["https://api.openai.com/v1/"] * 3


@pytest.mark.parametrize("url", ["localhost:8000/v1", "api.openai.com", "ftp://example.com/v1", "http://"])
def test_an_openai_base_url_without_scheme_or_host_fails_fast_naming_it(url: str) -> None:
    # The worker started, and every STT, LLM and TTS request failed with "Connection error".
    problems = startup_problems("download-files", {"OPENAI_BASE_URL": url})
    assert len(problems) == 1 and problems[0].startswith(f"OPENAI_BASE_URL={url!r}")


@pytest.mark.parametrize("url", ["", "https://api.openai.com/v1", "http://localhost:8000/v1", "http://[::1]:8000/v1"])
def test_an_openai_base_url_with_scheme_and_host_passes(url: str) -> None:
    assert startup_problems("download-files", {"OPENAI_BASE_URL": url}) == []


def test_the_metrics_port_cannot_be_the_health_check_port_of_start() -> None:
    # Both free, each checked alone; then LiveKit bound 8081 twice and the worker failed.
    from memory.livekit import startup

    problems = startup.port_problems("start", {"PROMETHEUS_PORT": "8081"})
    assert "PROMETHEUS_PORT=8081 is LiveKit's health check port in 'start': choose another" in problems
