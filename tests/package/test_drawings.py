"""The two drawings of the code that a reader trusts, checked against the code so they
cannot drift: the error tree in `memory/errors.py`'s docstring and the stack of packages
in `memory/__init__.py`'s docstring.

- Every class of the tree (every class of `memory/` that descends from `AgentMemoryError`,
  read from the source, not imported) is drawn once, under its real parent, and where a
  module is named beside it, the class is defined there. Private classes (`_Name`) are
  not part of the drawing.
- The packages' stack lists the same layers, in the same order, as the `layers` contract
  of `lint-imports` in pyproject.toml, and that contract holds every package and module
  of `memory/`.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import memory
import memory.errors

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "memory"


def _module_of(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def error_classes() -> dict[str, tuple[str, str]]:
    """Each class of `memory/` descending from AgentMemoryError: name -> (parent, module)."""
    classes: dict[str, list[tuple[list[str], str]]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases = [b.id if isinstance(b, ast.Name) else b.attr for b in node.bases
                         if isinstance(b, ast.Name | ast.Attribute)]  # fmt: skip
                classes.setdefault(node.name, []).append((bases, _module_of(path)))
    known: dict[str, bool] = {"AgentMemoryError": True}

    def in_tree(name: str) -> bool:
        if name not in known:
            known[name] = False  # a class named after its foreign base (class Agent(agents.Agent))
            known[name] = any(in_tree(b) for bases, _ in classes.get(name, []) for b in bases if b in classes)
        return known[name]

    tree = {}
    for name, defs in classes.items():
        if name == "AgentMemoryError" or name.startswith("_") or not in_tree(name):
            continue
        assert len(defs) == 1, f"two error classes named {name}: the drawing could not tell them apart"
        bases, module = defs[0]
        tree[name] = (next(b for b in bases if b in classes and in_tree(b)), module)
    return tree


def drawn_tree() -> dict[str, tuple[str, str | None]]:
    """The drawing: name -> (parent drawn above it, module named beside it or None)."""
    doc = memory.errors.__doc__ or ""
    lines = [ln for ln in doc.splitlines() if re.match(r"^    [│├└ ]*[├└]── ", ln)]
    assert lines, "no tree drawn in memory/errors.py"
    drawn: dict[str, tuple[str, str | None]] = {}
    stack = ["AgentMemoryError"]
    for line in lines:
        prefix, _, rest = line.partition("── ")
        depth = (len(prefix) - 4) // 4 + 1  # "├── " under the root is depth 1
        name = rest.split()[0]
        found = re.search(r"\((memory(?:\.\w+)+)\S*\)\s*$", rest)
        del stack[depth:]
        assert name not in drawn, f"{name} is drawn twice"
        drawn[name] = (stack[-1], found.group(1) if found else None)
        stack.append(name)
    return drawn


def test_every_error_class_is_drawn_under_its_real_parent_where_it_lives() -> None:
    code, drawn = error_classes(), drawn_tree()
    assert sorted(set(code) - set(drawn)) == [], "classes of the tree missing from the drawing"
    assert sorted(set(drawn) - set(code)) == [], "drawn, but no such class of the tree in the code"
    for name, (parent, module) in code.items():
        drawn_parent, drawn_module = drawn[name]
        assert drawn_parent == parent, f"{name} is drawn under {drawn_parent}, its parent is {parent}"
        if drawn_module is not None:
            assert drawn_module.startswith(module), f"{name} is drawn in {drawn_module}, it lives in {module}"
        else:
            assert module == "memory.errors", f"{name} lives in {module}: the drawing should say so"


def contract_layers() -> list[list[str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contract = next(c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers"
                    and c["layers"][0].split("|")[0].strip().startswith("memory."))  # fmt: skip
    return [[p.strip().removeprefix("memory.") for p in layer.split("|")] for layer in contract["layers"]]


def drawn_layers() -> list[list[str]]:
    doc = memory.__doc__ or ""
    block = doc.split("The packages inside", 1)[1]
    rows = [ln for ln in block.splitlines() if re.match(r"^    \S", ln)]
    return [[p.strip() for p in re.split(r"\s{2,}", row.strip())[0].split("|")] for row in rows]


def test_the_drawn_stack_of_packages_is_the_import_contracts_in_its_order() -> None:
    assert drawn_layers() == contract_layers()


def test_the_import_contract_holds_every_package_and_module_of_memory() -> None:
    listed = {name for layer in contract_layers() for name in layer}
    present = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    present |= {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    assert sorted(present - listed) == [], "packages of memory/ outside the layers contract"
    assert sorted(listed - present) == [], "layers naming no package of memory/"
