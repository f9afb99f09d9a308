"""The held-out third is fixed, disjoint from the development part, and selected by part."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.common import holdout
from bench.common.evaldata import GateFile, GateItem, Memory, Query, RetrievalFile, Store, default_eval_dir


def test_the_committed_split_is_the_one_the_seed_derives() -> None:
    if not (default_eval_dir() / "msc_gate.realistic.dev.json").exists():
        pytest.skip("shared eval data not present")
    assert holdout.derive() == holdout.load()
    assert holdout.main([]) == 0


def test_the_held_out_part_is_a_third_and_whole_conversations() -> None:
    split = holdout.load()
    assert split["seed"] == holdout.SEED
    assert len(split["retrieval_stores"]["locomo.dev"]) == 2  # of 5
    assert len(split["retrieval_stores"]["memdaily.dev"]) == 8  # of 25
    held = split["msc_conversations"][0]
    dialog = held.split("-d")[1]
    # every session of a held-out dialogue is held out with it
    for session in (1, 2, 5):
        assert holdout.gate_side(f"msc-valid-s{session}-d{dialog}-t3", split) == "holdout"
    assert holdout.gate_side("memdaily-u01_x", split) == "dev"  # files without a split: development


def test_parts_select_stores_with_their_queries_and_items_by_conversation() -> None:
    split = {"msc_conversations": ["valid-d7"], "retrieval_stores": {"f": ["b"]}}
    data = RetrievalFile(
        "f", "en", Path("f.json"),
        stores=(Store("a", (Memory("1", "x"),)), Store("b", (Memory("1", "y"),))),
        queries=(Query("qa", "a", "x?", ("1",), "c"), Query("qb", "b", "y?", ("1",), "c")),
    )  # fmt: skip
    dev, held = holdout.select_retrieval(data, "dev", split), holdout.select_retrieval(data, "holdout", split)
    assert [s.store_id for s in dev.stores] == ["a"] and [q.id for q in dev.queries] == ["qa"]
    assert [s.store_id for s in held.stores] == ["b"] and [q.id for q in held.queries] == ["qb"]
    assert holdout.select_retrieval(data, "all", split) is data
    gate = GateFile("g", "en", Path("g.json"), items=(
        GateItem("msc-valid-s2-d7-t1", "a", True), GateItem("msc-valid-s1-d8-t1", "b", False)))  # fmt: skip
    assert [i.id for i in holdout.select_gate(gate, "holdout", split).items] == ["msc-valid-s2-d7-t1"]
    assert [i.id for i in holdout.select_gate(gate, "dev", split).items] == ["msc-valid-s1-d8-t1"]
    with pytest.raises(ValueError, match="part"):
        holdout.select_gate(gate, "test", split)
