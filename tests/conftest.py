"""Shared fixtures: one real embedded Postgres + Mem0 store for the whole run.

Each test gets its own user id, so tests share the server (it starts once, in
about a second) without seeing each other's memories.
"""

from __future__ import annotations

import atexit
import dataclasses
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest



import memory  # noqa: F401  (switches Mem0 telemetry off before mem0 is imported)
from memory.settings import MemoryMode, MemorySettings, load_settings
from memory.store import MemoryStore


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """Outside pytest's tmp tree: pytest re-locks that to 0700 on every run, and the
    embedded server runs as its own system user that must reach the directory."""
    path = Path(tempfile.mkdtemp(prefix="memory-tests-"))
    # Registered before the server starts, so it runs after the server has stopped.
    atexit.register(shutil.rmtree, path, True)
    return path


@pytest.fixture(scope="session")
def base_settings(data_dir: Path) -> MemorySettings:
    return load_settings({"MEMORY_DATA_DIR": str(data_dir)}, dotenv=False)


@pytest.fixture(scope="session")
def store(base_settings: MemorySettings) -> Iterator[MemoryStore]:
    st = MemoryStore.open(base_settings)
    yield st
    st.close()


@pytest.fixture
def user_id() -> str:
    return f"user-{uuid.uuid4().hex[:10]}"


def make_service(store: MemoryStore, mode: MemoryMode, **kwargs: object) -> "MemoryService":
    """A service over the shared store in the given mode (settings are per service)."""
    from memory.service import MemoryService

    settings = dataclasses.replace(store.settings, mode=mode)
    return MemoryService(store, settings, **kwargs)  # type: ignore[arg-type]
