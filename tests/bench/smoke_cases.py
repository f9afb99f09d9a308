"""Every benchmark's smoke size: the arguments that run its `main` in seconds on tiny data
(tests/bench/test_bench_smoke.py runs them, in its process), and the few that are not run
there, each with why. A benchmark with a `main` in neither list fails the suite.

In the arguments, "{tmp}" is a fresh directory, "{data}" the test session's data directory
(its embedded Postgres, already running), "{retrieval}", "{gate}", "{temporal}" and
"{small_talk}" tiny files of each format (the same names under EVAL_DIR, for the
benchmarks that read their default files)."""

from __future__ import annotations

SMOKE: dict[str, str] = {
    # retrieval
    "bench.retrieval.run": "--data {retrieval} --data-dir {data} --method dense",
    "bench.retrieval.temporal": "--data {temporal} --data-dir {data} --limit-stories 1",
    "bench.retrieval.block": "--data {retrieval} --data-dir {data} --modes normal --limit-queries 2 "
    "--small-talk {small_talk}",
    "bench.retrieval.block_time": "--data {retrieval} --queries 2 --data-dir {data}",
    "bench.retrieval.ranking_sweep": "--data {retrieval} --part all --data-dir {data} --folds 2 "
    "--question-weight 1 --echo-weight 1",
    "bench.retrieval.archive_threshold": "--max-queries 2",
    "bench.retrieval.archive": "--messages 40 --users 2 --queries 2 --write-messages 5",
    # gatekeeper
    "bench.gate.run": "--data {gate}",
    "bench.gate.recall_intent": "--data {gate} {retrieval}",
    "bench.gate.rule_cost": "--repeat 1",
    "bench.gate.gate_model": "--cv 2",
    # privacy and hostile input
    "bench.privacy.redaction": "--data {gate} {retrieval} --show 1",
    "bench.privacy.hostile": "--only instructions --sessions 1 --capacity-seconds 1",
    # latency and cost: the pipeline with real speech, the VAD and agent.py's entrypoint,
    # memory off, NORMAL, GATED and Mem0's documented pattern (the peer)
    "bench.latency.lookup_floor": "--data-dir {data} --repeat 1",
    "bench.latency.session_index": "--sizes 50 --queries 3",
    "bench.latency.freshness": "--lookups 3 --memories 5 --data-dir {data}",
    "bench.latency.write_path": "--data {retrieval} --turns 4",
    "bench.latency.working_memory": "--turns 1 --rounds 1 --forms 1 --notes 1",
    "bench.latency.loop_stalls": "--turns 1 --stt batch",
    # fleet and scaling
    "bench.fleet.vector_stage": "--data-dir {data} --queries 2",
    "bench.fleet.fleet_data": "--users 2 --per-user 5 --data-dir {data}",
    # operations: the operator's pages
    "bench.ops.web_render": "--memories 10 --others 10 --calls 5 --repeat 1 --no-browser",
    # mutations
    "bench.mutations.run": "--check",
}

# Benchmarks whose smoke run starts worker processes (LiveKit's process pool, a fleet behind
# PgBouncer, a copy of the repository per mutant, a new Python per command): minutes on a
# loaded 2-core machine, so marked `bench_heavy` and left out of the default run
# (`uv run pytest -m bench_heavy tests/bench/test_bench_smoke.py` runs them).
HEAVY: dict[str, str] = {
    "bench.latency.run": "--stt batch --turns 1 --session-turns 1 --stress-turns 0 --user-memories 10 "
    "--total-memories 20 --no-session-index --data-dir {data}",
    "bench.latency.summary_swap": "--session-turns 3 --summary-after 4 --user-memories 10 --total-memories 20 "
    "--data-dir {data}",
    "bench.fleet.job_memory": "--processes 1 --rounds 1 --settle 0.5",
    "bench.fleet.run": "--smoke --workers 1 --calls 2 --callers 2 --contested-pairs 0 --users 2 --per-user 5 "
    "--skip-pss --no-kill --stt batch --data-dir {data}",
    "bench.fleet.call_cpu": "--calls 1 --callers 1 --users 2 --per-user 5 --data-dir {data}",
    "bench.ops.prewarm": "--runs 1 --concurrent 1 --load 0 --data-dir {tmp}",
    "bench.ops.start_soak": "--seconds 5 --load 0 --data-dir {tmp}",
    "bench.ops.startup": "--rounds 1",
    "bench.ops.commands": "--runs 1",
    "bench.fleet.tenant_recall": "--smoke --data-dir {data}",  # its own embedded server, 2 minutes at load 20
    "bench.mutations.mutants": "--module memory/errors.py --limit 1 --out {tmp}/mutants.json",
}

# A benchmark that reads what another left in its data directory runs after it, in the same test.
AFTER: dict[str, str] = {
    "bench.retrieval.block_time": "bench.retrieval.block",
    "bench.latency.lookup_floor": "bench.latency.run",
    "bench.fleet.vector_stage": "bench.latency.run",
}

NOT_RUN: dict[str, str] = {
    "bench.mutations.planted": "tests/bench/test_planted.py runs its main on a tiny tree (a bug caught, one not)",
    "bench.common.local_llm_server": "serves until stopped; tests/chat and tests/bench/test_bench_extraction start it",
    "bench.fleet.fleet_worker": "a child of bench.fleet.run, started by it with its environment",
    "bench.gate.extraction": "needs an OpenAI-compatible endpoint; tests/bench/test_bench_extraction.py runs its main "
    "against bench.common.local_llm_server",
    "bench.common.holdout": "checks the committed split against the MSC and retrieval files, which are not in the "
    "repository; tests/bench/test_holdout.py runs it where they are",
}
