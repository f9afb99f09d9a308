"""The value of `retryable` of every error class (its value, not its type): the journal
retries what says True for as long as it takes, dead-letters what says False at once,
and a caller reads nothing else to decide. Expected values written from the tree in
memory/errors.py's docstring, not read from the classes."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory.admin.importer import ImportRefused
from memory.errors import AgentMemoryError, InvalidInput, Unavailable, Unfinished, retryable
from memory.journal.file import DamagedJournal
from memory.journal.queue import DurableWriteQueue
from memory.settings import ConfigError
from memory.storage.contexts import ContextError, ContextFull, ContextNotFound
from memory.storage.faults import RefusedByStore
from memory.storage.locks import LeaseLost
from memory.storage.postgres import EmbeddedStartError
from memory.storage.store import HistoryNotPurged
from memory.types import (
    ExtractionUnavailable,
    ForgottenTurn,
    InvalidMemoryText,
    StoreBusy,
    StoreUnavailable,
    Turn,
    now_iso,
)
from memory.userdata import UnknownUser
from memory.web.token_endpoint import BadRequest, NotAllowed
from memory.working.forms import FormError

RETRYABLE = {
    AgentMemoryError: False, InvalidInput: False, InvalidMemoryText: False, RefusedByStore: False,
    ConfigError: False, ContextError: False, ContextFull: False, ContextNotFound: False, FormError: False,
    BadRequest: False, NotAllowed: False, ImportRefused: False, ForgottenTurn: False, UnknownUser: False,
    DamagedJournal: False, Unavailable: True, StoreUnavailable: True, StoreBusy: True,
    ExtractionUnavailable: True, EmbeddedStartError: True, Unfinished: True, HistoryNotPurged: True,
    LeaseLost: True,
}  # fmt: skip


@pytest.mark.parametrize("cls", list(RETRYABLE), ids=lambda c: c.__name__)
def test_every_error_class_says_whether_to_retry_with_its_documented_value(cls: type[AgentMemoryError]) -> None:
    assert cls.retryable is RETRYABLE[cls]
    exc = cls.__new__(cls)  # the instance's value, without each constructor's arguments
    assert retryable(exc) is RETRYABLE[cls]


def test_unfinished_work_is_retryable_and_says_how_much_was_done() -> None:
    exc = Unfinished("the journal's disk is full", removed=3)
    assert (retryable(exc), exc.removed, str(exc)) == (True, 3, "the journal's disk is full")
    assert Unfinished("x").removed == 0


def test_an_error_that_does_not_say_is_none_and_a_non_bool_is_not_read() -> None:
    assert retryable(ValueError("x")) is None

    class Odd(Exception):
        retryable = "yes"

    assert retryable(Odd()) is None


async def test_a_write_that_lost_its_lease_is_retried_by_the_journal_never_dropped(tmp_path: Path) -> None:
    calls: list[str] = []

    async def write(turn: Turn) -> object:
        calls.append(turn.text)
        if len(calls) <= 7:  # more than MAX_TURN_FAILURES (5): an outage's count, not a turn's
            raise LeaseLost("the lock 'memory-facts:u' ran out during the write and another writer took it")
        return None

    queue = DurableWriteQueue(tmp_path / "journal.sqlite3", write, base_backoff_s=0.001, max_backoff_s=0.002)
    queue.enqueue(Turn("u-lease", "I moved to Porto", "s", "t-lease-1", now_iso()))
    queue.start()
    try:
        assert await queue.drain(60.0) is True
    finally:
        await queue.aclose(1.0)
    assert calls == ["I moved to Porto"] * 8
    assert queue.dead_letters() == []
