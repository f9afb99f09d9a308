"""Job processes creating the schema at the same moment, as a worker's idle processes do."""

from __future__ import annotations

import threading

from memory.storage.postgres import ensure_schema, open_pool


def create_schema_at_once(url: str, table: str, processes: int = 6) -> list[Exception]:
    """`ensure_schema` from `processes` pools of one connection each, released together by a
    barrier; the exceptions any of them raised (none when the schema creation is race-free)."""
    pools = [open_pool(url, max_size=1) for _ in range(processes)]
    start, errors = threading.Barrier(len(pools)), []

    def create(pool) -> None:
        try:
            start.wait()  # no time-out: on a busy machine the last thread may start late
            ensure_schema(pool, table, 384)
        except Exception as exc:  # noqa: BLE001 - any failure here is reported, never raised
            errors.append(exc)

    threads = [threading.Thread(target=create, args=(p,)) for p in pools]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for p in pools:
        p.close()
    return errors
