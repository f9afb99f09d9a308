"""PgBouncer in transaction mode in front of a Postgres, for tests and benchmarks.

`with PgBouncer(upstream_url) as bouncer: bouncer.url` runs Debian's `pgbouncer` in a
temporary directory on a free port of 127.0.0.1, pooling in transaction mode (each
transaction on any server connection: what a fleet's pooler does), and stops it on exit.
`bouncer.pools()` reads its admin console (`SHOW POOLS`). The product itself never runs
PgBouncer: an operator points `MEMORY_DATABASE_URL` at theirs.

As root, PgBouncer refuses to run unless given a user; it then runs as the user the
embedded Postgres runs as (its socket directory is that user's), else `nobody`.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from harness.guards import HANG_GUARD_S

INSTALL_HINT = "PgBouncer is not installed: apt-get install -y pgbouncer (Debian/Ubuntu)"


def pgbouncer_binary() -> str | None:
    """The pgbouncer executable (Debian puts it in /usr/sbin, off a normal user's PATH)."""
    found = shutil.which("pgbouncer")
    if found:
        return found
    return "/usr/sbin/pgbouncer" if os.access("/usr/sbin/pgbouncer", os.X_OK) else None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run_as() -> str | None:
    if os.geteuid() != 0:
        return None
    for user in ("embedded_postgres", "nobody"):
        try:
            pwd.getpwnam(user)
            return user
        except KeyError:
            continue
    return None


class PgBouncer:
    """A PgBouncer process pooling `upstream` (a postgresql:// URL) in transaction mode."""

    def __init__(
        self,
        upstream: str,
        *,
        pool_size: int = 20,
        max_client_conn: int = 1000,
        max_db_connections: int = 0,
        query_wait_timeout: int = 120,
    ) -> None:
        from psycopg.conninfo import conninfo_to_dict

        info: dict[str, Any] = conninfo_to_dict(upstream)
        self.dbname = str(info.get("dbname") or "postgres")
        self.user = str(info.get("user") or "postgres")
        self._upstream = info
        self.pool_size = pool_size
        self.max_client_conn = max_client_conn
        self.max_db_connections = max_db_connections
        self.query_wait_timeout = query_wait_timeout
        self.port = 0
        self.dir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{self.dbname}"

    def _ini(self) -> str:
        up = self._upstream
        target = " ".join(
            f"{key}={up[key]}" for key in ("host", "port", "user", "password") if up.get(key) not in (None, "")
        )
        assert self.dir is not None
        # Any database name goes to the same server under that name (tests make databases).
        return f"""[databases]
* = {target}

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = {self.port}
unix_socket_dir =
auth_type = trust
auth_file = {self.dir / "userlist.txt"}
admin_users = {self.user}
stats_users = {self.user}
pool_mode = transaction
default_pool_size = {self.pool_size}
min_pool_size = 0
reserve_pool_size = 0
max_client_conn = {self.max_client_conn}
max_db_connections = {self.max_db_connections}
query_wait_timeout = {self.query_wait_timeout}
server_reset_query =
ignore_startup_parameters = extra_float_digits,options
logfile = {self.dir / "pgbouncer.log"}
pidfile = {self.dir / "pgbouncer.pid"}
"""

    def start(self) -> PgBouncer:
        binary = pgbouncer_binary()
        if binary is None:
            raise RuntimeError(INSTALL_HINT)
        self.dir = Path(tempfile.mkdtemp(prefix="pgbouncer-"))
        (self.dir / "userlist.txt").write_text(f'"{self.user}" ""\n')
        user = _run_as()
        if user is not None:
            entry = pwd.getpwnam(user)
            os.chown(self.dir, entry.pw_uid, entry.pw_gid)
            for child in self.dir.iterdir():
                os.chown(child, entry.pw_uid, entry.pw_gid)
        for _attempt in range(5):  # a free port may be taken between the look and the bind
            self.port = free_port()
            (self.dir / "pgbouncer.ini").write_text(self._ini())
            cmd = [binary, "-q", *(["-u", user] if user else []), str(self.dir / "pgbouncer.ini")]
            self._proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            if self._wait_ready():
                return self
            self.stop(keep_dir=True)
        log = (self.dir / "pgbouncer.log").read_text(errors="replace")[-2000:] if self.dir else ""
        raise RuntimeError(f"PgBouncer did not start: {log}")

    def _wait_ready(self, timeout: float = HANG_GUARD_S) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc is None or self._proc.poll() is not None:
                return False
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return True
            except OSError:
                time.sleep(0.05)
        return False

    def pools(self) -> list[dict[str, Any]]:
        """`SHOW POOLS` from the admin console: one dict per (database, user) pool."""
        return self._show("POOLS")

    def _show(self, what: str) -> list[dict[str, Any]]:
        import psycopg

        with psycopg.connect(
            f"postgresql://{self.user}@127.0.0.1:{self.port}/pgbouncer", autocommit=True, prepare_threshold=None
        ) as conn:
            cur = conn.cursor()
            cur.execute(f"SHOW {what}".encode())  # the admin console speaks the simple protocol only
            names = [d.name for d in cur.description or []]
            return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    def server_connections(self) -> int:
        """Connections PgBouncer holds to Postgres for the product's database now."""
        return sum(
            int(p.get(k) or 0)
            for p in self.pools()
            if p.get("database") == self.dbname
            for k in ("sv_active", "sv_idle", "sv_used", "sv_tested", "sv_login")
        )

    def client_connections(self) -> int:
        """Clients connected to PgBouncer for the product's database now."""
        return sum(
            int(p.get(k) or 0)
            for p in self.pools()
            if p.get("database") == self.dbname
            for k in ("cl_active", "cl_waiting", "cl_active_cancel_req", "cl_waiting_cancel_req")
        )

    def stop(self, *, keep_dir: bool = False) -> None:
        if self._proc is not None:
            if self._proc.poll() is None:
                self._proc.terminate()
                try:
                    self._proc.wait(5)
                except subprocess.TimeoutExpired:
                    self._proc.kill()
                    self._proc.wait()
            if self._proc.stderr is not None:
                self._proc.stderr.close()
            self._proc = None
        if self.dir is not None and not keep_dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def __enter__(self) -> PgBouncer:
        return self.start()

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.stop()
