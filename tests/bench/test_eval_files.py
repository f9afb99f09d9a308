"""The benchmarks on a fresh clone: every evaluation file a benchmark or a documented
command names is in the repository with its source and licence, or a missing one is
named in one line with its public source and where to put it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import bench.common.evaldata as evaldata
from bench.common.evaldata import MissingEvalFile, eval_file, load_retrieval

ROOT = Path(__file__).resolve().parents[2]
IN_REPO = ROOT / "bench" / "data" / "eval"


def test_the_files_in_the_repository_load_and_carry_their_source_and_licence() -> None:
    files = sorted(IN_REPO.glob("*.json"))
    assert [f.name for f in files] == ["madial_en.dev.json", "madial_zh.dev.json"]
    readme = (IN_REPO / "README.md").read_text()
    for path in files:
        data = load_retrieval(path)
        assert data.queries and data.meta["license"] == "MIT" and "MADial-Bench" in data.meta["source"]
        assert path.name in readme
    assert "MIT License" in readme  # the notice the licence asks copies to keep


def test_every_file_a_benchmark_or_the_docs_name_is_here_or_said_where_to_get(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    code = "\n".join(p.read_text() for p in (ROOT / "bench").glob("*.py"))
    docs = "\n".join(p.read_text() for p in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
    assert "../shared/eval" not in docs  # a clone has no ../shared
    named = set(re.findall(r"[\w.]+\.dev\.json", code + docs)) | set(evaldata.NOT_REDISTRIBUTED)
    assert {"locomo.dev.json", "madial_en.dev.json", "msc_gate.realistic.dev.json"} <= named
    monkeypatch.delenv("EVAL_DIR", raising=False)
    monkeypatch.setattr(evaldata, "TEAM_EVAL_DIR", tmp_path / "no-shared")  # as on a fresh clone
    for name in sorted(named):
        if (IN_REPO / name).exists():
            assert eval_file(name) == IN_REPO / name
            continue
        with pytest.raises(MissingEvalFile) as missing:
            eval_file(name)
        said = str(missing.value)
        assert "\n" not in said and name in said and "https://" in said and "bench/data/eval/" in said, said
        assert name in (IN_REPO / "README.md").read_text()  # how to convert it is written down


def test_a_benchmark_whose_data_is_missing_says_so_in_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from bench.gate import run as gate

    monkeypatch.setenv("EVAL_DIR", str(tmp_path))
    monkeypatch.setattr(evaldata, "TEAM_EVAL_DIR", tmp_path / "no-shared")  # as on a fresh clone
    assert gate.main([]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1, lines
    assert "msc_gate.balanced.dev.json is not in the repository" in lines[0] and "parl.ai" in lines[0]
