"""Do the tests catch bugs written by someone who has not read them? `python -m bench.planted FILE`.

    uv run python -m bench.planted FILE [FILE ...] [--tree DIR] [--only ID ...] [--timeout S]
                                     [--jobs N] [--no-baseline] [--json-out PATH]

FILE is a list of planted bugs, kept outside the repository (it is held out from whoever
writes the tests):

    {"about": "...", "bugs": [{"id": "locks-1", "file": "memory/storage/locks.py",
      "old": "<a snippet of the code, once>", "new": "<what it becomes>", "breaks": "<what a user notices>"}]}

For each bug a scratch copy of the tree is made (`--tree`, default this repository's
working tree; never changed), the snippet replaced, and the test files that import the
changed module run there: `pytest -x -q -n 0 -p no:randomly`, with a timeout. A bug is
*caught* when a test fails, *survived* when they all pass, *n/a* when its snippet is in no
file of `memory/` exactly once (or no test imports the module), *error* when pytest gives
no verdict (an import error of the copy, a timeout).

Finding the code when it moved: the snippet is looked for in `file`; when it is not there
once, in every file under `memory/` (a module split in two), and, still not found, line by
line with the indentation ignored (code moved into or out of a class); the replacement is
re-indented to match.

Choosing the tests: the test files (and the `conftest.py` files: then their whole folder)
that import the module by its dotted name (`import memory.storage.locks`, `from
memory.storage.locks import ...`, `from memory.storage import locks`, a string naming it,
as `monkeypatch.setattr("memory.storage.locks.LEASE_S", ...)`), or import from one of its
packages a name that package re-exports from it (`from memory import AgentMemoryError`
when `memory/__init__.py` takes it from `memory.errors`). Both the module named by `file`
and the module the snippet was found in count.

The copy's own code is what runs: PYTHONPATH names the copy, and every run checks that the
`memory` package the tests imported lives in the copy (else: error). Before the bugs, a
baseline run of every chosen test file on an unchanged copy: a test that fails there is
deselected in the bug runs (it would "catch" every bug).

Prints a table (per bug, then per module) and, last, one JSON line: total, caught,
survived, not_applicable, errors, caught_share (of the bugs that were tried: caught and
survived), seconds.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUN_TIMEOUT_S = 600.0
SKIPPED_DIRS = {".git", ".venv", "__pycache__", ".pytest_cache", ".ruff_cache", ".data", "results", ".mypy_cache"}
PACKAGE = "memory"
TESTS = "tests"
# addopts dropped (its -n 2, -ra, durations), its marker selection kept: the wheel build is no unit test.
PYTEST_ARGS = ("-x", "-q", "-n", "0", "-p", "no:randomly", "-p", "no:cacheprovider", "-o", "addopts=",
               "-m", "not installed_package")  # fmt: skip

# A plugin the runs load: after the session it writes where `memory` was imported from.
_PLUGIN = """
import os, sys

def pytest_sessionfinish(session, exitstatus):
    mod = sys.modules.get("memory")
    where = getattr(mod, "__file__", None) or ""
    with open(os.environ["PLANTED_WHERE"], "w", encoding="utf-8") as out:
        out.write(where)
"""


@dataclass(frozen=True)
class Bug:
    id: str
    file: str
    old: str
    new: str
    breaks: str = ""


@dataclass
class Outcome:
    bug: Bug
    result: str  # caught | survived | n/a | error
    seconds: float = 0.0
    found_in: str = ""  # where the snippet was found (when not `file`, the code moved)
    how: str = ""  # exact | moved | reindented
    tests: list[str] = field(default_factory=list)
    detail: str = ""


# ------------------------------------------------------------------ the bugs


def load_bugs(paths: Iterable[str | Path]) -> list[Bug]:
    """The bugs of every file, in order; an id used twice keeps the file's name before it."""
    bugs: list[Bug] = []
    seen: set[str] = set()
    for path in paths:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
        entries = doc["bugs"] if isinstance(doc, dict) else doc
        for entry in entries:
            bug = Bug(str(entry["id"]), entry["file"], entry["old"], entry["new"], entry.get("breaks", ""))
            if bug.id in seen:
                bug = Bug(f"{Path(path).stem}:{bug.id}", bug.file, bug.old, bug.new, bug.breaks)
            seen.add(bug.id)
            bugs.append(bug)
    return bugs


# ------------------------------------------------------------------ the tree


