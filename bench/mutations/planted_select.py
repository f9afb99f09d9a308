"""Where a planted bug goes and which tests run for it: the snippet found in its file or
moved anywhere under the package (indentation aside), and the test files that import the
changed module (directly, through a package's re-export, or as a string), else those that
import a module importing it, else the module's test folder."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

SKIPPED_DIRS = {".git", ".venv", "__pycache__", ".pytest_cache", ".ruff_cache", ".data", "results", ".mypy_cache"}
PACKAGE = "memory"
TESTS = "tests"


@dataclass(frozen=True)
class Bug:
    id: str
    file: str
    old: str
    new: str
    breaks: str = ""


def dotted(path: str) -> str:
    """memory/storage/locks.py -> memory.storage.locks (a package's __init__: the package)."""
    parts = list(Path(path).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


# ------------------------------------------------------------------ finding the code


def _loose(old: str) -> re.Pattern[str]:
    """`old` line by line with each line's indentation free."""
    lines = old.split("\n")
    parts = []
    for i, line in enumerate(lines):
        body = re.escape(line.lstrip(" \t"))
        lead = "[ \t]*" if line.strip() and (i > 0 or line[:1] in (" ", "\t")) else ""
        parts.append(lead + body)
    return re.compile("\n".join(parts))


def _reindent(new: str, old: str, found: str) -> str:
    """`new` shifted by the indentation `found` has more (or less) than `old`, line by line
    after the first (and the first, when `old` begins with its indentation)."""

    def indent(text: str) -> int:
        return len(text) - len(text.lstrip(" "))

    old_lines, found_lines = old.split("\n"), found.split("\n")
    probe = next((i for i in range(len(old_lines)) if (i > 0 or old_lines[0][:1] == " ") and old_lines[i].strip()),
                 None)  # fmt: skip
    if probe is None:
        return new
    shift = indent(found_lines[probe]) - indent(old_lines[probe])
    out = []
    for i, line in enumerate(new.split("\n")):
        if (i == 0 and old_lines[0][:1] != " ") or not line.strip():
            out.append(line)
        elif shift >= 0:
            out.append(" " * shift + line)
        else:
            out.append(line[min(-shift, indent(line)) :])
    return "\n".join(out)


def locate(repo: Path, bug: Bug) -> tuple[str, str, str] | None:
    """(file, text with the bug in it, how) or None: the snippet once in `bug.file`, else
    once in all of `memory/` together, else once with the indentation ignored."""
    named = repo / bug.file
    if named.is_file():
        text = named.read_text(encoding="utf-8")
        if text.count(bug.old) == 1:
            return bug.file, text.replace(bug.old, bug.new), "exact"
    files = sorted(p for p in (repo / PACKAGE).rglob("*.py") if not SKIPPED_DIRS & set(p.parts))
    texts = {p: p.read_text(encoding="utf-8") for p in files}
    hits = [(p, t.count(bug.old)) for p, t in texts.items() if bug.old in t]
    if len(hits) == 1 and hits[0][1] == 1:
        path, _ = hits[0]
        return str(path.relative_to(repo)), texts[path].replace(bug.old, bug.new), "moved"
    if hits:
        return None  # more than once: which one was meant is not known
    pattern = _loose(bug.old)
    order = ([named] if named in texts else []) + [p for p in files if p != named]
    matches = [(p, list(pattern.finditer(texts[p]))) for p in order]
    matches = [(p, ms) for p, ms in matches if ms]
    if len(matches) != 1 or len(matches[0][1]) != 1:
        return None
    path, (m,) = matches[0]
    text = texts[path]
    new = _reindent(bug.new, bug.old, m.group())
    how = "reindented" if path == named else "moved, reindented"
    return str(path.relative_to(repo)), text[: m.start()] + new + text[m.end() :], how


# ------------------------------------------------------------------ choosing the tests


def _reexports(repo: Path, module: str) -> dict[str, set[str]]:
    """package -> the names its __init__ takes from `module` (and re-exports)."""
    out: dict[str, set[str]] = {}
    parts = module.split(".")
    for n in range(1, len(parts)):
        package = ".".join(parts[:n])
        init = repo.joinpath(*parts[:n], "__init__.py")
        if not init.is_file():
            continue
        try:
            tree = ast.parse(init.read_text(encoding="utf-8"))
        except SyntaxError:
            continue
        names: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = _resolve(node, package, is_package=True)
                if base == module:
                    names.update(a.asname or a.name for a in node.names)
                elif base == ".".join(parts[:-1]) and any(a.name == parts[-1] for a in node.names):
                    names.update(a.asname or a.name for a in node.names if a.name == parts[-1])
        if names:
            out[package] = names
    return out


def _resolve(node: ast.ImportFrom, current: str, *, is_package: bool) -> str:
    """The absolute module of a `from X import` in module `current`."""
    if not node.level:
        return node.module or ""
    base = current.split(".") if is_package else current.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
    return ".".join([*base, node.module] if node.module else base)


def _imports(path: Path, current: str) -> tuple[set[str], set[tuple[str, str]], str]:
    """(modules imported, (module, name) imported from, the text) of a Python file."""
    text = path.read_text(encoding="utf-8", errors="replace")
    modules: set[str] = set()
    names: set[tuple[str, str]] = set()
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return modules, names, text
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(node, current, is_package=path.name == "__init__.py")
            modules.add(base)
            names.update((base, a.name) for a in node.names)
    return modules, names, text


def tests_for(repo: Path, modules: Iterable[str]) -> list[str]:
    """The test files (relative to `repo`) that import any of `modules` (see the module doc)."""
    wanted = [m for m in dict.fromkeys(modules) if m]
    exports = {m: _reexports(repo, m) for m in wanted}
    chosen: set[Path] = set()
    tests = repo / TESTS
    if not tests.is_dir():
        return []
    for path in sorted(tests.rglob("*.py")):
        if SKIPPED_DIRS & set(path.parts):
            continue
        if not (path.name.startswith("test_") or path.name.endswith("_test.py") or path.name == "conftest.py"):
            continue
        current = dotted(str(path.relative_to(repo)))
        modules_in, names_in, text = _imports(path, current)
        hit = False
        for module in wanted:
            parent, _, leaf = module.rpartition(".")
            if any(m == module or m.startswith(module + ".") for m in modules_in):
                hit = True
            elif (parent, leaf) in names_in:
                hit = True
            elif any((pkg, name) in names_in for pkg, names in exports[module].items() for name in names):
                hit = True
            elif re.search(rf"['\"]{re.escape(module)}(?:[.'\"]|$)", text):
                hit = True  # a string naming it: monkeypatch.setattr("memory.x.y.NAME", ...)
            if hit:
                break
        if not hit:
            continue
        if path.name == "conftest.py":
            chosen.update(p for p in path.parent.rglob("test_*.py") if not SKIPPED_DIRS & set(p.parts))
        else:
            chosen.add(path)
    return sorted(str(p.relative_to(repo)) for p in chosen)


def importers(repo: Path, modules: Iterable[str]) -> list[str]:
    """The modules of the package that import any of `modules` (one hop)."""
    wanted = set(modules)
    out = []
    for path in sorted((repo / PACKAGE).rglob("*.py")):
        if SKIPPED_DIRS & set(path.parts):
            continue
        current = dotted(str(path.relative_to(repo)))
        if current in wanted:
            continue
        found, names, _ = _imports(path, current)
        if any(m in wanted for m in found) or any(f"{b}.{n}" in wanted for b, n in names):
            out.append(current)
    return out


def choose_tests(repo: Path, modules: Sequence[str]) -> tuple[list[str], str]:
    """The test files for a change in `modules` and how they were chosen: those that import
    them (`tests_for`); when none does, those that import a module importing them (one hop:
    `memory.web.app` for `memory.web.proxy`); when none does either, the test folder named
    as the module's package (tests/web for memory/web/proxy.py)."""
    direct = tests_for(repo, modules)
    if direct:
        return direct, "import the module"
    hop = tests_for(repo, importers(repo, modules))
    if hop:
        return hop, "import a module that imports it"
    parts = modules[0].split(".")
    folder = repo / TESTS / parts[1] if len(parts) > 2 else None
    if folder is not None and folder.is_dir():
        found = sorted(str(p.relative_to(repo)) for p in folder.rglob("test_*.py") if not SKIPPED_DIRS & set(p.parts))
        return found, f"the folder {TESTS}/{parts[1]}"
    return [], "none"


# ------------------------------------------------------------------ running
