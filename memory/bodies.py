"""An HTTP response's body never reaches a terminal or a log: a web page in its place.

A model URL that reaches some other web server (a wrong port, a missing /v1) gets HTML
back; the OpenAI client puts that page into its error's text, and every retry warning
and the final error printed it (about 120 lines a chat). `without_body` cuts such text
where the markup starts and says what it was (an HTML page and its title);
`NoResponseBodies` does the same to log records, their messages and their tracebacks."""

from __future__ import annotations

import html
import logging
import re
from typing import Any

_MARKUP = re.compile(r"<(?:!doctype|html|head|body|title|meta|div|p|h1|pre)\b", re.IGNORECASE)
_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)


def page_title(text: str, words: int = 8) -> str | None:
    """The first words of an HTML page's title, or None when it has none."""
    found = _TITLE.search(text)
    if not found:
        return None
    title = " ".join(html.unescape(found.group(1)).split()[:words])
    return "".join(ch if ch.isprintable() else "?" for ch in title)[:80] or None


def without_body(text: str) -> str:
    """`text` cut where an HTML page starts, the page named by its title; unchanged without one."""
    start = _MARKUP.search(text)
    if start is None:
        return text
    title = page_title(text[start.start() :])
    page = f"[an HTML page titled {title!r}, not shown]" if title else "[an HTML page, not shown]"
    return text[: start.start()].rstrip(" '\"") + page


class NoResponseBodies(logging.Filter):
    """A record whose message or exception holds an HTML page: the page left out (the
    traceback is kept, with the exception's text cut)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if _MARKUP.search(message):
            record.msg, record.args = without_body(message), None
        if record.exc_info and record.exc_info[1] is not None and _MARKUP.search(str(record.exc_info[1])):
            formatted = logging.Formatter().formatException(record.exc_info)
            record.exc_info, record.exc_text = None, without_body(formatted)  # the page ends the traceback
        elif record.exc_text and _MARKUP.search(record.exc_text):
            record.exc_text = without_body(record.exc_text)
        return True


def install(*loggers: str) -> None:
    """`NoResponseBodies` on these loggers, once each, and on every record made in this
    process: a logger's filter does not see its children's records (`memory.journal.queue`,
    `mem0.memory.main`, `livekit.agents.voice`), so the cut also runs where records are made."""
    for name in loggers:
        target = logging.getLogger(name)
        if not any(isinstance(f, NoResponseBodies) for f in target.filters):
            target.addFilter(NoResponseBodies())
    previous = logging.getLogRecordFactory()
    if getattr(previous, "cuts_bodies", False):
        return
    cut = NoResponseBodies()

    def make(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        try:
            cut.filter(record)
        except Exception:  # noqa: BLE001, S110 - a message that cannot be formatted: logging reports it
            pass
        return record

    make.cuts_bodies = True  # type: ignore[attr-defined]
    logging.setLogRecordFactory(make)
