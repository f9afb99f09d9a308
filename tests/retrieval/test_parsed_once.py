"""A look-up reads its message once (`Retriever.parse`, memory/retrieval/query.py).

The days a message names (`dates.query_span`), the part of it that is embedded and its
keywords are read once per look-up and handed to the stages that rank by time (the time
bonus, the value a fact held then, no past value for a question about now): they were
read three times, once per stage, on the reply's clock.
"""

from __future__ import annotations

import collections
import functools
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from memory.language import dates
from memory.retrieval.retriever import Retriever
from memory.storage.store import MemoryStore


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[collections.Counter[str]]:
    """How often each counted function ran, by name, from now on."""
    seen: collections.Counter[str] = collections.Counter()

    def counted(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            seen[name] += 1
            return fn(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(dates, "query_span", counted("query_span", dates.query_span))
    for name in ("embedding_text", "query_terms"):
        monkeypatch.setattr(Retriever, name, counted(name, getattr(Retriever, name)))
    yield seen


def test_the_days_and_keywords_of_a_question_are_read_once_per_look_up(
    store: MemoryStore, user_id: str, calls: collections.Counter[str]
) -> None:
    store.upsert_fact(user_id, "The user lives in Paris", category="personal_facts", slot="home",
                      valid_from="2024-01-05")  # fmt: skip
    store.upsert_fact(
        user_id, "The user lives in Berlin", category="personal_facts", slot="home", valid_from="2025-03-10"
    )  # fmt: skip  (Paris: kept as a past value)
    store.add_raw(user_id, "We went hiking near Berlin last spring")
    retriever = Retriever(store, store.settings.tuned(density=0.0, near_copies=0.0))
    assert store.settings.retrieval.time_weight > 0 and store.settings.retrieval.when_weight > 0
    for question in ("Did I live in Paris or Berlin last year?", "Do I live in Paris or Berlin now?",
                     "When did I live in Paris, before Berlin?"):  # fmt: skip
        calls.clear()
        retriever.retrieve(user_id, question)
        assert calls == {"query_span": 1, "embedding_text": 1, "query_terms": 1}, (question, calls)
        calls.clear()
        considered = retriever.explain(user_id, question).considered
        assert calls == {"query_span": 1, "embedding_text": 1, "query_terms": 1}, (question, calls)
        # The stages that read the days ran on a fact's line of values (Paris, Berlin, both
        # candidates); a question about now gets no past value.
        texts = [c.record.text for c in considered]
        assert "The user lives in Berlin" in texts and ("The user lives in Paris" in texts) == ("now" not in question)
    # ... and what was read once still ranks by time: the value before the one named.
    assert retriever.explain(user_id, "Where did I live before Berlin?").considered[0].record.text == (
        "The user lives in Paris"
    )
