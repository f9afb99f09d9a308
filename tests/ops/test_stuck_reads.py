"""Reads stuck on a hung store are said at WARNING, once."""

from __future__ import annotations

import asyncio
import logging

import pytest


async def test_reads_stuck_on_a_hung_store_are_said_at_warning_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # Every look-up refused because hung reads held the slots was logged at DEBUG only:
    # an operator saw nothing while the agent had stopped remembering.
    import threading

    from memory.ops import threads as service_module

    monkeypatch.setattr(service_module, "STUCK_READS_WARN_S", 0.0, raising=False)  # "30 s later"
    release = threading.Event()
    hung = [asyncio.ensure_future(service_module.run_read(release.wait, 30)) for _ in range(3)]
    await asyncio.sleep(0)  # they take the read slots
    try:
        with caplog.at_level(logging.WARNING, logger="memory.ops.threads"):
            for _ in range(3):
                with pytest.raises(service_module.StoreBusy):
                    await service_module.run_read(lambda: None)
        stuck = [r for r in caplog.records if "memory reads stuck" in r.getMessage()]
        assert len(stuck) == 1 and stuck[0].levelno == logging.WARNING
    finally:
        release.set()
        await asyncio.gather(*hung)
