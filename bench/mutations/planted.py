"""Do the tests catch bugs written by someone who has not read them? `python -m bench.mutations.planted FILE`.

    uv run python -m bench.mutations.planted FILE [FILE ...] [--tree DIR] [--only ID ...] [--timeout S]
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

from bench.common.paths import ROOT as REPO_ROOT
from bench.mutations.planted_select import SKIPPED_DIRS, Bug, choose_tests, dotted, locate

ROOT = REPO_ROOT
RUN_TIMEOUT_S = 600.0
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
    ap = argparse.ArgumentParser(prog="python -m bench.mutations.planted", description=__doc__.split("\n\n")[0])
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
