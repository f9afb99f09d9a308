"""A turn's write only goes down, checked on the running code: the call stacks of a real
session's writes, from the session event to the store, against the layers that
`lint-imports` keeps (pyproject.toml)."""

from __future__ import annotations

import tomllib
import traceback
from pathlib import Path
from typing import Any

import pytest

import memory.archive.writer as archive_writer
import memory.service as service_module
from memory.journal.queue import DurableWriteQueue
from memory.storage.store import MemoryStore
from tests.archive.test_archive import archived_session

ROOT = Path(__file__).resolve().parents[2]


def _layers() -> list[list[str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]

    def of_memory(c: dict) -> bool:
        return all(name.strip().startswith("memory.") for layer in c["layers"] for name in layer.split("|"))

    (layered,) = [c for c in contracts if c["type"] == "layers" and of_memory(c)]
    return [[name.strip() for name in layer.split("|")] for layer in layered["layers"]]


LAYERS = _layers()


def layer_of(module: str) -> int:
    for index, layer in enumerate(LAYERS):
        if any(module == name or module.startswith(name + ".") for name in layer):
            return index
    raise AssertionError(f"{module} is in no layer of the import contract")


def memory_frames() -> list[str]:
    """The modules of memory/ on the current stack, outermost first."""
    modules = []
    for frame in traceback.extract_stack()[:-2]:
        path = Path(frame.filename)
        if path.is_relative_to(ROOT / "memory"):
            module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            if not modules or modules[-1] != module:
                modules.append(module)
    return modules


async def test_a_turns_write_goes_only_down_from_the_session_event_to_the_store(
    store: MemoryStore, user_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    into_journal: list[list[str]] = []
    into_store: list[list[str]] = []
    real_enqueue = DurableWriteQueue.enqueue

    def enqueue(self: DurableWriteQueue, turn: Any) -> Any:
        into_journal.append(memory_frames())
        return real_enqueue(self, turn)

    def recording(real: Any) -> Any:
        async def run_write(fn: Any, /, *args: Any, **kwargs: Any) -> Any:
            if isinstance(getattr(fn, "__self__", None), MemoryStore):  # the turn's store writes (not the
                into_store.append(memory_frames())  # session's daily counts at its close)
            return await real(fn, *args, **kwargs)

        return run_write

    monkeypatch.setattr(DurableWriteQueue, "enqueue", enqueue)
    monkeypatch.setattr(service_module, "run_write", recording(service_module.run_write))
    real_batch = archive_writer.ArchiveBatcher.write

    async def batch_write(self: Any, turn: Any) -> Any:  # its store write runs in a task of its own
        into_store.append(memory_frames())
        return await real_batch(self, turn)

    monkeypatch.setattr(archive_writer.ArchiveBatcher, "write", batch_write)
    async with archived_session(store, user_id) as run:  # memory and the archive, as agent.py attaches them
        await run.harness.user_says("My sister is called Anna")
    assert into_journal and into_store, (into_journal, into_store)

    # The session's event to the journal: from the glue, each call to the same layer or below.
    for modules in into_journal:
        assert modules[0].startswith("memory.livekit."), modules
        layers = [layer_of(m) for m in modules]
        assert layers == sorted(layers), modules
    # The journal's consumer to the store: each attempt runs the row's handler in a task of
    # its own (bounded by the attempt's timeout); the handler is the one callback, an
    # object the glue gave the queue, not an import. From it every call goes to the same
    # layer or below, and the glue is never on this stack.
    for modules in into_store:
        assert modules and modules[0] == "memory.rows", into_store
        layers = [layer_of(m) for m in modules]
        assert layers == sorted(layers), modules
        assert not any(m.startswith(("memory.livekit", "memory.working")) for m in modules), modules
    kinds = {m[1] for m in into_store}
    assert kinds == {"memory.service", "memory.archive.writer"}, into_store  # a memory and its archive rows
