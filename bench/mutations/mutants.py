"""Mechanical mutants: do the tests notice bugs nobody chose? `python -m bench.mutations.mutants`.

    uv run python -m bench.mutations.mutants [--module PATH ...] [--limit N] [--timeout-factor F]
                                   [--out FILE] [--budget-s S]

The mutants are mutmut 3's (its operators over the module's syntax tree: a flipped
comparison, `and` for `or`, a number plus one, a string changed, an argument dropped, a
call's result replaced by None, ...), one at a time; the runner is this module's, so each
module runs only the tests that cover it (`bench/mutations/mutant_map.py`, a map kept as data) and
not the whole suite. For each module, in the map's order (the cheapest tests first):

1. a scratch copy of the tree is made once (the working tree is never changed);
2. the module's tests run once unchanged there: a module whose tests fail is reported, not
   mutated; that run's time sets the per-mutant timeout (`--timeout-factor` times it,
   plus 20 s);
3. each mutant is written into the copy and the tests run in a process forked from one
   that has imported the libraries already (mutmut's own approach: a fresh interpreter
   per mutant would spend most of its time importing LiveKit and Mem0): killed when a test
   fails, survived when they all pass, timed out when they run past the timeout (counted
   apart, as mutmut does: a mutant that makes the code hang is noticed, not caught).

The tests that need Postgres share one embedded server started here for the whole run
(`MEMORY_TEST_DATABASE_URL`, which tests/conftest.py honours).

Writes a per-module table (mutants, killed, survived, timed out, not run, each survivor's
line and change) and, last, one JSON line. With `--out` the results are written to that
JSON file after every mutant, so a run stopped early still says how far it got;
`--budget-s` stops starting new mutants after that many seconds (the rest are "not run").

The hand-written list (`python -m bench.mutations.run`, bench/mutations/mutation_list.py) stays for the
bugs a tool cannot make (a dropped `try/finally`, a removed setting, a whole guard taken
out); docs/mutations.md says what guards what.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import json
import os
import random
import select
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.common.paths import ROOT as REPO_ROOT
from bench.mutations.copies import OWN, drop_bytecode, importers_of, make_copy, preload
from bench.mutations.equivalent import equivalent_by_rule
from bench.mutations.mutant_map import MUTANT_MAP
from bench.mutations.results import ModuleResult, Mutant, summary, table

ROOT = REPO_ROOT
# LIGHT: a first pass per mutant with the module's invariant tests only (tests/invariants/,
# which import the module under test directly), in a child that imports again only the
# mutated module and those tests, not the product's modules that import it nor the test
# suite's conftest: a failure there is the mutant's (the same tests pass on the unchanged
# module in the same child, checked first), and a kill costs a second or two instead of
# a minute at load. A mutant that survives it runs the whole list as before.
LIGHT_TESTS = ("tests.invariants",)
LIGHT_PREFIX = "tests/invariants/"


def mutants_of(path: Path, source: str) -> list[Mutant]:
    """mutmut's mutants of the module, each as the whole file with one change."""
    from mutmut.mutation.file_mutation import create_mutations

    module, mutations, _, _ = create_mutations(str(path), source)
    before_lines = source.splitlines()
    out = []
    for m in mutations:
        code = module.deep_replace(m.original_node, m.mutated_node).code
        after_lines = code.splitlines()
        matcher = difflib.SequenceMatcher(a=before_lines, b=after_lines, autojunk=False)
        changed = next((op for op in matcher.get_opcodes() if op[0] != "equal"), None)
        if changed is None:
            continue  # the operator changed nothing visible
        _, i1, i2, j1, j2 = changed
        out.append(
            Mutant(
                line=i1 + 1,
                before=" ".join(x.strip() for x in before_lines[i1:i2])[:160],
                after=" ".join(x.strip() for x in after_lines[j1:j2])[:160],
                code=code,
            )
        )
    return out


SAMPLE_SEED = 48  # `--sample`: fixed, so a rerun after a new test draws the same mutants
MAX_DESELECTED = 3  # baseline runs that may each leave out the tests failing unchanged


