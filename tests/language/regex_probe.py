"""Which text the language rules' regular expressions are handed, and how long it is.

A count in place of a stopwatch: the rules' cost is bounded when no pattern ever sees
more than the bounded text, whatever the machine's load (`bench.gate.rule_cost` times them).
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import pytest

_CALLS = ("search", "match", "fullmatch", "finditer", "findall", "sub", "subn", "split")


class _Probe:
    """A compiled pattern that notes the length of every string it is handed."""

    def __init__(self, name: str, pattern: re.Pattern[str], seen: list[tuple[str, int]]) -> None:
        self._name, self._pattern, self._seen = name, pattern, seen

    def __getattr__(self, attr: str) -> Any:
        value = getattr(self._pattern, attr)
        if attr not in _CALLS:
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            string = args[1] if attr in ("sub", "subn") else args[0]
            self._seen.append((self._name, len(string)))
            return value(*args, **kwargs)

        return call


@contextmanager
def probed(monkeypatch: pytest.MonkeyPatch, *modules: ModuleType) -> Iterator[list[tuple[str, int]]]:
    """Every module-level pattern of `modules` probed; yields (pattern name, length) per call."""
    seen: list[tuple[str, int]] = []
    for module in modules:
        for name, value in list(vars(module).items()):
            if isinstance(value, re.Pattern):
                monkeypatch.setattr(module, name, _Probe(f"{module.__name__}.{name}", value, seen))
    yield seen


def with_submodules(package: ModuleType) -> tuple[ModuleType, ...]:
    """A package and every module in it: its rules are spread over them, each pattern in one."""
    found = [importlib.import_module(f"{package.__name__}.{m.name}") for m in pkgutil.iter_modules(package.__path__)]
    return (package, *found)
