"""The configuration modules are pure: importing them and reading every setting from a given
mapping changes nothing in the process (no variable, file, directory, logging handler or
thread) and opens no file; only `memory.settings.process` acts on the process."""

from __future__ import annotations

import ast
import builtins
import importlib
import io
import logging
import os
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
PURE = ("parse", "retrieval", "core", "servers", "checks")
# What the pure modules may not import: what reaches the process's environment, files,
# logging and threads (os.environ, dotenv, tempfile), and the process side itself.
FORBIDDEN_IMPORTS = {"os", "dotenv", "tempfile", "logging", "threading", "shutil", "stat", "memory.settings.process"}

# A mapping that sets every kind of variable: relative and absolute paths, every server.
ENV = {
    "MEM0_SETTING": "gated",
    "MEMORY_DATA_DIR": "relative/data",
    "MEMORY_SPILL_DIR": "/nonexistent/spill",
    "MEMORY_TIMEZONE": "Asia/Shanghai",
    "MEMORY_DATABASE_URL": "postgresql://db/memory",
    "MEMORY_DATABASE_READ_URLS": "postgresql://replica/memory",
    "MEMORY_RETRIEVAL_FUSION": "rrf",
    "MEMORY_ARCHIVE_THRESHOLD": "0.6",
    "MEMORY_WEB_SECRET": "s" * 20,
    "MEMORY_WEB_CORS_ORIGINS": "HTTPS://App.example.com:443/",
    "MEMORY_WEB_TRUSTED_PROXIES": "10.0.0.0/8",
    "MEMORY_MCP_KEYS": "k" * 20 + ":alice",
    "LIVEKIT_URL": "wss://lk.example.com",
    "LIVEKIT_API_KEY": "key",
    "LIVEKIT_API_SECRET": "secret",
    "OPENAI_API_KEY": "sk-test",
    "PROMETHEUS_PORT": "9100",
}


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("name", PURE)
def test_a_configuration_module_imports_nothing_that_acts_on_the_process(name: str) -> None:
    source = ROOT / "memory" / "settings" / f"{name}.py"
    taken = {m for m in _imports(source) if m in FORBIDDEN_IMPORTS or m.split(".")[0] in FORBIDDEN_IMPORTS}
    assert taken == set(), f"memory/settings/{name}.py imports {taken}: that belongs in memory/settings/process.py"
    tree = ast.parse(source.read_text())
    names = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)} | {
        n.id for n in ast.walk(tree) if isinstance(n, ast.Name)
    }
    assert not names & {"environ", "getenv", "putenv", "chdir", "mkdir", "makedirs", "setLevel", "addHandler"}, (
        f"memory/settings/{name}.py acts on the process"
    )


def _state(cwd: Path) -> tuple[Any, ...]:
    return (
        dict(os.environ),
        list(logging.root.handlers),
        {
            name: list(lg.handlers)
            for name, lg in logging.root.manager.loggerDict.items()
            if isinstance(lg, logging.Logger)
        },
        {name: lg.level for name, lg in logging.root.manager.loggerDict.items() if isinstance(lg, logging.Logger)},
        threading.active_count(),
        sorted(p.name for p in cwd.rglob("*")),
        Path.cwd(),
    )


def test_reading_every_setting_from_a_mapping_changes_nothing_and_opens_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for name in [m for m in sys.modules if m == "memory.settings" or m.startswith("memory.settings.")]:
        monkeypatch.delitem(sys.modules, name)  # imported afresh, inside the guard
    opened: list[str] = []

    def no_open(file: Any, *args: Any, **kwargs: Any) -> Any:
        opened.append(str(file))
        raise AssertionError(f"the configuration opened {file}")

    before = _state(tmp_path)
    real_open, real_io_open = builtins.open, io.open
    monkeypatch.setattr(builtins, "open", no_open)
    monkeypatch.setattr(io, "open", no_open)
    modules = {name: importlib.import_module(f"memory.settings.{name}") for name in PURE}
    core, servers, checks = modules["core"], modules["servers"], modules["checks"]
    site = core.Site(cwd=tmp_path / "work", env_file=tmp_path / "project" / ".env", env_file_data_dir="relative/data")
    settings = core.read_settings(ENV, site)
    web = servers.web_settings(ENV)
    mcp = servers.mcp_settings(ENV)
    livekit = servers.livekit_credentials(ENV)
    models = servers.cloud_models(ENV)
    problems = checks.startup_problems("start", ENV, site)
    monkeypatch.setattr(builtins, "open", real_open)
    monkeypatch.setattr(io, "open", real_io_open)
    after = _state(tmp_path)

    assert opened == []
    assert after == before
    # What was read is what the mapping says (and the site: a .env's relative path is the .env's).
    assert settings.mode.value == "GATED" and settings.timezone == "Asia/Shanghai"
    assert settings.data_dir == tmp_path / "project" / "relative" / "data"
    assert settings.spill_dir == Path("/nonexistent/spill") and settings.retrieval.fusion == "rrf"
    assert web.cors_origins == ("https://app.example.com",) and web.trusted_proxies == ("10.0.0.0/8",)
    assert mcp.identities("k" * 20) == frozenset({"alice"})
    assert livekit.url == "wss://lk.example.com" and models.api_key == "sk-test"
    assert problems == []
