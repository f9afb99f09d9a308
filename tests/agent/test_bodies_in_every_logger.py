"""A web page where the model should be never reaches the worker's log, whichever logger
writes it: memory's own modules (`memory.journal.queue` logs a failed GATED extraction),
Mem0's (`mem0.memory.main`), LiveKit's sub-loggers. A logger's filter does not see its
children's records, so each of these is a separate way in."""

from __future__ import annotations

import io
import logging

import pytest

from memory import bodies

PAGE = "<!DOCTYPE html><html><head><title>Welcome to nginx!</title></head><body>" + "<p>page text</p>\n" * 50
CUT = "[an HTML page titled 'Welcome to nginx!', not shown]"


@pytest.mark.parametrize("name", ["memory.journal.queue", "mem0.memory.main", "livekit.agents.voice", "memory"])
def test_a_page_in_any_loggers_record_is_cut_after_install(name: str) -> None:
    bodies.install("livekit.agents", "livekit.plugins.openai", "memory")  # as memory.attach and startup.run do
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    logger = logging.getLogger(name)
    logger.addHandler(handler)
    try:
        logger.warning("write queue consumer error: %r", RuntimeError(f"Error code: 404 - {PAGE}"))
        try:
            raise RuntimeError(f"Error code: 404 - {PAGE}")
        except RuntimeError:
            logger.exception("fact extraction failed")
    finally:
        logger.removeHandler(handler)
    printed = out.getvalue()
    assert "page text" not in printed and "<html" not in printed.lower(), printed[:600]
    assert printed.count(CUT) == 2, printed[:600]
    assert "Traceback" in printed
