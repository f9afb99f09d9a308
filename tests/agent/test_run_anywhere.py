"""Run from anywhere: the `.env` read (or the places looked at) is named when the worker cannot
start, a relative MEMORY_DATA_DIR is the project's wherever a command starts, and a second
worker on one data directory says so."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dotenv
import pytest

import memory.settings.process as settings_mod
from memory.livekit import problems, startup
from memory.settings import load_env_file, load_settings

NAMES = ("MEM0_SETTING", "MEMORY_DATA_DIR", "LIVEKIT_URL", "LIVEKIT_API_KEY", "LIVEKIT_API_SECRET", "OPENAI_API_KEY")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project directory with a `.env`; the real `.env` search (the suite blocks it), and
    whatever the `.env` puts in the environment taken out again afterwards."""
    monkeypatch.setattr(settings_mod, "find_dotenv", dotenv.find_dotenv)
    monkeypatch.setattr(settings_mod, "_env_file", None)
    for name in NAMES:
        monkeypatch.setenv(name, "")  # restored (removed) after the test
        del os.environ[name]
    root = tmp_path / "project"
    (root / "sub" / "dir").mkdir(parents=True)
    return root


def test_a_command_run_from_a_subdirectory_names_the_env_it_read(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (project / ".env").write_text("MEM0_SETTING=sometimes\n")
    monkeypatch.chdir(project / "sub" / "dir")
    with pytest.raises(SystemExit) as stopped:
        startup.check(["agent.py", "dev"])
    first = str(stopped.value.code).splitlines()[0]
    assert first.startswith("agent.py: cannot start") and f"read {project / '.env'}" in first, first


def test_without_an_env_the_places_looked_at_are_named(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(project / "sub")
    with pytest.raises(SystemExit) as stopped:
        startup.check(["agent.py", "dev"])
    message = str(stopped.value.code)
    assert "missing environment variables for 'dev'" in message.splitlines()[0]
    assert f"no .env in {project / 'sub'} or the directories above it" in message.splitlines()[0]


def test_a_relative_data_directory_is_the_projects_wherever_a_command_starts(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (project / ".env").write_text("MEMORY_DATA_DIR=.data\n")
    monkeypatch.chdir(project / "sub" / "dir")
    load_env_file()
    assert load_settings(dotenv=False).data_dir == project / ".data"
    monkeypatch.setenv("MEMORY_DATA_DIR", "elsewhere")  # given in the environment: relative to here
    assert load_settings(dotenv=False).data_dir == project / "sub" / "dir" / "elsewhere"
    (project / ".env").unlink()
    monkeypatch.delenv("MEMORY_DATA_DIR")
    load_env_file()  # no .env at all: the working directory's
    assert load_settings(dotenv=False).data_dir == project / "sub" / "dir" / ".data"


def test_a_second_worker_on_the_same_data_directory_says_so(tmp_path: Path) -> None:
    # This process already the worker of another data directory (as after an earlier test's
    # start-up): that says nothing about who holds this one.
    (tmp_path / "other").mkdir()
    assert startup.other_worker(load_settings({"MEMORY_DATA_DIR": str(tmp_path / "other")}, dotenv=False)) is None
    settings = load_settings({"MEMORY_DATA_DIR": str(tmp_path)}, dotenv=False)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys\n"
         f"fd = os.open({str(tmp_path / problems.WORKER_LOCK)!r}, os.O_RDWR | os.O_CREAT)\n"
         "fcntl.flock(fd, fcntl.LOCK_EX); os.write(fd, str(os.getpid()).encode()); print('held', flush=True)\n"
         "sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        line = startup.other_worker(settings)
        assert line is not None and f"another worker (pid {holder.pid}) already runs on MEMORY_DATA_DIR=" in line
    finally:
        holder.communicate("")  # the first worker stops
    try:
        assert startup.other_worker(settings) is None  # alone now: this process holds it
    finally:
        startup.release_worker_lock()
