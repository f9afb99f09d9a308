"""The operator's command line answers at once: it never loads LiveKit, `--help` loads
nothing heavy, commands that only count and list never load Mem0; `--json` goes before or
after the command; `memory.forget` and `memory.admin forget` say the same thing."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from memory.admin.cli import main as admin_main
from memory.forget import main as forget_main
from memory.storage.store import MemoryStore
from tests.conftest import HANG_GUARD_S

ROOT = Path(__file__).resolve().parents[2]


def _imported(args: list[str], data_dir: Path, tmp_path: Path) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run `python -m memory.admin ARGS` as an operator does; the modules it imported."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "memory.admin", *args],
        cwd=tmp_path,  # no developer's .env
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(ROOT), "MEMORY_DATA_DIR": str(data_dir)},
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )
    modules = set(re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s*([\w.]+)$", proc.stderr, flags=re.M))
    assert modules, proc.stderr[-2000:]
    return proc, modules


def _top(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


def test_help_answers_before_anything_heavy_is_loaded(store: MemoryStore, tmp_path: Path) -> None:
    proc, modules = _imported(["--help"], store.settings.data_dir, tmp_path)
    assert proc.returncode == 0 and "import" in proc.stdout and "--json" in proc.stdout
    assert not _top(modules) & {"livekit", "mem0", "psycopg", "numpy"}
    assert "memory.storage" not in modules and "memory.admin.cli" not in modules


def test_listing_and_showing_load_neither_livekit_nor_mem0(store: MemoryStore, user_id: str, tmp_path: Path) -> None:
    store.upsert_fact(user_id, "User lives in Paris", category="personal_facts", slot="home_city")
    store.upsert_fact(user_id, "User lives in Lyon", category="personal_facts", slot="home_city")
    proc, modules = _imported(["show", user_id, "--json"], store.settings.data_dir, tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not _top(modules) & {"livekit", "mem0"}, sorted(m for m in modules if m.startswith(("livekit", "mem0")))
    shown = json.loads(proc.stdout)  # the history of a fact, read without Mem0
    (fact,) = [m for m in shown["memories"] if not m.get("valid_until")]  # Paris is also kept as a past value
    assert [(h["event"], h["new"]) for h in fact["history"]] == [("ADD", "User lives in Paris"),
                                                                 ("UPDATE", "User lives in Lyon")]  # fmt: skip


def test_json_goes_before_or_after_the_command(
    store: MemoryStore, user_id: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store.add_raw(user_id, "I keep bees")
    monkeypatch.setenv("MEMORY_DATA_DIR", str(store.settings.data_dir))
    outputs = []
    for argv in (["--json", "show", user_id], ["show", user_id, "--json"], ["show", "--json", user_id]):
        assert admin_main(argv) == 0
        outputs.append(json.loads(capsys.readouterr().out))
    assert outputs[0] == outputs[1] == outputs[2]
    assert [m["text"] for m in outputs[0]["memories"]] == ["I keep bees"]


def test_both_forget_commands_word_it_the_same(
    store: MemoryStore, user_id: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MEMORY_DATA_DIR", str(store.settings.data_dir))
    said = {}
    for name, forget in (
        ("a", lambda u: forget_main(["--yes", u])),
        ("b", lambda u: admin_main(["forget", u, "--yes"])),
    ):
        user = f"{user_id}-{name}"
        store.add_raw(user, "I keep bees")
        assert forget(user) == 0
        first = [line for line in capsys.readouterr().out.replace(user, "USER").splitlines() if "forgot" in line]
        assert forget(user) == 1  # nothing left: said, exit 1
        again = capsys.readouterr()
        said[name] = (first, again.err.replace(user, "USER").split(": ", 1)[1])
    assert said["a"] == said["b"]
    assert said["a"][0][0].startswith("forgot USER: memories 1, mem0_history 1,"), said
    assert "nothing was stored under 'USER'" in said["a"][1]


class _Terminal(io.StringIO):
    """What the operator types at a terminal."""

    def isatty(self) -> bool:
        return True


def test_admin_forget_asks_for_the_identity_on_a_terminal_and_refuses_off_one_without_yes(
    store: MemoryStore, user_id: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store.add_raw(user_id, "I keep bees")
    monkeypatch.setenv("MEMORY_DATA_DIR", str(store.settings.data_dir))
    monkeypatch.setattr(sys, "stdin", io.StringIO(user_id + "\n"))  # a pipe: nobody typed it
    assert admin_main(["forget", user_id]) == 2
    assert "not on a terminal" in capsys.readouterr().err and store.list_user(user_id)
    monkeypatch.setattr(sys, "stdin", _Terminal(user_id.upper() + "\n"))  # typed wrong
    assert admin_main(["forget", user_id]) == 2
    assert "that is not the identity: nothing was forgotten" in capsys.readouterr().err and store.list_user(user_id)
    monkeypatch.setattr(sys, "stdin", _Terminal(user_id + "\n"))
    assert admin_main(["forget", user_id]) == 0
    said = capsys.readouterr()
    assert "Type the identity to confirm" in said.err and f"forgot {user_id}: memories 1" in said.out
    assert store.list_user(user_id) == []
    store.add_raw(user_id, "I keep bees again")
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    assert forget_main([user_id]) == 2 and store.list_user(user_id)  # the other command asks the same
    assert forget_main([user_id, "--yes"]) == 0 and store.list_user(user_id) == []


def test_forget_loads_neither_livekit_nor_mem0(store: MemoryStore, user_id: str, tmp_path: Path) -> None:
    """A forget deletes rows and purges Mem0's history file by SQL: Mem0 and its imports
    (seconds of them) are not needed to delete."""
    store.upsert_fact(user_id, "User lives in Paris", category="personal_facts", slot="home_city")
    proc, modules = _imported(["forget", user_id, "--yes"], store.settings.data_dir, tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"forgot {user_id}: memories 1, mem0_history 1," in proc.stdout
    assert not _top(modules) & {"livekit", "mem0"}, sorted(m for m in modules if m.startswith(("livekit", "mem0")))
    assert store.list_user(user_id) == [] and store.mem0_history.count([]) == 0


def test_the_web_server_says_its_secret_is_missing_before_loading_anything_heavy(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "memory.web"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )
    assert proc.returncode == 2 and "MEMORY_WEB_SECRET is not set" in proc.stderr, proc.stderr[-2000:]
    modules = set(re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s*([\w.]+)$", proc.stderr, flags=re.M))
    assert not _top(modules) & {"aiohttp", "livekit", "mem0", "psycopg", "numpy"}, sorted(_top(modules))
