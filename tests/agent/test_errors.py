"""One error tree (`memory/errors.py`): every exception class the product defines is an
`AgentMemoryError` that says whether to retry, and nothing decides by a type's name."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from pathlib import Path

import psycopg
import pytest

import memory
from memory.errors import AgentMemoryError, retryable
from memory.storage.faults import RefusedByStore, in_tree
from memory.types import ForgottenTurn, InvalidMemoryText, StoreBusy, StoreUnavailable

ROOT = Path(memory.__file__).parent


def _defined_exceptions() -> list[type[BaseException]]:
    """Every exception class defined in a module of memory/ (its command entry points aside)."""
    found = []
    for info in pkgutil.walk_packages([str(ROOT)], "memory."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, BaseException) and value.__module__ == info.name:
                found.append(value)
    return found


def test_every_exception_the_product_defines_is_in_the_tree_and_says_whether_to_retry() -> None:
    defined = _defined_exceptions()
    assert len(defined) >= 15  # the product's own: bad input, outages, a damaged journal, ...
    outside = [f"{c.__module__}.{c.__qualname__}" for c in defined if not issubclass(c, AgentMemoryError)]
    assert outside == []
    assert all(isinstance(c.retryable, bool) for c in defined)
    assert not issubclass(ForgottenTurn, InvalidMemoryText)  # a turn said before a forget is no bad input
    assert StoreBusy.retryable and StoreUnavailable.retryable and not InvalidMemoryText.retryable


def test_no_decision_in_memory_compares_type_names() -> None:
    """No `type(exc).__name__ in (...)` or `== "StoreBusy"`: the attribute is read instead."""
    offending = []
    for path in ROOT.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare) and re.search(
                r"\.(__name__|__class__|__qualname__)", ast.unparse(node.left)
            ):
                if any(isinstance(c, ast.Constant | ast.Tuple | ast.List | ast.Set) for c in node.comparators):
                    offending.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}: {ast.unparse(node)}")
    assert offending == []


@pytest.mark.parametrize(
    ("error", "verdict"),
    [
        (psycopg.OperationalError("server closed the connection unexpectedly"), True),
        (psycopg.errors.ReadOnlySqlTransaction("cannot execute INSERT in a read-only transaction"), True),
        (OSError(28, "No space left on device"), True),
        (RuntimeError("Error code: 503 - service unavailable"), True),
        (psycopg.errors.DatetimeFieldOverflow("date/time field value out of range"), False),
        (psycopg.errors.ProgramLimitExceeded("index row size exceeds maximum"), False),
        (TypeError("'NoneType' object is not subscriptable"), None),
        (StoreBusy("every read slot is taken"), True),
        (ForgottenTurn("said before the forget"), False),
    ],
)
def test_the_stores_boundary_puts_library_errors_into_the_tree(error: Exception, verdict: bool | None) -> None:
    translated = in_tree(error)
    assert retryable(translated) is verdict
    if verdict is not None and not isinstance(error, AgentMemoryError):
        assert translated.__cause__ is error and type(error).__name__ in str(translated)
    if verdict is False and not isinstance(error, AgentMemoryError):
        assert isinstance(translated, RefusedByStore)
