"""`memory-admin stats` gives the real size of a store that holds memories (the tables are
partitioned: the parent's own size is 0), and the commands name themselves as they were
started: `memory-admin` / `memory-web` when installed, `python -m memory.admin` from a checkout."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from memory.admin import main as admin_main
from memory.storage.store import MemoryStore

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def _bytes(pretty: str) -> float:
    """Postgres's pg_size_pretty back to bytes ("96 kB" -> 98304)."""
    number, unit = pretty.split()
    return float(number) * {"bytes": 1, "kB": 1024, "MB": 1024**2, "GB": 1024**3}[unit]


def test_stats_gives_the_size_of_a_store_with_memories(
    store: MemoryStore, user_id: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store.add_raw(user_id, "I keep bees on the roof")
    monkeypatch.setenv("MEMORY_DATA_DIR", str(store.settings.data_dir))
    assert admin_main(["stats", "--json"]) == 0
    sizes = json.loads(capsys.readouterr().out)["sizes"]
    assert _bytes(sizes[store.table]) > 8192, sizes  # at least one page of rows, beside its indexes
    assert admin_main(["stats"]) == 0
    table = capsys.readouterr().out
    assert f"size of {store.table}" in table and "0 bytes" not in table


@pytest.mark.parametrize(("script", "module"), [("memory-admin", "memory.admin"), ("memory-web", "memory.web")])
def test_a_command_names_itself_as_it_was_started(script: str, module: str, tmp_path: Path) -> None:
    env = {"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(ROOT)}
    installed = subprocess.run([str(BIN / script), "--help"], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert installed.returncode == 0, installed.stderr
    assert installed.stdout.startswith(f"usage: {script} "), installed.stdout[:200]
    checkout = subprocess.run(
        [sys.executable, "-m", module, "--help"], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert checkout.stdout.startswith(f"usage: python -m {module} "), checkout.stdout[:200]
