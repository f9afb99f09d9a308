"""Configuration errors fail fast and name the variable."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import memory.settings as settings_mod
from memory.settings import ConfigError, MemoryMode, load_settings, startup_problems

ROOT = Path(__file__).resolve().parents[1]


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


def test_download_files_needs_no_credentials() -> None:
    assert startup_problems("download-files", {}) == []


def _run_agent(args: list[str], env: dict[str, str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    # Run from an empty directory so no developer's .env leaks into the test.
    return subprocess.run(
        [sys.executable, str(ROOT / "agent.py"), *args],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_agent_dev_without_credentials_exits_with_one_clear_message(tmp_path: Path) -> None:
    proc = _run_agent(["dev"], {"PYTHONPATH": str(ROOT)}, tmp_path)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert "LIVEKIT_URL" in proc.stderr and "OPENAI_API_KEY" in proc.stderr


def test_agent_with_bad_mode_exits_naming_it(tmp_path: Path) -> None:
    proc = _run_agent(["download-files"], {"PYTHONPATH": str(ROOT), "MEM0_SETTING": "maybe"}, tmp_path)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    assert "MEM0_SETTING" in proc.stderr and "GATED" in proc.stderr


def test_env_example_lists_every_variable_the_worker_reads() -> None:
    root = Path(__file__).resolve().parent.parent
    code = (root / "memory" / "settings.py").read_text() + (root / "agent.py").read_text()
    read = set(re.findall(r'"((?:MEMORY|OPENAI|LIVEKIT|MEM0|PROMETHEUS)_[A-Z_]+)"', code))
    read -= set(settings_mod._REPLACED)  # read only to be refused, named in the error
    example = (root / ".env.example").read_text()
    listed = set(re.findall(r"^([A-Z][A-Z0-9_]+)=", example, flags=re.M))
    assert "MEMORY_RETRIEVAL_NEIGHBOURS" in read  # the scan sees the retrieval switches
    assert read - listed == set()
    for name in read:  # each with a comment line right above it (or above its group)
        before = example.split(f"\n{name}=")[0].rstrip().splitlines()
        assert any(line.startswith("#") for line in before[-3:]), name


def test_a_replaced_variable_fails_fast_naming_its_successor() -> None:
    with pytest.raises(ConfigError, match="MEMORY_RETRIEVAL_CENTERING.*MEMORY_RETRIEVAL_DENSITY"):
        load_settings({"MEMORY_RETRIEVAL_CENTERING": "0.5"}, dotenv=False)

