"""The users' memory densities are computed once and stored beside their rows: the next
process reads them (no k-nearest-neighbour pass), a user whose memories changed gets them
computed again, and a "forget me" leaves none."""

from __future__ import annotations

import pytest

from memory.retrieval import retriever as retrieval_mod
from memory.retrieval.retriever import Retriever
from memory.storage.densities import DensityStore
from memory.storage.store import MemoryStore
from memory.userdata import UserData

CHATTER = [f"I walked the dog at {hour} o'clock" for hour in range(1, 25)]


def seed(store: MemoryStore, user_id: str, texts: list[str]) -> None:
    for text in texts:
        store.add_raw(user_id, text)


def counting_knn(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many memories each k-nearest-neighbour pass was over."""
    calls: list[int] = []
    real = retrieval_mod.knn_density

    def knn(vectors, k):  # type: ignore[no-untyped-def]
        calls.append(len(vectors))
        return real(vectors, k)

    monkeypatch.setattr(retrieval_mod, "knn_density", knn)
    return calls


def test_the_next_process_reads_the_densities_instead_of_computing_them(
    store: MemoryStore, user_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed(store, user_id, [*CHATTER, "My passport expires in March"])
    calls = counting_knn(monkeypatch)
    first = Retriever(store, store.settings).prepare(user_id)  # the first process: computed, stored
    assert calls == [25]
    second = Retriever(store, store.settings).prepare(user_id)  # another process: read
    assert calls == [25]
    assert len(second.of) == 25
    assert second.of == pytest.approx(first.of, abs=1e-6)
    assert second.mean == pytest.approx(first.mean, abs=1e-9)


def test_densities_are_computed_again_when_the_memories_changed_by_more_than_a_tenth(
    store: MemoryStore, user_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed(store, user_id, CHATTER[:20])
    calls = counting_knn(monkeypatch)
    Retriever(store, store.settings).prepare(user_id)
    seed(store, user_id, ["I fed the cat"])  # 21 of 20: 5%, the stored ones still hold
    Retriever(store, store.settings).prepare(user_id)
    assert calls == [20]
    seed(store, user_id, ["I fed the fish", "I fed the bird"])  # 23 of 20: 15%
    again = Retriever(store, store.settings).prepare(user_id)
    assert calls == [20, 23]
    assert len(again.of) == 23


def test_forget_leaves_no_stored_densities(store: MemoryStore, user_id: str) -> None:
    seed(store, user_id, CHATTER)
    Retriever(store, store.settings).prepare(user_id)
    densities = DensityStore(store.pool, store.table)
    assert densities.read(user_id) is not None
    data = UserData(store, store.settings)
    assert data.counts(user_id)["densities"] == 1
    gone = data.forget(user_id)
    assert gone.removed["densities"] == 1
    assert densities.read(user_id) is None
    assert data.counts(user_id)["densities"] == 0
    # A computation that read the vectors before the forget and stores after it stores nothing.
    densities.write(user_id, ["00000000-0000-0000-0000-000000000001"], retrieval_mod.np.zeros(1), 0.5, 10)
    assert densities.read(user_id) is None


def test_densities_are_computed_again_when_half_the_memories_were_replaced_by_as_many_new_ones(
    store: MemoryStore, user_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seed(store, user_id, CHATTER[:20])
    calls = counting_knn(monkeypatch)
    Retriever(store, store.settings).prepare(user_id)
    for mem_id, _ in store.lookup.user_vectors(user_id, 100)[:10]:
        store.delete(mem_id)  # 10 forgotten ...
    seed(store, user_id, [f"I watered the {plant}" for plant in ("fern", "rose", "fig", "palm", "ivy")])
    seed(store, user_id, [f"I painted the {room}" for room in ("hall", "attic", "porch", "study", "den")])
    # ... and 10 new: still 20 memories, but half of them have no stored density.
    again = Retriever(store, store.settings).prepare(user_id)
    assert calls == [20, 20]
    assert len(again.of) == 20


def test_the_next_process_reads_the_densities_and_still_has_the_vectors_for_the_near_copies_fold(
    store: MemoryStore, user_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Near-copies are folded by default: the fold needs the vectors, the densities need no k-NN.
    assert store.settings.retrieval.near_copies > 0
    seed(store, user_id, [*CHATTER, "My passport expires in March"])
    calls = counting_knn(monkeypatch)
    Retriever(store, store.settings).prepare(user_id)
    second = Retriever(store, store.settings).prepare(user_id)
    assert calls == [25]  # the second process computed nothing
    assert len(second.of) == 25
    assert second.vectors is not None and len(second.rows) == 25
