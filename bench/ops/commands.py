"""How long the operator's commands take to answer, on a warm install and a small store.

    uv run python -m bench.ops.commands [--runs 5] [--before PATH]
    uv run python -m bench.ops.commands --runs 0 --import-turns 12000 [--before PATH --before-import-turns 600]

A data directory of its own with one user (20 raw turns, a fact with an earlier value, an
archived message), its embedded server kept up by this process as a running worker
would; each command is run `--runs` times as an operator runs it (`python -m ...`, a new
process, bytecode compiled first), its wall time and CPU time (user + system, from the
child's resource usage) taken. `--before PATH` times another checkout of the product
(say `git worktree add /tmp/before main`) in the same run, command by command and run by
run interleaved, so both see the same load. Targets (issue 41): `admin search`,
`admin forget` and `admin import` at most 3 s, `memory.web` saying what is missing in
under 1 s. Prints a table and a final JSON line.

`--import-turns N` adds one line (issue 50): `admin import` of one user of N raw turns (a
JSON-lines file), its rate in turns a second with the machine's load average before and
after beside it; with `--before`, the other checkout's rate in the same run, on
`--before-import-turns` turns (the old path took about a second a turn under load).
Target: at least 200 a second for 12,000.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.common.paths import ROOT as REPO_ROOT

ROOT = REPO_ROOT
IMPORT_TARGET_PER_S = 200.0
_VERBS = ["cooked", "painted", "repaired", "planted", "visited", "bought", "read about", "photographed"]
_THINGS = ["a blue bicycle", "the old piano", "three apple trees", "a lighthouse", "my sister's kitchen",
           "a red kite", "the village library", "a wooden boat", "二十个饺子", "一幅山水画"]  # fmt: skip


def import_file(work: Path, turns: int) -> Path:
    """One user's `turns` raw turns as JSON lines, each a different sentence, in sessions of 40."""
    path = work / f"import-{turns}.jsonl"
    with path.open("w", encoding="utf-8") as out:
        for i in range(turns):
            text = (
                f"On day {i} I {_VERBS[i % len(_VERBS)]} {_THINGS[(i * 7) % len(_THINGS)]} with friend number {i % 97}"
            )
            said = f"2024-{1 + i % 12:02d}-{1 + i % 28:02d}T{i % 24:02d}:00:00Z"
            out.write(
                json.dumps({"text": text, "said_at": said, "session_id": f"s{i // 40}"}, ensure_ascii=False) + "\n"
            )
    return path


def import_rate(tree: Path, work: Path, turns: int, env: dict[str, str]) -> dict[str, float]:
    """`admin import` of a user of `turns` turns from `tree`: its rate and the load around it."""
    path = import_file(work, turns)
    before = os.getloadavg()[0]
    log = work / f"import-{tree.name}-{turns}.log"  # the command's report and progress lines
    with log.open("w") as out:
        wall, cpu = run_once(tree, ["memory.admin", "--json", "import", str(path), "--user", f"bulk-{tree.name}"],
                             env | {"PYTHONPATH": str(tree)}, out)  # fmt: skip
    text = log.read_text()
    report = json.loads(text[text.index("{") : text.rindex("}") + 1])
    stored = report["turns"] + report["unchanged"]
    writing = report["seconds"] or wall  # the import's own time, after the command has started
    return {"turns": turns, "stored": stored, "per_s": round(stored / writing, 1), "writing_s": round(writing, 1),
            "command_per_s": round(stored / wall, 1), "wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
            "load_before": round(before, 2), "load_after": round(os.getloadavg()[0], 2)}  # fmt: skip


TARGETS_S = {"search": 3.0, "forget": 3.0, "import": 3.0, "web_missing_secret": 1.0}


def seed(data_dir: Path) -> object:
    """The small store, opened (its embedded server stays up while it is open)."""
    os.environ["MEMORY_DATA_DIR"] = str(data_dir)
    from memory.settings import load_settings
    from memory.storage.archive import ArchivedMessage, archive_for
    from memory.storage.store import MemoryStore
    from memory.types import now_iso

    store = MemoryStore.open(load_settings(dotenv=False))
    for i in range(20):
        store.add_raw("alice", f"I like thing number {i}", metadata={"session_id": "s1", "seq": i})
    for city in ("Paris", "Berlin"):
        store.upsert_fact("alice", f"User lives in {city}", category="personal_facts", slot="home_city")
    archive_for(store).add([ArchivedMessage("alice:1", "c1", "alice", "hello there", "user", now_iso())])
    return store


