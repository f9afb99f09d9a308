"""A damaged Mem0 history file is named at start-up, not found by every session."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import uuid
from pathlib import Path

from memory.settings import load_settings
from memory.storage.history import history_problems
from memory.storage.store import MemoryStore, schema_problems


def test_a_damaged_history_file_fails_the_start_up_check_and_moving_it_aside_loses_no_memory(
    store: MemoryStore, tmp_path: Path
) -> None:
    # Damaged (power loss, a bad disk), the start-up check passed and then every job
    # process's store failed to open with 'file is not a database': memory silently off.
    settings = load_settings({"MEMORY_DATA_DIR": str(tmp_path), "MEMORY_DATABASE_URL": store.url}, dotenv=False)
    user = f"user-{uuid.uuid4().hex[:10]}"
    first = MemoryStore.open(settings)
    try:
        first.add_raw(user, "My bike is red", write_id="w1")
    finally:
        first.close()
    history = settings.mem0_dir / "history.db"
    assert schema_problems(settings) == []
    data = history.read_bytes()
    history.write_bytes(b"\0" * 200 + data[200:])  # the header gone

    problems = schema_problems(settings)
    assert len(problems) == 1, problems
    assert repr(str(history)) in problems[0] and "move it out of the way" in problems[0]
    assert "file is not a database" in problems[0]
    assert history.read_bytes()[:200] == b"\0" * 200  # the check only read it

    history.rename(history.with_name("history.db.damaged"))  # what the message says to do
    assert schema_problems(settings) == []
    again = MemoryStore.open(settings)
    try:
        assert [r.text for r in again.list_user(user)] == ["My bike is red"]  # the memories were in Postgres
    finally:
        again.delete_user(user)
        again.close()


def test_a_history_file_left_mid_change_by_a_killed_process_is_not_called_damaged(
    store: MemoryStore, tmp_path: Path
) -> None:
    # A job process killed while Mem0 wrote leaves a journal to roll back; a read-only
    # look cannot roll it back, and the file is sound: Mem0's next open does it.
    settings = dataclasses.replace(store.settings, data_dir=tmp_path)
    settings.mem0_dir.mkdir()
    killed_mid_change = """
import os, sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("CREATE TABLE history (id TEXT)")
db.execute("PRAGMA cache_size = 1")  # spill to the file before the commit
db.execute("BEGIN")
db.executemany("INSERT INTO history VALUES (?)", [("x" * 500,)] * 2000)
os._exit(0)
"""
    history = settings.mem0_dir / "history.db"
    subprocess.run([sys.executable, "-c", killed_mid_change, str(history)], check=True)
    assert history.with_name("history.db-journal").exists()
    assert history_problems(settings) == []
