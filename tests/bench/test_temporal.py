"""bench.retrieval.run --set temporal end to end on a tiny file: stories written through
GATED's write path, questions scored against the value for their time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.retrieval import run as retrieval
from bench.retrieval import temporal

STORIES = {
    "name": "tiny",
    "asked_at": "2026-11-20T18:00:00+00:00",
    "stories": [
        {"id": "en-x", "language": "en", "turns": [
            {"at": "2024-01-05T10:00:00+00:00", "text": "I live in Paris.",
             "facts": [{"text": "User lives in Paris", "category": "personal_facts", "slot": "home_city"}]},
            {"at": "2026-03-20T10:00:00+00:00", "text": "I moved to Berlin last week.",
             "facts": [{"text": "User lives in Berlin", "category": "personal_facts", "slot": "home_city"}]},
            {"at": "2026-03-20T10:05:00+00:00", "text": "ok thanks", "facts": []}],
         "questions": [{"id": "q1", "text": "Where did I live before Berlin?", "answer": "User lives in Paris",
                        "time": "past"},
                       {"id": "q2", "text": "Where do I live?", "answer": "User lives in Berlin", "time": "now"}]},
        {"id": "zh-x", "language": "zh", "turns": [
            {"at": "2023-04-01T10:00:00+00:00", "text": "我住在北京。",
             "facts": [{"text": "用户住在北京", "category": "personal_facts", "slot": "home_city"}]},
            {"at": "2026-03-15T10:00:00+00:00", "text": "我上个月搬到上海了。",
             "facts": [{"text": "用户住在上海", "category": "personal_facts", "slot": "home_city"}]}],
         "questions": [{"id": "q3", "text": "搬到上海之前我住哪儿？", "answer": "用户住在北京", "time": "past"}]},
    ],
}  # fmt: skip


def test_the_temporal_set_runs_through_bench_retrieval(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "tiny.json"
    data.write_text(json.dumps(STORIES, ensure_ascii=False), encoding="utf-8")
    assert retrieval.main(["--set", "temporal", "--data", str(data), "--data-dir", str(data_dir)]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (out["set"], out["stories"], out["questions"]) == ("temporal", 2, 3)
    # Five turns written, the acknowledgement skipped by the pre-filter; two values now, two past.
    assert (out["turns"], out["skipped"], out["facts"], out["past"]) == (5, 1, 2, 2)
    assert (out["hit@1_past_en_n"], out["hit@1_past_zh_n"], out["hit@1_now_en_n"]) == (1, 1, 1)
    assert {"hit@1_past_en", "hit@1_past_zh", "hit@5_past_all", "span_shown_past", "trigger_past_all"} <= set(out)


def test_a_broken_file_is_named_not_scored(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "bad.json"
    data.write_text(json.dumps({"asked_at": "2026-11-20T18:00:00+00:00", "stories": [
        {"id": "s1", "language": "en", "turns": [], "questions": [{"text": "where?", "answer": "x", "time": "then"}]}
    ]}), encoding="utf-8")  # fmt: skip
    assert temporal.main(["--data", str(data), "--data-dir", str(tmp_path / "db")]) == 2
    assert "story 's1'" in capsys.readouterr().err
