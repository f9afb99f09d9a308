"""The bugs `python -m bench.mutations.run` puts in, one at a time, as data (bench/data/mutations.json).

Each is one small, realistic bug against one guard of the product: a snippet of a file
(present exactly once: tests/bench/test_mutation_list.py checks that, so the list cannot
rot silently), what it becomes, the tests that must catch it now (`tests`), and those
that guarded the feature before issue 37 (`before`, tests of the commit before it; empty
where there were none). docs/mutations.md lists them with the results.

Features: the rows of issue 37's table and its other findings, then the features of the
issues before it: fleet, door (quoting, blocks), privacy (redaction, forget), chat,
retrieval switches, web page, journal, working memory, archive.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from bench.common.paths import DATA

LIST_PATH = DATA / "mutations.json"


@dataclass(frozen=True)
class Mutation:
    name: str
    feature: str
    file: str
    original: str
    replacement: str
    bug: str
    tests: tuple[str, ...]
    before: tuple[str, ...] = ()


def load_mutations(path: Path = LIST_PATH) -> tuple[Mutation, ...]:
    rows = json.loads(path.read_text(encoding="utf-8"))["mutations"]
    return tuple(
        Mutation(**{**row, "tests": tuple(row["tests"]), "before": tuple(row.get("before", ()))}) for row in rows
    )


MUTATIONS: tuple[Mutation, ...] = load_mutations()

__all__ = ["MUTATIONS", "Mutation", "load_mutations"]
