"""The store's boundary for errors: what the libraries under it raise, put into the
product's tree (`memory/errors.py`), so that every caller above decides by reading
`retryable` and none keeps a list of third-party types.

- Postgres refusing a row for its content (a data exception, a size limit): the same
  on every try, `RefusedByStore` (bad input).
- Any other database error (a lost connection, a read-only database during a failover,
  a pool with no free connection, a lock wait cut short): `StoreUnavailable`, retryable.
- The local files under the store (Mem0's history file, a full or read-only disk):
  `StoreUnavailable`, retryable.
- The embedding API (MEMORY_EMBEDDER=openai) refusing the text (HTTP 400, 413, 422):
  `RefusedByStore`; any other answer or none: `StoreUnavailable`, retryable.
- A Python error that the input may have triggered (a bug: a wrong type, a missing
  key, a bad value) is left as it is: it says nothing about trying again
  (`memory.errors.retryable` is None), and the journal gives such a turn a few tries.
- Anything else (a library's own error class for an outage, "503 service unavailable"):
  `StoreUnavailable`, retryable: a turn dead-lettered during an outage is never written.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg

from memory.errors import AgentMemoryError, retryable
from memory.types import InvalidMemoryText, StoreUnavailable


class RefusedByStore(InvalidMemoryText):
    """The database (or the embedding API) refused this row for its content: a date out
    of range, a value too large. Every try would be refused alike."""


# HTTP statuses of an embedding API that are about the text sent, not the service.
_REFUSED_STATUS = (400, 413, 422)
# Python's errors for a bug that this input may trigger: they say nothing about retrying.
_BUGS = (TypeError, ValueError, AttributeError, LookupError, UnicodeError, AssertionError)


def in_tree(exc: BaseException) -> BaseException:
    """`exc` as the product's tree has it: itself when it already says whether to retry,
    else its translation (the original as its `__cause__`), else itself."""
    if retryable(exc) is not None:
        return exc
    translated: AgentMemoryError | None = None
    if isinstance(exc, psycopg.DataError | psycopg.errors.ProgramLimitExceeded):
        translated = RefusedByStore(f"the database refused the memory: {type(exc).__name__}: {exc}")
    elif _api_error(exc) and getattr(exc, "status_code", None) in _REFUSED_STATUS:
        translated = RefusedByStore(f"the embedding API refused the text (HTTP {exc.status_code})")  # type: ignore[attr-defined]
    elif isinstance(exc, _BUGS) or not isinstance(exc, Exception):
        return exc
    else:  # a lost connection, a full disk, an API's 5xx, a library's own outage error
        translated = StoreUnavailable(f"the memory store failed: {type(exc).__name__}: {str(exc)[:300]}")
    translated.__cause__ = exc
    return translated


def _api_error(exc: BaseException) -> bool:
    """Is `exc` the OpenAI client's error (checked only where that client is loaded: the
    embedder of MEMORY_EMBEDDER=openai)?"""
    openai = sys.modules.get("openai")
    return openai is not None and isinstance(exc, openai.APIError)


@contextmanager
def store_faults() -> Iterator[None]:
    """Raise what fails inside as the product's tree has it (`in_tree`)."""
    try:
        yield
    except Exception as exc:
        translated = in_tree(exc)
        if translated is exc:
            raise
        raise translated from exc