def commands(tree: Path, work: Path) -> dict[str, list[str]]:
    """Each command's arguments as that checkout takes them (`forget --yes` is new)."""
    asks = "--yes" in (tree / "memory" / "admin" / "args.py").read_text()
    turns = work / "one.jsonl"
    turns.write_text(json.dumps({"text": "I keep bees", "said_at": "2024-05-01T09:00:00Z"}) + "\n")
    return {
        "show": ["memory.admin", "show", "alice"],
        "search": ["memory.admin", "search", "alice", "where do I live"],
        "forget": ["memory.admin", "forget", "nobody", *(["--yes"] if asks else [])],
        "import": ["memory.admin", "import", str(turns), "--user", "carol"],
        "web_missing_secret": ["memory.web"],
    }


def run_once(tree: Path, args: list[str], env: dict[str, str], out: Any = subprocess.DEVNULL) -> tuple[float, float]:
    """(wall s, CPU s) of one run of `python -m ARGS` from `tree` (its output to `out`)."""
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", *args], cwd=tree, env=env, stdout=out, stderr=out)
    _, _, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    return wall, usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.ops.commands", description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--before", type=Path, help="another checkout to time in the same run")
    ap.add_argument("--import-turns", type=int, default=0, help="time the import of a user of this many turns")
    ap.add_argument("--before-import-turns", type=int, default=600, help="turns for --before's import rate")
    args = ap.parse_args(argv)
    trees = {"after": ROOT} | ({"before": args.before.resolve()} if args.before else {})
    for tree in trees.values():  # a warm install: bytecode compiled once, as an install does
        compileall.compile_dir(str(tree / "memory"), quiet=1)
        compileall.compile_dir(sys.prefix, quiet=1)
    work = Path(tempfile.mkdtemp(prefix="bench-commands-"))
    store = seed(work / "data")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(work), "MEMORY_DATA_DIR": str(work / "data")}
    results: dict[str, dict[str, list[tuple[float, float]]]] = {name: {} for name in trees}
    try:
        for _ in range(args.runs):
            for name, tree in trees.items():
                for command, argv_ in commands(tree, work).items():
                    run_env = env | {"PYTHONPATH": str(tree)}
                    results[name].setdefault(command, []).append(run_once(tree, argv_, run_env))
        imports = {}
        if args.import_turns:
            if args.before:  # the old path first, on fewer turns: it took about a second a turn under load
                imports["before"] = import_rate(trees["before"], work, args.before_import_turns, env)
            imports["after"] = import_rate(ROOT, work, args.import_turns, env)
    finally:
        store.close()  # type: ignore[attr-defined]
    for name, got in imports.items():
        target = f"   target >= {IMPORT_TARGET_PER_S:g}/s" if name == "after" else ""
        print(f"import {name}: {got['stored']:,} of {got['turns']:,} turns written in {got['writing_s']} s = "
              f"{got['per_s']} a second ({got['command_per_s']} a second with the command's start, CPU "
              f"{got['cpu_s']} s); load average {got['load_before']} before, "
              f"{got['load_after']} after{target}")  # fmt: skip
    load = os.getloadavg()
    print(f"load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; {args.runs} runs each; median wall (CPU)")
    print(f"{'command':20s} " + " ".join(f"{name:>18s}" for name in trees) + "   target")
    summary: dict[str, object] = {"load_avg_1m": round(load[0], 2), "runs": args.runs}
    for name, got in imports.items():
        summary |= {f"{name}_import_{k}": v for k, v in got.items()}
    for command in results["after"]:
        cells = []
        for name in trees:
            runs = results[name][command]
            wall = statistics.median(w for w, _ in runs)
            cpu = statistics.median(c for _, c in runs)
            cells.append(f"{wall:7.2f} s ({cpu:4.2f} s)")
            summary[f"{name}_{command}_wall_s"] = round(wall, 3)
            summary[f"{name}_{command}_cpu_s"] = round(cpu, 3)
        target = TARGETS_S.get(command)
        print(f"{command:20s} " + " ".join(f"{c:>18s}" for c in cells) + (f"   <= {target:g} s" if target else ""))
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
