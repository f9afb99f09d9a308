"""bench/ stays a house with rooms: no bench module takes a private name (one starting with
an underscore) from another bench module, and no bench file grows past 400 lines. What one
benchmark shares with another is public, in bench.common or in its own folder; the import
contracts in pyproject.toml (`uv run lint-imports`) keep the folders apart and free of cycles."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"


def _module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def private_names_taken(path: Path) -> list[str]:
    """`from bench.x import _y`, and `m._y` where `m` names a bench module imported here."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    modules: set[str] = set()  # local names bound to bench modules
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "bench":
            for alias in node.names:
                if alias.name.startswith("_"):
                    found.append(f"{path.name}:{node.lineno} from {node.module} import {alias.name}")
                elif (ROOT / Path(*node.module.split("."), alias.name)).with_suffix(".py").exists():
                    modules.add(alias.asname or alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("bench.") and alias.asname:
                    modules.add(alias.asname)
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules
                and node.attr.startswith("_") and not node.attr.startswith("__")):  # fmt: skip
            found.append(f"{path.name}:{node.lineno} {node.value.id}.{node.attr}")
    return found


def bench_files() -> list[Path]:
    return sorted(p for p in BENCH.rglob("*.py") if "data" not in p.relative_to(BENCH).parts)


def test_no_bench_module_takes_a_private_name_from_another() -> None:
    assert [f for p in bench_files() for f in private_names_taken(p)] == []


def test_the_check_sees_a_private_name_taken(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"  # outside bench/: the other checks never see it
    probe.write_text("from bench.latency.stores import _eval_file\nfrom bench.retrieval import run as R\nR._x\n")
    assert len(private_names_taken(probe)) == 2


def test_no_bench_file_is_over_400_lines() -> None:
    long = {_module_name(p): n for p in bench_files() if (n := len(p.read_text(encoding="utf-8").splitlines())) > 400}
    assert long == {}


def test_measurements_live_in_folders_and_shared_helpers_in_bench_common() -> None:
    loose = sorted(p.name for p in BENCH.glob("*.py") if p.name != "__init__.py")
    assert loose == []
    assert {p.name for p in BENCH.iterdir() if p.is_dir() and (p / "__init__.py").exists()} == {
        "common", "retrieval", "latency", "gate", "privacy", "fleet", "ops", "mutations",
    }  # fmt: skip