def failed_tests(log: Path) -> list[str]:
    """The node ids pytest's summary names as failed or in error (`FAILED id - ...`)."""
    out = []
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith(("FAILED ", "ERROR ")):
            out.append(line.split(" ", 1)[1].split(" - ", 1)[0].strip())
    return out


def _child(copy: Path, tests: Sequence[str], log: Path, purge: set[str], light: bool = False,
           first_failure: bool = True) -> None:  # fmt: skip
    """In the forked child: import afresh from the copy what the mutated module reaches
    (it, the product's modules that import it, the tests) and run the tests. The rest of
    the product stays as the parent imported it: the same source, seconds saved per mutant."""
    try:
        os.setpgid(0, 0)  # its own group: a timeout kills the test's subprocesses with it
        if light:  # the first pass: only the module and the invariant tests again (`LIGHT`)
            dropped = [n for n in sys.modules if n in purge or n.startswith(LIGHT_TESTS)]
        else:
            dropped = [n for n in sys.modules if n in purge or n.split(".")[0] in OWN[1:]]
        for name in dropped:
            del sys.modules[name]
            parent, _, child = name.rpartition(".")
            if parent in sys.modules:  # `from package import module` reads the package's attribute first
                sys.modules[parent].__dict__.pop(child, None)
        package = sys.modules.get("memory")
        if package is not None:  # the names it hands out lazily, cached: looked up again
            for name in getattr(package, "_EXPORTS", {}):
                package.__dict__.pop(name, None)
        from prometheus_client import REGISTRY  # our metrics are registered again as memory.ops is imported

        if "memory.ops.metrics" not in sys.modules:
            for collector, names in list(REGISTRY._collector_to_names.items()):
                if any(n.startswith("memory_") for n in names):
                    REGISTRY.unregister(collector)
        sys.dont_write_bytecode = True
        sys.path_importer_cache.clear()  # the copy is made afresh for each module: no stale finder
        importlib.invalidate_caches()
        os.chdir(copy)
        out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(out, 1)
        os.dup2(out, 2)
        import pytest

        # --assert=plain: no rewriting of each test module on import (a second a child); a
        # failing assert fails the same, only its message is shorter.
        args = [*(["-x"] if first_failure else []), "-q", "-p", "no:cacheprovider", "-o", "addopts=", "--assert=plain",
                "-m", "not installed_package", *tests]  # fmt: skip
        code = int(pytest.main(args))
    except BaseException:  # noqa: BLE001 - any failure to run is a failed run
        import traceback

        traceback.print_exc()
        code = 99
    os._exit(code)


