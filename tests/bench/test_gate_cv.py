"""The pre-filter's cross-validation: folds by conversation, selection on training folds only."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench.common.evaldata import default_eval_dir, load_gate
from bench.gate.gate_cv import cross_validate, fire_all, folds_by_group, group_of, select_rules
from bench.gate.run import main as gate_main
from memory.language.prefilter import GateAction, prefilter

_EVAL = default_eval_dir()


def _gate(tmp_path: Path) -> Path:
    """Ten conversations: a first-person fact (durable) and a "here" remark (not) in each."""
    items = []
    for d in range(10):
        items.append({"id": f"msc-valid-s1-d{d}-t0", "text": f"I have {d + 2} cats.", "durable": True, "fact": "x"})
        items.append({"id": f"msc-valid-s2-d{d}-t1", "text": "It rains a lot around here.", "durable": False})
        items.append({"id": f"msc-valid-s1-d{d}-t2", "text": "What time is it?", "durable": False})
    path = tmp_path / "g.json"
    path.write_text(json.dumps({"name": "g", "language": "en", "items": items}))
    return path


def test_folds_keep_each_conversation_whole_and_cover_every_item(tmp_path: Path) -> None:
    gate = load_gate(_gate(tmp_path))
    groups = [group_of(it) for it in gate.items]
    assert groups[0] == groups[1] == "msc-valid-d0"  # the sessions of one dialogue are one group
    folds = folds_by_group(groups, 5)
    assert sorted(np.concatenate(folds).tolist()) == list(range(len(groups)))
    for fold in folds:
        inside = {groups[i] for i in fold}
        assert all(groups[i] not in inside for other in folds if other is not fold for i in other)


def test_selection_drops_a_rule_that_only_passes_chit_chat_and_keeps_one_that_finds_facts(tmp_path: Path) -> None:
    fired = fire_all(load_gate(_gate(tmp_path)))
    chosen = select_rules(fired, np.arange(len(fired.durable)), 0.96)
    assert "first_person_statement" in chosen and "speaker_location" not in chosen


def test_cross_validation_reports_held_out_figures_of_both_rule_sets(tmp_path: Path) -> None:
    rep = cross_validate(load_gate(_gate(tmp_path)), k=5)
    assert len(rep.folds) == 5 and sum(f.items for f in rep.folds) == 30
    assert rep.tuned["recall"] == 1.0 and rep.tuned["skip_rate"] == 1.0  # the "here" rule dropped in every fold
    assert rep.full["skip_rate"] == 0.5 and rep.dropped_in["speaker_location"] == 5
    assert gate_main(["--data", str(_gate(tmp_path)), "--cv", "5"]) == 0
    assert gate_main(["--data", str(_gate(tmp_path)), "--cv", "1"]) == 2


@pytest.mark.skipif(not (_EVAL / "msc_gate.realistic.dev.json").exists(), reason="shared eval data not present")
def test_the_rule_sets_the_cv_scores_are_the_pre_filters_own_decisions() -> None:
    gate = load_gate(_EVAL / "msc_gate.realistic.dev.json")
    fired = fire_all(gate)
    with_all = fired.passed(fired.rules)
    assert [bool(x) for x in with_all] == [
        prefilter(it.text, it.context).action is not GateAction.SKIP for it in gate.items
    ]


def test_the_rule_set_of_a_fold_is_chosen_without_its_items(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import bench.gate.gate_cv as cv

    seen: list[set[int]] = []
    real = cv.select_rules
    monkeypatch.setattr(
        cv, "select_rules", lambda f, idx, target: seen.append(set(idx.tolist())) or real(f, idx, target)
    )
    gate = load_gate(_gate(tmp_path))
    folds = folds_by_group([group_of(it) for it in gate.items], 5)
    cv.cross_validate(gate, k=5)
    assert [s.isdisjoint(f.tolist()) and len(s) == 30 - len(f) for s, f in zip(seen, folds, strict=True)] == [True] * 5


@pytest.mark.skipif(not (_EVAL / "msc_gate.realistic.dev.json").exists(), reason="shared eval data not present")
def test_quality_gate_cross_validated() -> None:
    """Issue 24's targets, held out: realistic recall >= .95 at skip >= .50, Chinese recall >= .95."""
    realistic = cross_validate(load_gate(_EVAL / "msc_gate.realistic.dev.json"), k=5)
    for pooled in (realistic.tuned, realistic.full):
        assert pooled["recall"] >= 0.95 and pooled["skip_rate"] >= 0.50, pooled
    chinese = cross_validate(load_gate(_EVAL / "zh_gate.smoke.dev.json"), k=5)
    assert chinese.full["recall"] >= 0.95, chinese.full
