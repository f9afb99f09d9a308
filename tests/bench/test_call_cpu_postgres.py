"""`bench.fleet.call_cpu` counts the database's CPU: work done in a Postgres backend shows in
`postgres_cpu_s`, including a backend that ended (its time moves to the postmaster's
reaped children)."""

from __future__ import annotations

import time
from pathlib import Path

import psycopg

from bench.fleet.call_cpu import postgres_cpu_s

BUSY = "SELECT count(*) FROM generate_series(1, 3000000) g WHERE md5(g::text) LIKE 'ab%'"


def test_a_backends_work_is_counted_after_its_connection_closed(data_dir: Path, embedded_server_url: str) -> None:
    pgdata = data_dir / "pg"
    before = postgres_cpu_s(pgdata)
    assert before is not None
    with psycopg.connect(embedded_server_url) as conn:
        (backend,) = conn.execute("SELECT pg_backend_pid()").fetchone()
        conn.execute(BUSY).fetchone()
    gone = Path(f"/proc/{backend}")
    for _ in range(2000):  # until the postmaster has reaped it: its time is then only in cutime/cstime
        if not gone.exists():
            break
        time.sleep(0.005)
    assert not gone.exists()
    after = postgres_cpu_s(pgdata)
    assert after is not None
    assert after - before >= 0.2  # 3,000,000 md5s: about a second of CPU on this machine, a backend's


def test_no_server_no_figure(tmp_path: Path) -> None:
    assert postgres_cpu_s(tmp_path) is None
