"""No benchmark can rot unnoticed: every module under bench/ imports against the product
as it is (a renamed or moved name fails here, not at the next measurement), the mutation
runner's map names files that exist and its mutants are the module with one change, and
bench.latency.run's peer (Mem0's documented pattern) is the agent the worker's entry point
starts; and every benchmark with a `main` runs at its smoke size (tests/bench/smoke_cases.py),
in this process, on tiny data, so a rename in the product fails here."""

from __future__ import annotations

import importlib
import inspect
import json
import logging
import os
import pkgutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

import bench
from tests.bench.smoke_cases import AFTER, HEAVY, NOT_RUN, SMOKE

ROOT = Path(__file__).resolve().parents[2]


def bench_modules() -> list[str]:
    return sorted(m.name for m in pkgutil.walk_packages(bench.__path__, "bench.") if not m.ispkg)


def test_every_bench_module_imports_against_the_product() -> None:
    failed = {}
    for name in bench_modules():
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - every module's failure named at once
            failed[name] = repr(exc)
    assert failed == {}
    assert len(bench_modules()) >= 45  # the list is found (not an empty walk)


def test_the_mutant_map_names_modules_and_tests_that_exist() -> None:
    from bench.mutations.mutant_map import MUTANT_MAP

    missing = [p for module, tests in MUTANT_MAP for p in (module, *(t.split("::")[0] for t in tests))
               if not (ROOT / p).exists()]  # fmt: skip
    assert missing == []
    required = {"memory/storage/locks.py", "memory/storage/replicas.py", "memory/storage/session_index.py",
                "memory/retrieval/ranking.py", "memory/retrieval/validity.py", "memory/userdata.py",
                "memory/admin/importer.py", "memory/commands.py", "memory/errors.py", "memory/web/security.py",
                "memory/web/proxy.py", "memory/mcp/server.py", "memory/language/secret_rules.py"}  # fmt: skip
    assert required <= {m for m, _ in MUTANT_MAP}


def test_each_mutant_is_the_module_with_one_change_on_the_line_it_names() -> None:
    from bench.mutations.mutants import mutants_of

    source = "def bound(n: int) -> bool:\n    limit = 10\n    return n <= limit\n"
    mutants = mutants_of(Path("memory/example.py"), source)
    assert mutants and all(m.code != source for m in mutants)
    changes = {(m.line, m.after) for m in mutants}
    assert (3, "return n < limit") in changes  # the bound off by one
    assert (2, "limit = 11") in changes
    for m in mutants:
        compile(m.code, "mutant", "exec")
        differing = [
            i for i, (a, b) in enumerate(zip(source.splitlines(), m.code.splitlines(), strict=False)) if a != b
        ]
        assert differing == [m.line - 1] or len(m.code.splitlines()) != len(source.splitlines())


async def test_the_latency_peer_is_the_agent_the_workers_entry_point_starts() -> None:
    import agent
    import memory
    from bench.latency.mem0_pattern import HookTimes, Mem0PatternAgent, mem0_pattern

    # The worker asks the package for its first agent; the peer scenario swaps that name.
    assert "memory.first_agent(" in inspect.getsource(agent.entrypoint)
    calls: list[tuple[str, Any]] = []

    class FakeMem0:
        async def search(self, text: str, **kw: Any) -> dict[str, Any]:
            calls.append(("search", text))
            return {"results": []}

        async def add(self, messages: list[dict[str, str]], **kw: Any) -> None:
            calls.append(("add", messages[0]["content"]))

    times = HookTimes()
    real = memory.first_agent
    with mem0_pattern(FakeMem0(), "peer-user", "peer-session", times, 5):
        peer = memory.first_agent(None, None, identity="peer-user")
        assert isinstance(peer, Mem0PatternAgent)
        from livekit.agents import ChatContext, ChatMessage

        await peer.on_user_turn_completed(ChatContext(), ChatMessage(role="user", content=["where do I live"]))
    assert memory.first_agent is real  # given back
    assert calls == [("search", "where do I live"), ("add", "where do I live")]
    assert len(times.search_ms) == len(times.add_ms) == 1 and times.found == [0]


@pytest.mark.parametrize(
    "module", ["bench.latency.run", "bench.privacy.hostile", "bench.mutations.mutants", "bench.mutations.run"]
)
def test_the_benchmarks_named_in_the_docs_have_a_main(module: str) -> None:
    assert callable(importlib.import_module(module).main)


def modules_with_a_main() -> set[str]:
    return {name for name in bench_modules() if callable(getattr(importlib.import_module(name), "main", None))}


def test_every_benchmark_with_a_main_has_a_smoke_size_or_says_why_not() -> None:
    listed = set(SMOKE) | set(HEAVY) | set(NOT_RUN)
    assert modules_with_a_main() - listed == set()  # a new benchmark gets its smoke size
    assert listed - modules_with_a_main() == set()  # a renamed one is renamed here too
    assert len(listed) == len(SMOKE) + len(HEAVY) + len(NOT_RUN) and all(NOT_RUN.values())


