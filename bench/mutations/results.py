"""What one run of `bench.mutations.mutants` found: a mutant, a module's counts, the table
and the JSON line it prints."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Mutant:
    line: int
    before: str
    after: str
    code: str = field(repr=False)


@dataclass
class ModuleResult:
    module: str
    tests: list[str]
    mutants: int = 0
    killed: int = 0
    survived: int = 0
    timed_out: int = 0
    not_run: int = 0
    first_pass_kills: int = 0  # killed by the invariant tests' first pass (LIGHT)
    set_aside: int = 0  # equivalent by rule (`equivalent_by_rule`): not run, counted apart
    baseline_s: float | None = None
    baseline_ok: bool | None = None
    seconds: float = 0.0
    sampled_of: int | None = None  # `--sample`: how many mutants the module has (`mutants` is the sample)
    deselected: list[str] = field(default_factory=list)  # tests failing on the unchanged copy (not verdicts)
    survivors: list[dict[str, Any]] = field(default_factory=list)
    killed_by: list[dict[str, Any]] = field(default_factory=list)  # pytest's last line for each kill (audit)

    @property
    def surviving_share(self) -> float | None:
        done = self.killed + self.survived + self.timed_out
        return None if not done else self.survived / done


def table(results: Sequence[ModuleResult]) -> str:
    rows = [
        f"{'module':<34} {'mutants':>7} {'aside':>5} {'killed':>6} {'survived':>8} {'timeout':>7} {'not run':>7} "
        f"{'surviving':>9} {'base s':>6} {'s':>6}"
    ]
    for r in results:
        share = "-" if r.surviving_share is None else f"{100 * r.surviving_share:.0f}%"
        rows.append(
            f"{r.module:<34} {r.mutants:>7} {r.set_aside:>5} {r.killed:>6} {r.survived:>8} {r.timed_out:>7} "
            f"{r.not_run:>7} "
            f"{share:>9} {r.baseline_s if r.baseline_s is not None else '-':>6} {r.seconds:>6}"
            + ("" if r.baseline_ok is not False else "  (its tests fail unchanged: not mutated)")
        )
    for r in results:
        for test in r.deselected:
            rows.append(f"  deselected {r.module}: {test} (fails on the unchanged copy)")
        for s in r.survivors:
            rows.append(f"  survived {r.module}:{s['line']}: {s['before']}  ->  {s['after']}")
    return "\n".join(rows)


def summary(results: Sequence[ModuleResult]) -> dict[str, Any]:
    return {
        "modules": len(results),
        "mutants": sum(r.mutants for r in results),
        "killed": sum(r.killed for r in results),
        "survived": sum(r.survived for r in results),
        "timed_out": sum(r.timed_out for r in results),
        "not_run": sum(r.not_run for r in results),
        "set_aside": sum(r.set_aside for r in results),
        "per_module": {
            r.module: {
                "mutants": r.mutants,
                "killed": r.killed,
                "survived": r.survived,
                "timed_out": r.timed_out,
                "not_run": r.not_run,
                "set_aside": r.set_aside,
                "sampled_of": r.sampled_of,
            }  # fmt: skip
            for r in results
        },
    }
