"""Do the tests notice the bugs they are named after? `python -m bench.mutations.run`.

    uv run python -m bench.mutations.run [--only NAME ...] [--feature F ...] [--jobs N]
                                     [--ref REF --before] [--list] [--check]

Each mutation of `bench/mutations/mutation_list.py` is one small, realistic bug: a snippet of the
product's code and what it becomes. For each, a scratch copy of the tree is made (the
working tree, or the commit REF with `--ref`), the bug put in, and the tests named for it
run there (pytest, one process, `-x`): caught when a test fails, missed when they all
pass. The working tree is never changed, so nothing needs reverting and runs can go side
by side (`--jobs`). First the named tests run once on an unchanged copy: a mutation is
only meaningful against tests that pass without it.

`--before` runs each mutation's `before` tests (those that guarded the feature before
issue 37) instead; with `--ref` at the commit before issue 37 that gives the count
"caught before". `--check` only verifies that every snippet is still in the code, once,
and every named test file exists (the suite runs it: tests/bench/test_mutation_list.py).

Prints a table and, last, one JSON line: tried, caught, missed, errors, not_applicable.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from bench.common.paths import ROOT as REPO_ROOT
from bench.mutations.mutation_list import MUTATIONS, Mutation

ROOT = REPO_ROOT
RUN_TIMEOUT_S = 900.0
SKIPPED_DIRS = {".git", ".venv", "__pycache__", ".pytest_cache", ".ruff_cache", ".data", "results"}


@dataclass(frozen=True)
class Outcome:
    mutation: Mutation
    result: str  # caught | missed | error | n/a
    seconds: float
    detail: str = ""


def problems(mutations: Iterable[Mutation], root: Path = ROOT) -> list[str]:
    """What is wrong with the list against the code at `root`: a snippet gone or not unique,
    a replacement that changes nothing, a named test file missing, a name used twice."""
    out: list[str] = []
    seen: set[str] = set()
    for m in mutations:
        if m.name in seen:
            out.append(f"{m.name}: the name is used twice")
        seen.add(m.name)
        path = root / m.file
        if not path.is_file():
            out.append(f"{m.name}: {m.file} does not exist")
            continue
        count = path.read_text(encoding="utf-8").count(m.original)
        if count != 1:
            out.append(f"{m.name}: the snippet is in {m.file} {count} times, not once")
        if m.original == m.replacement:
            out.append(f"{m.name}: the replacement changes nothing")
        for test in (*m.tests, *m.before):
            if not (root / test.split("::")[0]).is_file():
                out.append(f"{m.name}: no test file {test.split('::')[0]}")
        if not m.tests:
            out.append(f"{m.name}: no test named to catch it")
    return out


def scratch_copy(dest: Path, ref: str | None) -> Path:
    """The tree under `dest/repo`, with `dest/shared` pointing at the evaluation data beside
    the repository (`../shared/eval` resolves as it does from the worktree)."""
    repo = dest / "repo"
    repo.mkdir(parents=True)
    shared = ROOT.parent / "shared"
    if shared.exists():
        (dest / "shared").symlink_to(shared)
    if ref:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref], capture_output=True, check=True)
        tar = dest / "tree.tar"
        tar.write_bytes(archive.stdout)
        with tarfile.open(tar) as t:
            t.extractall(repo, filter="tar")
        tar.unlink()
        return repo
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-co", "--exclude-standard", "-z"],
                            capture_output=True, check=True, text=True).stdout.split("\0")  # fmt: skip
    for name in filter(None, listed):
        src = ROOT / name
        if not src.is_file() or SKIPPED_DIRS & set(Path(name).parts):
            continue
        target = repo / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, target, follow_symlinks=False)
    return repo


def run_tests(repo: Path, tests: Sequence[str], timeout_s: float, lines: int = 3) -> tuple[int, str]:
    """pytest on `tests` in `repo`, serially, stopping at the first failure: (exit code, the
    output's last `lines` lines)."""
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-n", "0", "-p", "no:cacheprovider", "-o", "addopts=", *tests]
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    try:
        done = subprocess.run(cmd, cwd=repo, capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired:
        return -1, f"timed out after {timeout_s:.0f} s"
    tail = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()][-lines:]
    return done.returncode, " | ".join(tail)[-300 * lines :]


def attempt(m: Mutation, *, ref: str | None, before: bool, timeout_s: float) -> Outcome:
    started = time.monotonic()
    tests = m.before if before else m.tests
    if not tests:
        return Outcome(m, "n/a", 0.0, "no test named before issue 37")
    with tempfile.TemporaryDirectory(prefix=f"mutation-{m.name}-") as tmp:
        repo = scratch_copy(Path(tmp), ref)
        path = repo / m.file
        text = path.read_text(encoding="utf-8") if path.is_file() else ""
        if text.count(m.original) != 1:
            return Outcome(m, "n/a", time.monotonic() - started, f"the snippet is not in {m.file} at {ref or 'HEAD'}")
        path.write_text(text.replace(m.original, m.replacement), encoding="utf-8")
        code, tail = run_tests(repo, tests, timeout_s)
    # pytest: 0 all passed, 1 some failed; anything else (no tests, an import error) is no verdict
    result = {0: "missed", 1: "caught"}.get(code, "error")
    return Outcome(m, result, time.monotonic() - started, tail)


def baseline(mutations: Sequence[Mutation], *, ref: str | None, before: bool, timeout_s: float) -> tuple[int, str]:
    """Every named test once, on an unchanged copy: they must pass for a verdict to mean anything."""
    tests = sorted({t for m in mutations for t in (m.before if before else m.tests)})
    with tempfile.TemporaryDirectory(prefix="mutation-baseline-") as tmp:
        repo = scratch_copy(Path(tmp), ref)
        present = [t for t in tests if (repo / t.split("::")[0]).is_file()]
        # a failure here is reported whole: it is a test that fails without any bug
        return run_tests(repo, present, timeout_s * 3, lines=60) if present else (0, "")


def table(outcomes: Sequence[Outcome]) -> str:
    rows = [f"{'mutation':<34} {'feature':<16} {'result':<7} {'s':>5}  file"]
    for o in outcomes:
        rows.append(f"{o.mutation.name:<34} {o.mutation.feature:<16} {o.result:<7} {o.seconds:5.0f}  {o.mutation.file}")
    return "\n".join(rows)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.mutations.run", description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="*", default=[], metavar="NAME", help="these mutations only")
    ap.add_argument("--feature", nargs="*", default=[], help="the mutations of these features only")
    ap.add_argument("--jobs", type=int, default=2, help="mutations tried at once (each in its own copy)")
    ap.add_argument("--ref", default=None, help="a commit to copy instead of the working tree")
    ap.add_argument("--before", action="store_true", help="run each mutation's `before` tests")
    ap.add_argument("--timeout", type=float, default=RUN_TIMEOUT_S, help="seconds per mutation's test run")
    ap.add_argument("--no-baseline", action="store_true", help="skip the run on the unchanged copy")
    ap.add_argument("--list", action="store_true", help="print the list and stop")
    ap.add_argument("--check", action="store_true", help="check the list against the code and stop")
    args = ap.parse_args(argv)

    chosen = [m for m in MUTATIONS if (not args.only or m.name in args.only)
              and (not args.feature or m.feature in args.feature)]  # fmt: skip
    if args.list:
        for m in chosen:
            print(f"{m.name:<34} {m.feature:<16} {m.file}: {m.bug}")
        return 0
    wrong = problems(chosen)
    if args.check or (wrong and not args.ref):
        print("\n".join(wrong) or f"{len(chosen)} mutations, every snippet in place")
        return 1 if wrong else 0
    started = time.monotonic()
    if not args.no_baseline:
        code, tail = baseline(chosen, ref=args.ref, before=args.before, timeout_s=args.timeout)
        if code not in (0, 5):
            print(
                f"the named tests fail without any mutation (exit {code}):\n{tail.replace(' | ', chr(10))}",
                file=sys.stderr,
            )
            return 2
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        outcomes = list(pool.map(lambda m: attempt(m, ref=args.ref, before=args.before, timeout_s=args.timeout),
                                 chosen))  # fmt: skip
    print(table(outcomes))
    for o in outcomes:
        if o.result in ("missed", "error"):
            print(f"  {o.result}: {o.mutation.name}: {o.mutation.bug} ({o.detail})")
    counts = {k: sum(o.result == k for o in outcomes) for k in ("caught", "missed", "error", "n/a")}
    print(json.dumps({
        "tried": sum(o.result != "n/a" for o in outcomes), "caught": counts["caught"], "missed": counts["missed"],
        "errors": counts["error"], "not_applicable": counts["n/a"], "ref": args.ref or "working tree",
        "tests": "before" if args.before else "current", "seconds": round(time.monotonic() - started),
        "missed_names": [o.mutation.name for o in outcomes if o.result == "missed"],
    }))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
