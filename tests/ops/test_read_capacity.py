"""Issue 20: many sessions in one process: a look-up waits for a read slot within its
budget and is shed at once when it could not be served in time (docs/hostile-input.md)."""

from __future__ import annotations

import asyncio
import threading

import pytest

import memory.ops.threads as service_module
from memory.ops.threads import MAX_READS_IN_FLIGHT, run_read
from memory.types import StoreBusy


def in_flight() -> int:
    return service_module._reads_in_flight


async def fill_slots() -> tuple[threading.Event, list[asyncio.Future[bool]]]:
    release = threading.Event()
    held = [asyncio.ensure_future(run_read(release.wait, 30)) for _ in range(MAX_READS_IN_FLIGHT)]
    await asyncio.sleep(0)
    assert in_flight() == MAX_READS_IN_FLIGHT
    return release, held


async def test_a_look_up_waits_for_a_slot_that_frees_within_its_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    # 20 sessions in one process: 40% of turns got no memory, refused the moment three
    # look-ups were in flight, though a slot freed a few milliseconds later.
    monkeypatch.setattr(service_module, "_read_s", 0.01)
    release, held = await fill_slots()
    waiting = asyncio.ensure_future(run_read(lambda: "memories", wait_s=5.0))
    await asyncio.sleep(0.05)
    assert not waiting.done()  # queued, not refused
    release.set()
    assert await waiting == "memories"
    await asyncio.gather(*held)
    assert in_flight() == 0


async def test_a_look_up_that_could_not_finish_in_time_is_shed_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(service_module, "_read_s", 0.5)  # reads take half a second here
    release, held = await fill_slots()
    try:
        with pytest.raises(StoreBusy):  # a 150 ms budget cannot wait for a 500 ms read
            await asyncio.wait_for(run_read(lambda: "late", wait_s=0.15), 0.05)
    finally:
        release.set()
        await asyncio.gather(*held)
    assert in_flight() == 0 and not service_module._waiting


async def test_a_waiter_that_gives_up_leaks_no_slot(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(service_module, "_read_s", 0.001)
    release, held = await fill_slots()
    waiters = [asyncio.ensure_future(run_read(lambda: 1, wait_s=0.05)) for _ in range(4)]
    results = await asyncio.gather(*waiters, return_exceptions=True)
    assert all(isinstance(r, StoreBusy) for r in results)  # the budget passed with every slot held
    cancelled = asyncio.ensure_future(run_read(lambda: 1, wait_s=5.0))
    await asyncio.sleep(0.01)
    cancelled.cancel()
    release.set()
    await asyncio.gather(*held)
    await asyncio.sleep(0.05)
    assert in_flight() == 0 and not service_module._waiting
    assert await run_read(lambda: "free again") == "free again"
