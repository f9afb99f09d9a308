"""Every thread pool of memory/ is in memory/ops/threads.py, with the read admission."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
POOLS = {"ThreadPoolExecutor", "to_thread", "run_in_executor", "ProcessPoolExecutor"}


def test_no_module_but_ops_threads_makes_a_pool_or_borrows_the_default_executor() -> None:
    found = {}
    for path in sorted((ROOT / "memory").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        calls = {
            node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Call)
        }
        if calls & POOLS:
            found[rel] = sorted(calls & POOLS)
    assert found == {"memory/ops/threads.py": ["ThreadPoolExecutor", "run_in_executor"]}, found