@pytest.fixture
def tiny_eval(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Tiny evaluation files of each format, under every name a benchmark reads by default."""
    eval_dir = tmp_path / "eval"
    eval_dir.mkdir()
    memories = [
        ("m1", "My sister Anna lives in Lisbon."),
        ("m2", "我对花生过敏"),
        ("m3", "I adopted a turtle called Shelly last spring."),
        ("m4", "The dentist is on Friday."),
        *((f"n{i}", f"Note {i}: plan number {i} for project {i % 5}.") for i in range(8)),
    ]
    queries = [("q1", "Where does Anna live?", ["m1"]), ("q2", "我对什么过敏", ["m2"]),
               ("q3", "what is my pet's name", ["m3"])]  # fmt: skip
    retrieval = {
        "name": "tiny-smoke", "language": "mixed",
        "stores": [{"store_id": "s1", "memories": [{"id": i, "text": t} for i, t in memories]}],
        "queries": [{"id": i, "store_id": "s1", "query": q, "relevant": r, "category": "c"} for i, q, r in queries],
    }  # fmt: skip
    turns = [("g1", "My sister is called Anna.", True), ("g2", "ok thanks", False),
             ("g3", "I am allergic to peanuts.", True), ("g4", "what time is it", False)]  # fmt: skip
    items = [{"id": i, "text": t, "durable": d, "fact": t if d else None, "context": []} for i, t, d in turns]
    gate = {"name": "tiny-gate", "language": "en", "items": items}
    for name in ("madial_en.dev.json", "madial_zh.dev.json", "locomo.dev.json", "memdaily.dev.json"):
        (eval_dir / name).write_text(json.dumps({**retrieval, "name": name[:-5]}, ensure_ascii=False), encoding="utf-8")
    for name in ("msc_gate.realistic.dev.json", "msc_gate.balanced.dev.json", "zh_gate.smoke.dev.json"):
        (eval_dir / name).write_text(json.dumps({**gate, "name": name[:-5]}, ensure_ascii=False), encoding="utf-8")
    temporal = tmp_path / "temporal.json"
    temporal.write_text((ROOT / "bench" / "data" / "temporal.json").read_text(encoding="utf-8"), encoding="utf-8")
    small_talk = tmp_path / "small_talk.json"
    small_talk.write_text(json.dumps({"name": "tiny-small-talk", "language": "en", "items": ["hello there", "ok"]}))
    monkeypatch.setenv("EVAL_DIR", str(eval_dir))
    return {"retrieval": str(eval_dir / "madial_en.dev.json"), "gate": str(eval_dir / "msc_gate.realistic.dev.json"),
            "temporal": str(temporal), "small_talk": str(small_talk)}  # fmt: skip


CASES = {**SMOKE, **HEAVY}


def _logging_state() -> tuple[int, dict[str, tuple[int, bool, bool, list[logging.Handler]]]]:
    """Every logger's level, switch, propagation and handlers, and the global `disable`."""
    names = [name for name, lg in logging.root.manager.loggerDict.items() if isinstance(lg, logging.Logger)]
    loggers = {name: logging.getLogger(name) for name in names} | {"": logging.root}
    state = {name: (lg.level, lg.disabled, lg.propagate, list(lg.handlers)) for name, lg in loggers.items()}
    return logging.root.manager.disable, state


def _restore_logging(saved: tuple[int, dict[str, tuple[int, bool, bool, list[logging.Handler]]]]) -> None:
    disable, state = saved
    logging.disable(disable)
    for name, lg in logging.root.manager.loggerDict.items():
        if isinstance(lg, logging.Logger) and name not in state:  # made by the benchmark: back to defaults
            lg.setLevel(logging.NOTSET)
            lg.disabled, lg.propagate, lg.handlers = False, True, []
    for name, (level, disabled, propagate, handlers) in state.items():
        lg = logging.getLogger(name) if name else logging.root
        lg.setLevel(level)
        lg.disabled, lg.propagate, lg.handlers = disabled, propagate, handlers


@pytest.mark.parametrize(
    "module",
    [
        *sorted(set(SMOKE) - set(AFTER)),
        *(pytest.param(m, marks=pytest.mark.bench_heavy) for m in sorted(HEAVY)),
    ],
)
def test_each_benchmark_runs_at_its_smoke_size(
    module: str, tiny_eval: dict[str, str], data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = Path(tempfile.mkdtemp(prefix="smoke-", dir=data_dir))  # the embedded server's user reaches it
    run_dir.chmod(0o755)
    places = {**tiny_eval, "tmp": str(run_dir), "data": str(data_dir)}
    for name in [module, *sorted(m for m, first in AFTER.items() if first == module)]:
        args = [a.format(**places) for a in CASES[name].split()]
        environ, logs = dict(os.environ), _logging_state()
        try:
            result = importlib.import_module(name).main(args)
        finally:  # a benchmark that sets its variables or quiets its logs in its own process leaves the suite's alone
            os.environ.clear()
            os.environ.update(environ)
            _restore_logging(logs)
        out = capsys.readouterr()
        assert result in (None, 0), (name, out.err[-2000:])
