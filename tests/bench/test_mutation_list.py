"""The mutation list of `python -m bench.mutations.run` cannot rot silently: every snippet it
puts a bug into is still in the code, once, and every test it names exists."""

from __future__ import annotations

from bench.mutations.mutation_list import MUTATIONS
from bench.mutations.run import problems


def test_every_mutation_still_finds_its_snippet_and_its_tests() -> None:
    assert len(MUTATIONS) >= 50
    assert problems(MUTATIONS) == []
