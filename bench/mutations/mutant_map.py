"""Which tests cover which module, for `python -m bench.mutations.mutants`: kept as data, in the
order the modules are mutated (cheapest tests first, so a run stopped by its budget has
finished the most modules it could). A test file named here must exist
(tests/bench/test_bench_smoke.py checks it): a rename fails the suite, not the next run.
"""

from __future__ import annotations

INV = "tests/invariants/"

ST = "tests/storage/test_store.py::"
SBA = "tests/retrieval/test_said_before_asked.py::"

# Within a module the tests run in the order given, `-x`: the fast invariant tests first
# kill most mutants in a second or two; the slower ones run only for what survives them.
MUTANT_MAP: list[tuple[str, tuple[str, ...]]] = [
    ("memory/errors.py", (f"{INV}test_errors.py", "tests/agent/test_errors.py")),
    (
        "memory/retrieval/ranking.py",
        (
            f"{INV}test_ranking.py",
            f"{SBA}test_a_memory_that_only_repeats_the_message_is_an_echo",
            f"{SBA}test_near_copies_are_alike_in_their_vectors_and_in_their_words",
        ),
    ),  # fmt: skip
    ("memory/retrieval/validity.py", (f"{INV}test_validity.py", "tests/retrieval/test_now_never_past_first.py")),
    (
        "memory/web/security.py",
        (
            f"{INV}test_security.py",
            "tests/web/test_guard.py",
            "tests/web/test_limits_and_proxy.py",
            "tests/web/test_pages.py",
        ),
    ),  # fmt: skip
    ("memory/commands.py", (f"{INV}test_commands.py",)),
    ("memory/storage/replicas.py", (f"{INV}test_replicas.py", "tests/storage/test_replicas.py")),
    (
        "memory/web/proxy.py",
        (f"{INV}test_proxy.py", "tests/web/test_limits_and_proxy.py", "tests/web/test_behind_tls_proxy.py"),
    ),
    (
        "memory/storage/locks.py",
        (
            f"{INV}test_locks.py",
            f"{ST}test_a_writer_stalled_past_its_lease_never_overwrites_a_newer_fact",
            f"{ST}test_a_fact_write_that_fails_gives_the_users_lock_back",
        ),
    ),  # fmt: skip
    ("memory/mcp/server.py", (f"{INV}test_mcp_server.py", "tests/mcp/test_mcp.py")),
    ("memory/storage/session_index.py", (f"{INV}test_session_index.py", "tests/storage/test_session_index.py")),
    ("memory/userdata.py", (f"{INV}test_userdata.py", "tests/admin/test_places.py")),
    ("memory/admin/importer.py", (f"{INV}test_importer.py", "tests/admin/test_import.py")),
    ("memory/language/secret_rules.py", ("tests/language/test_redact_rules.py", "tests/language/test_redact.py")),
    ("memory/web/token_endpoint.py", (f"{INV}test_token_endpoint.py", "tests/web/test_token_endpoint.py")),
    ("memory/storage/generations.py", (f"{INV}test_generations.py", "tests/storage/test_seen_at_once.py")),
]
