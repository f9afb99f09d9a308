"""bench.retrieval.block's scoring and its choice of the relevance cut, on blocks written here: what
counts as an answer, noise and an own question, and the cut the data chooses."""

from __future__ import annotations

from bench.retrieval.block import load_small_talk
from bench.retrieval.block_report import Cut, Row, choose, figures
from memory.types import MemoryRecord

MAX_CHARS = 1500


def record(memory_id: str, text: str, score: float) -> MemoryRecord:
    return MemoryRecord(memory_id, text, "u", None, score=score, metadata={"memory_id": memory_id})


def row(kind: str, store: str, scored: list[tuple[str, str, float]], relevant: tuple[str, ...] = ()) -> Row:
    records = [record(i, text, score) for i, text, score in scored]
    return Row("f", "plain", "normal", kind, store, "en", "c", frozenset(relevant), records,
               [frozenset({i}) for i, _, _ in scored])  # fmt: skip


def test_a_block_is_scored_for_its_answer_its_noise_and_its_own_questions() -> None:
    r = row("own", "s1", [("q", "What's my sister's name?", 0.6), ("a", "My sister is Anna.", 0.5),
                          ("x", "I play the cello.", 0.1)], relevant=("a",))  # fmt: skip
    low = figures(r, Cut(0.05), MAX_CHARS)
    assert (low["answer"], low["noise"], low["n_mem"], low["own_q"]) == (1.0, 2.0, 3.0, 1.0)
    high = figures(r, Cut(0.55), MAX_CHARS)
    assert (high["answer"], high["n_mem"], high["own_q"], high["empty"]) == (0.0, 1.0, 0.0, 0.0)
    assert figures(r, Cut(0.61), MAX_CHARS)["empty"] == 1.0


def test_the_cut_chosen_keeps_answers_and_empties_foreign_blocks() -> None:
    rows = []
    for s in ("s1", "s2", "s3"):
        rows.append(row("own", s, [("a", "My sister is Anna.", 0.7)], relevant=("a",)))
        rows.append(row("foreign", s, [("b", "I like tea.", 0.3)]))
    # Between the foreign scores (0.3) and the answers' (0.7): the lowest cut of the grid above 0.3.
    assert choose(rows, MAX_CHARS).threshold == 0.32


def test_small_talk_files_are_read_by_language(tmp_path) -> None:
    path = tmp_path / "talk.json"
    path.write_text('{"about": "x", "lines": [{"lang": "en", "text": "ok"}, {"lang": "zh", "text": "好的"}, "嗯"]}')
    assert load_small_talk([path]) == {"en": ["ok"], "zh": ["好的", "嗯"]}
