"""agent.py's pipeline with memory taken out or watched, shared by the latency and fleet
benchmarks: `memory_off` (the same entrypoint, a plain agent, no hooks) and `Caught`
(the memory objects the entrypoint attaches)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from livekit.agents import Agent

from memory.livekit.session import MemorySession
from memory.prompts import load_prompt


class Caught:
    """Catches the objects of `cls` (MemorySession, ArchiveSession) that agent.entrypoint
    attaches to its session: the bench reads their turn logs and stats."""

    def __init__(self, cls: Any) -> None:
        self.cls = cls
        self.made: list[Any] = []
        self._real = cls.attach

    def __enter__(self) -> Caught:
        made, real = self.made, self._real

        def attach(obj: Any, session: Any) -> None:
            made.append(obj)
            real(obj, session)

        self.cls.attach = attach
        return self

    def __exit__(self, *exc: object) -> None:
        self.cls.attach = self._real


@contextmanager
def memory_off() -> Iterator[None]:
    """The same entrypoint with memory taken out: a plain agent (no injection, no
    working memory), no transcript or write hooks, no archive."""
    import memory
    from memory import api
    from memory.livekit.archive import ArchiveSession

    class PlainAgent(Agent):
        def __init__(self) -> None:
            super().__init__(instructions=load_prompt("system"))

    real_first, real_attach, real_close = memory.first_agent, MemorySession.attach, MemorySession.aclose
    real_archive, real_inject = ArchiveSession.attach, api._inject_into_agents

    async def aclose(self: MemorySession, **_kw: Any) -> None:
        pass

    memory.first_agent = lambda *_args, **_kw: PlainAgent()
    MemorySession.attach = lambda self, session: None
    MemorySession.aclose = aclose
    ArchiveSession.attach = lambda self, session: None
    api._inject_into_agents = lambda session, mem: None
    try:
        yield
    finally:
        memory.first_agent = real_first
        MemorySession.attach = real_attach
        MemorySession.aclose = real_close
        ArchiveSession.attach = real_archive
        api._inject_into_agents = real_inject


@contextmanager
def null() -> Iterator[None]:
    yield