def run_tests(copy: Path, tests: Sequence[str], timeout_s: float, purge: set[str],
              light: bool = False, first_failure: bool = True) -> tuple[str, float]:  # fmt: skip
    """ "passed", "failed" or "timeout", and how long it took (the output: `run.log` beside the copy)."""
    start = time.monotonic()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        _child(copy, tests, copy.parent / "run.log", purge, light, first_failure)
    fd = os.pidfd_open(pid)
    try:
        ready, _, _ = select.select([fd], [], [], timeout_s)
        if not ready:
            for target in (-pid, pid):
                try:
                    os.kill(target, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            os.waitpid(pid, 0)
            return "timeout", time.monotonic() - start
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(fd)
    try:  # what the tests started and left (a server, a child) goes with them
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    code = os.waitstatus_to_exitcode(status)
    return ("passed" if code == 0 else "failed"), time.monotonic() - start


def run_module(
    copy: Path,
    module: str,
    tests: list[str],
    *,
    limit: int | None,
    factor: float,
    deadline: float,
    out: Any,
    line: set[int] | None = None,
    light_only: bool = False,
    sample: int | None = None,
) -> ModuleResult:
    result = ModuleResult(module, tests)
    target = copy / module
    source = target.read_text(encoding="utf-8")
    mutants = mutants_of(target, source)
    if line is not None:
        mutants = [m for m in mutants if m.line in line]
    if limit is not None:
        mutants = mutants[:limit]
    if sample is not None and sample < len(mutants):  # a uniform sample, the same for the same tree
        result.sampled_of = len(mutants)
        keep = sorted(random.Random(SAMPLE_SEED).sample(range(len(mutants)), sample))
        mutants = [mutants[i] for i in keep]
    result.mutants = len(mutants)
    mutants, aside = equivalent_by_rule(source, mutants)
    result.set_aside = len(aside)
    start = time.monotonic()
    purge_name = module.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
    purge = importers_of(copy, purge_name)
    light_only = light_only and any(t.startswith(LIGHT_PREFIX) for t in tests)
    if light_only:  # only the invariant tests: a survivor here is an upper bound of the map's
        tests = result.tests = [t for t in tests if t.startswith(LIGHT_PREFIX)]
        status, took = run_tests(copy, tests, 1800.0, {purge_name}, light=True)
    else:
        status, took = run_tests(copy, tests, 1800.0, purge, first_failure=False)
        for _ in range(MAX_DESELECTED):  # a test that fails unchanged here gives no verdict: left out, and said
            failing = failed_tests(copy.parent / "run.log") if status == "failed" else []
            if not failing or set(failing) <= set(result.deselected):
                break
            result.deselected += [t for t in failing if t not in result.deselected]
            tests = result.tests = [*tests, *(f"--deselect={t}" for t in failing)]
            status, took = run_tests(copy, tests, 1800.0, purge, first_failure=False)
    result.baseline_s, result.baseline_ok = round(took, 1), status == "passed"
    if not result.baseline_ok:
        result.not_run = len(mutants)
        tail = (copy.parent / "run.log").read_text(errors="replace").splitlines()[-30:]
        print("\n".join(["# its tests fail unchanged:", *tail]), file=sys.stderr)
        return result
    timeout_s = factor * took + 20.0
    light_tests = [t for t in tests if t.startswith(LIGHT_PREFIX)]
    light_purge = {purge_name}
    light_timeout_s = timeout_s
    if light_tests and not light_only:
        status, light_took = run_tests(copy, light_tests, 1800.0, light_purge, light=True)
        if status != "passed":  # the first pass cannot be trusted here: every mutant runs the whole list
            print(f"# {module}: its invariant tests fail in a light child: no first pass", file=sys.stderr)
            light_tests = []
        light_timeout_s = factor * light_took + 20.0
    try:
        for n, m in enumerate(mutants, 1):
            if time.monotonic() > deadline:
                result.not_run = len(mutants) - n + 1
                break
            target.write_text(m.code, encoding="utf-8")
            drop_bytecode(target)
            status = "passed"
            if light_tests:
                status, _ = run_tests(copy, light_tests, light_timeout_s, light_purge, light=True)
                result.first_pass_kills += status == "failed"
            if status == "passed" and not light_only:  # survived the first pass (or there is none): the whole list
                status, _ = run_tests(copy, tests, timeout_s, purge)
            if status == "failed":
                result.killed += 1
                said = (copy.parent / "run.log").read_text(errors="replace").strip().splitlines()[-1:]
                result.killed_by.append({"line": m.line, "said": said[0][:200] if said else ""})
            elif status == "timeout":
                result.timed_out += 1
            else:
                result.survived += 1
                result.survivors.append({"line": m.line, "before": m.before, "after": m.after})
            if os.environ.get("MUTANTS_KEEP_LOGS"):
                shutil.copy(copy.parent / "run.log", Path(os.environ["MUTANTS_KEEP_LOGS"]) / f"{m.line}-{n}.log")
            result.seconds = round(time.monotonic() - start, 1)
            out(result)
    finally:
        target.write_text(source, encoding="utf-8")
        drop_bytecode(target)
    result.seconds = round(time.monotonic() - start, 1)
    return result


def _start_postgres(work: Path) -> str:
    from memory.storage.postgres import embedded_url

    return embedded_url(work / "pg")


def _stop_postgres(pgdata: Path) -> None:
    """Stop the run's server before its directory goes (a fast shutdown: SIGINT)."""
    try:
        pid = int((pgdata / "postmaster.pid").read_text().split()[0])
        os.kill(pid, signal.SIGINT)
    except (OSError, ValueError, IndexError):
        return
    for _ in range(300):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.mutations.mutants", description=__doc__.split("\n")[0])
    parser.add_argument("--module", action="append", help="a module of the map (its path); default every one")
    parser.add_argument("--limit", type=int, default=None, help="the first N mutants of each module (smoke)")
    parser.add_argument("--sample", type=int, default=None,
                        help="N mutants of each module drawn uniformly (fixed seed): a share with an interval "
                             "where the whole module would not finish")  # fmt: skip
    parser.add_argument("--line", action="append", default=None,
                        help="only the mutants of this line (a survivor again): N for every module given, or "
                        "PATH:N; may be repeated")  # fmt: skip
    parser.add_argument("--timeout-factor", type=float, default=3.0)
    parser.add_argument("--budget-s", type=float, default=float("inf"), help="start no mutant after this")
    parser.add_argument("--module-budget-s", type=float, default=float("inf"),
                        help="start no mutant of a module after this long on it")  # fmt: skip
    parser.add_argument("--light-only", action="store_true",
                        help="run each module's tests/invariants/ files only (the first pass): its survivors are an "
                        "upper bound of the whole map's")  # fmt: skip
    parser.add_argument("--out", type=Path, default=None, help="the results as JSON, rewritten after each mutant")
    args = parser.parse_args(argv)
    mapped = dict(MUTANT_MAP)
    modules = [(m, mapped[m]) for m in args.module if m in mapped] if args.module else list(MUTANT_MAP)
    unknown = set(args.module or ()) - {m for m, _ in MUTANT_MAP}
    if unknown:
        parser.error(f"not in bench/mutations/mutant_map.py: {', '.join(sorted(unknown))}")
    deadline = time.monotonic() + args.budget_s
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stopped: the server and the copy go too
    results: list[ModuleResult] = []

    def write(current: ModuleResult) -> None:
        if args.out is not None:
            done = [r for r in results if r is not current] + [current]
            args.out.write_text(json.dumps([{**asdict(r)} for r in done], indent=1) + "\n")

    with tempfile.TemporaryDirectory(prefix="mutants-") as tmp:
        work = Path(tmp)
        copy = work / "tree"  # made afresh for each module: the tree as it is when the module starts
        make_copy(copy)
        sys.path.insert(0, str(copy))  # the product imported from the copy from the first import on
        os.environ["MEMORY_TEST_DATABASE_URL"] = _start_postgres(work)
        try:
            _run_all(copy, modules, args, deadline, results, write)
        finally:
            _stop_postgres(work / "pg")
    print(table(results))
    print(json.dumps(summary(results)))
    return 0


def _lines_of(module: str, given: Sequence[str] | None) -> set[int] | None:
    """The lines of `module` among `--line`'s values (None: every line)."""
    if not given:
        return None
    out = set()
    for value in given:
        path, _, n = value.rpartition(":")
        if not path or path == module:
            out.add(int(n))
    return out


def _run_all(copy: Path, modules: Any, args: argparse.Namespace, deadline: float, results: list[ModuleResult],
             write: Any) -> None:  # fmt: skip
    preload(copy)
    for module, tests in modules:
        shutil.rmtree(copy, ignore_errors=True)
        make_copy(copy)
        print(f"# {module}: {len(tests)} test files", file=sys.stderr, flush=True)
        result = run_module(
            copy,
            module,
            list(tests),
            limit=args.limit,
            factor=args.timeout_factor,
            deadline=min(deadline, time.monotonic() + args.module_budget_s),
            out=write,
            line=_lines_of(module, args.line),
            light_only=args.light_only,
            sample=args.sample,
        )
        results.append(result)
        write(result)
        print(table([result]), file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