def copy_tree(src: Path, dest: Path) -> Path:
    """The tree's files (git's list when it is a git work tree: tracked and untracked, not
    ignored; else every file) under `dest/repo`, and `dest/shared` as `src/../shared`."""
    repo = dest / "repo"
    repo.mkdir(parents=True)
    shared = src.parent / "shared"
    if shared.exists():
        (dest / "shared").symlink_to(shared)
    listed = subprocess.run(["git", "-C", str(src), "ls-files", "-co", "--exclude-standard", "-z"],
                            capture_output=True, text=True)  # fmt: skip
    if listed.returncode == 0 and listed.stdout:
        names = [n for n in listed.stdout.split("\0") if n]
    else:
        names = [str(p.relative_to(src)) for p in src.rglob("*") if p.is_file()]
    for name in names:
        source = src / name
        if SKIPPED_DIRS & set(Path(name).parts) or not source.is_file():
            continue
        target = repo / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target, follow_symlinks=False)
    return repo


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


def run_pytest(repo: Path, tests: Sequence[str], timeout_s: float, *, stop_first: bool = True,
               deselect: Sequence[str] = ()) -> tuple[int, str, str]:  # fmt: skip
    """pytest on `tests` in `repo`: (exit code, the output's last lines, where `memory` came from).
    Exit -1: timed out."""
    with tempfile.TemporaryDirectory(prefix="planted-plugin-") as plug:
        Path(plug, "planted_where.py").write_text(_PLUGIN, encoding="utf-8")
        where_file = Path(plug, "where.txt")
        args = list(PYTEST_ARGS) if stop_first else [a for a in PYTEST_ARGS if a != "-x"]
        cmd = [sys.executable, "-m", "pytest", *args, "-p", "planted_where", "-rf"]
        cmd += [f"--deselect={d}" for d in deselect]
        cmd += list(tests)
        env = {
            **os.environ,
            "PYTHONDONTWRITEBYTECODE": "1",
            "PLANTED_WHERE": str(where_file),
            "PYTHONPATH": os.pathsep.join([str(repo), plug, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        }
        try:
            done = subprocess.run(cmd, cwd=repo, capture_output=True, text=True, timeout=timeout_s, env=env,
                                  start_new_session=True)  # fmt: skip
        except subprocess.TimeoutExpired:
            return -1, f"timed out after {timeout_s:.0f} s", ""
        where = where_file.read_text(encoding="utf-8") if where_file.exists() else ""
    out = done.stdout + done.stderr
    return done.returncode, out, where


def _tail(out: str, lines: int = 3) -> str:
    kept = [line for line in out.splitlines() if line.strip()][-lines:]
    return " | ".join(kept)[-300 * lines :]


def _from_copy(where: str, repo: Path) -> bool:
    return not where or Path(where).resolve().is_relative_to(repo.resolve())


def failed_ids(out: str) -> list[str]:
    """The node ids of pytest's `-rf` summary ("FAILED tests/x.py::test_y - ...")."""
    ids = []
    for line in out.splitlines():
        if line.startswith(("FAILED ", "ERROR ")):
            ids.append(line.split(" ", 1)[1].split(" - ", 1)[0].strip())
    return ids


def baseline(tree: Path, tests: Sequence[str], timeout_s: float) -> tuple[list[str], str]:
    """The chosen tests once on an unchanged copy: the ids that fail there (deselected later)."""
    if not tests:
        return [], ""
    with tempfile.TemporaryDirectory(prefix="planted-baseline-") as tmp:
        repo = copy_tree(tree, Path(tmp))
        code, out, where = run_pytest(repo, tests, timeout_s, stop_first=False)
        if not _from_copy(where, repo):
            raise SystemExit(f"the baseline imported memory from {where}, not from the copy {repo}")
    if code in (0, 5):
        return [], ""
    return failed_ids(out), _tail(out, 8)


def attempt(tree: Path, bug: Bug, timeout_s: float, deselect: Sequence[str]) -> Outcome:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"planted-{re.sub(r'[^A-Za-z0-9_-]', '_', bug.id)}-") as tmp:
        repo = copy_tree(tree, Path(tmp))
        found = locate(repo, bug)
        if found is None:
            return Outcome(bug, "n/a", time.monotonic() - started, detail="the snippet is in no file of memory/ once")
        path, text, how = found
        (repo / path).write_text(text, encoding="utf-8")
        modules = [dotted(path)] + ([dotted(bug.file)] if bug.file != path and (repo / bug.file).is_file() else [])
        tests, chosen_by = choose_tests(repo, modules)
        how = f"{how}; tests: {chosen_by}"
        if not tests:
            return Outcome(bug, "n/a", time.monotonic() - started, path, how, [], "no test file imports the module")
        code, out, where = run_pytest(repo, tests, timeout_s, deselect=deselect)
        if not _from_copy(where, repo):
            return Outcome(bug, "error", time.monotonic() - started, path, how, tests,
                           f"memory was imported from {where}, not from the copy")  # fmt: skip
    # pytest: 0 all passed, 1 some failed; anything else (no tests, an import error, a timeout) no verdict
    result = {0: "survived", 1: "caught"}.get(code, "error")
    detail = _tail(out) if code != -1 else out
    return Outcome(bug, result, time.monotonic() - started, path, how, tests, detail)


# ------------------------------------------------------------------ reporting


def module_of(o: Outcome) -> str:
    return o.found_in or o.bug.file


def table(outcomes: Sequence[Outcome]) -> str:
    rows = [f"{'bug':<24} {'result':<9} {'s':>5} {'tests':>5}  file"]
    for o in outcomes:
        moved = f" (found in {o.found_in}, {o.how.split(';')[0]})" if o.found_in and o.found_in != o.bug.file else ""
        rows.append(f"{o.bug.id:<24} {o.result:<9} {o.seconds:5.0f} {len(o.tests):>5}  {o.bug.file}{moved}")
    per: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for o in outcomes:
        per[o.bug.file][o.result] += 1
    rows += ["", f"{'module':<36} {'caught':>6} {'survived':>8} {'n/a':>4} {'error':>5}"]
    for name in sorted(per):
        c = per[name]
        rows.append(f"{name:<36} {c['caught']:>6} {c['survived']:>8} {c['n/a']:>4} {c['error']:>5}")
    return "\n".join(rows)


def summary(outcomes: Sequence[Outcome], seconds: float, files: Sequence[str], tree: Path) -> dict[str, object]:
    counts = {k: sum(o.result == k for o in outcomes) for k in ("caught", "survived", "n/a", "error")}
    tried = counts["caught"] + counts["survived"]
    per: dict[str, dict[str, int]] = defaultdict(lambda: {"caught": 0, "survived": 0, "n/a": 0, "error": 0})
    for o in outcomes:
        per[o.bug.file][o.result] += 1
    return {
        "bugs_files": list(files), "tree": str(tree), "total": len(outcomes), "caught": counts["caught"],
        "survived": counts["survived"], "not_applicable": counts["n/a"], "errors": counts["error"],
        "caught_share": round(counts["caught"] / tried, 3) if tried else None, "seconds": round(seconds),
        "survived_ids": [o.bug.id for o in outcomes if o.result == "survived"],
        "not_applicable_ids": [o.bug.id for o in outcomes if o.result == "n/a"],
        "error_ids": [o.bug.id for o in outcomes if o.result == "error"],
        "per_module": {k: dict(v) for k, v in sorted(per.items())},
    }  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.planted", description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", metavar="FILE", help="JSON files of planted bugs")
    ap.add_argument("--tree", type=Path, default=ROOT, help="the tree to copy (default: this working tree)")
    ap.add_argument("--only", nargs="*", default=[], metavar="ID", help="these bugs only")
    ap.add_argument("--timeout", type=float, default=RUN_TIMEOUT_S, help="seconds per bug's test run")
    ap.add_argument("--jobs", type=int, default=1, help="bugs tried at once, each in its own copy (default 1)")
    ap.add_argument("--no-baseline", action="store_true", help="skip the run of the chosen tests on an unchanged copy")
    ap.add_argument("--json-out", type=Path, default=None, help="write every bug's outcome (and the summary) here")
    args = ap.parse_args(argv)

    tree = args.tree.resolve()
    bugs = [b for b in load_bugs(args.files) if not args.only or b.id in args.only]
    started = time.monotonic()
    deselect: list[str] = []
    if not args.no_baseline:
        with tempfile.TemporaryDirectory(prefix="planted-select-") as tmp:
            repo = copy_tree(tree, Path(tmp))
            chosen: set[str] = set()
            for bug in bugs:
                found = locate(repo, bug)
                if found is not None:
                    modules = [dotted(found[0])] + ([dotted(bug.file)] if bug.file != found[0] else [])
                    chosen.update(choose_tests(repo, modules)[0])
        deselect, tail = baseline(tree, sorted(chosen), args.timeout * 3)
        if deselect:
            print(f"failing without any bug, deselected in every run: {' '.join(deselect)}", file=sys.stderr)
        elif tail:
            print(f"the baseline run gave no verdict:\n{tail.replace(' | ', chr(10))}", file=sys.stderr)
            return 2

    def one(bug: Bug) -> Outcome:
        outcome = attempt(tree, bug, args.timeout, deselect)
        print(f"{bug.id}: {outcome.result} ({outcome.seconds:.0f} s)", file=sys.stderr, flush=True)
        return outcome

    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        outcomes = list(pool.map(one, bugs))
    seconds = time.monotonic() - started
    print(table(outcomes))
    for o in outcomes:
        if o.result in ("survived", "error"):
            print(f"  {o.result}: {o.bug.id}: {o.bug.breaks} ({o.detail[:200]})")
    result = summary(outcomes, seconds, args.files, tree)
    result["deselected"] = deselect
    if args.json_out is not None:
        args.json_out.write_text(json.dumps({**result, "outcomes": [
            {**asdict(o), "bug": asdict(o.bug)} for o in outcomes]}, indent=1, ensure_ascii=False) + "\n")  # fmt: skip
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
