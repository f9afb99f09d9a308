"""Fixtures the storage tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from memory.storage import session_index
from memory.storage.store import MemoryStore


@pytest.fixture
def indexes(store: MemoryStore) -> Iterator[session_index.SessionIndexes]:
    """The store's snapshots, switched on and at their default bound for the test."""
    idx = store.session_index
    before = (idx.enabled, idx.max_rows)
    idx.enabled, idx.max_rows = True, 10_000
    yield idx
    idx.enabled, idx.max_rows = before
