"""Shared fixtures: one real embedded Postgres + Mem0 store per test process (the run,
or each pytest-xdist worker, with a data directory of its own).

Each test gets its own user id, so tests share the server (it starts once, in
about a second) without seeing each other's memories.

`uv run pytest --through-pgbouncer` (or MEMORY_TEST_PGBOUNCER=1) puts PgBouncer in
transaction mode in front of that server for the whole run, as a fleet reaches its
shared Postgres: the store, and every test that opens a store from `base_settings`,
then connect through it (MEMORY_DATABASE_URL). Debian's `pgbouncer` must be installed.
"""

from __future__ import annotations

import asyncio
import atexit
import dataclasses
import json
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

import memory.settings.process

# No developer's .env reaches the tests (README: `cp .env.example .env`, then `uv run
# pytest`): `import agent` and `load_settings()` read the one above the working
# directory into this process, and with its MEMORY_DATABASE_URL the prewarm test wrote
# into that database. Subprocesses run from a temporary directory for the same reason.
memory.settings.process.find_dotenv = lambda *args, **kwargs: ""

from harness.guards import HANG_GUARD_S  # noqa: E402, F401 - the tests' one hang bound
from memory.settings import MemoryMode, MemorySettings, load_settings  # noqa: E402 - after the .env is blocked
from memory.storage.store import MemoryStore  # noqa: E402 - after the .env is blocked

if TYPE_CHECKING:
    from harness.scripted import RecordingLLM
    from memory.service import MemoryService


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """Outside pytest's tmp tree: pytest re-locks that to 0700 on every run, and the
    embedded server runs as its own system user that must reach the directory."""
    path = Path(tempfile.mkdtemp(prefix="memory-tests-"))
    # Registered before the server starts, so it runs after the server has stopped.
    atexit.register(shutil.rmtree, path, True)
    return path


@pytest.fixture(scope="session")
def _initialised_pgdata() -> Iterator[Path]:
    """An embedded server's data directory made (initdb), started and stopped once per test
    process, copied by `initialised_data_dir`: initdb is seconds of a loaded machine."""
    from memory.storage.postgres import embedded_url, leave_embedded

    path = Path(tempfile.mkdtemp(prefix="memory-template-"))
    path.chmod(0o755)  # the embedded server runs as its own system user
    embedded_url(path / "pg")
    leave_embedded(path / "pg")  # the only user: stopped
    (path / "pg" / "log").unlink()  # each copy's log holds its own starts only
    yield path / "pg"
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def initialised_data_dir(_initialised_pgdata: Path) -> Callable[[str], Path]:
    """A new MEMORY_DATA_DIR (under /tmp, named by `prefix`) whose `pg` holds a stopped
    server's data directory, as one a worker started and stopped earlier leaves: for tests
    whose subject is a later start, not initdb. The caller removes it."""

    def make(prefix: str) -> Path:
        data_dir = Path(tempfile.mkdtemp(prefix=prefix))
        data_dir.chmod(0o755)
        # `cp -a`: as root the files belong to the server's system user, and stay its own.
        subprocess.run(["cp", "-a", str(_initialised_pgdata), str(data_dir / "pg")], check=True)
        return data_dir

    return make


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--through-pgbouncer",
        action="store_true",
        default=os.environ.get("MEMORY_TEST_PGBOUNCER", "").strip().lower() in ("1", "true", "yes"),
        help="run the store through PgBouncer in transaction mode (also MEMORY_TEST_PGBOUNCER=1)",
    )


def pytest_report_header(config: pytest.Config) -> str | None:
    return "store: through PgBouncer (transaction mode)" if config.getoption("--through-pgbouncer") else None


@pytest.fixture(scope="session")
def embedded_server_url(data_dir: Path) -> str:
    """The session's embedded Postgres (started here; the last process out stops it), or the
    one already running that MEMORY_TEST_DATABASE_URL names: the server `store` writes to is
    the one a test's replica copies."""
    if url := os.environ.get("MEMORY_TEST_DATABASE_URL"):
        return url
    from memory.storage.postgres import embedded_url

    return embedded_url(data_dir / "pg")


@pytest.fixture(scope="session")
def database_url(request: pytest.FixtureRequest) -> Iterator[str | None]:
    """MEMORY_DATABASE_URL of the run: PgBouncer's with --through-pgbouncer, a server
    already running with MEMORY_TEST_DATABASE_URL (`bench.mutations.mutants` runs many short test
    runs on one), else none (the embedded server under MEMORY_DATA_DIR)."""
    if url := os.environ.get("MEMORY_TEST_DATABASE_URL"):
        yield url
        return
    embedded_server_url = request.getfixturevalue("embedded_server_url")
    if not request.config.getoption("--through-pgbouncer"):
        yield None
        return
    from harness.pgbouncer import PgBouncer, pgbouncer_binary

    if pgbouncer_binary() is None:
        pytest.exit("--through-pgbouncer: pgbouncer is not installed (apt-get install -y pgbouncer)", returncode=2)
    with PgBouncer(embedded_server_url) as bouncer:
        yield bouncer.url


@pytest.fixture(scope="session")
def base_settings(data_dir: Path, database_url: str | None) -> MemorySettings:
    # The spill files beside the data, not in the machine's shared /dev/shm directory: a
    # queue takes over the spill files of dead processes, and a test's killed child must
    # leave its files to that test, not to another run (or xdist worker) on the machine.
    env = {"MEMORY_DATA_DIR": str(data_dir), "MEMORY_SPILL_DIR": str(data_dir / "spill")}
    if database_url:
        env["MEMORY_DATABASE_URL"] = database_url
    return load_settings(env, dotenv=False)


@pytest.fixture(scope="session")
def store(base_settings: MemorySettings) -> Iterator[MemoryStore]:
    st = MemoryStore.open(base_settings)
    yield st
    st.close()


@pytest.fixture
def user_id() -> str:
    return f"user-{uuid.uuid4().hex[:10]}"


def make_service(store: MemoryStore, mode: MemoryMode, **kwargs: object) -> MemoryService:
    """A service over the shared store in the given mode (settings are per service)."""
    from memory.service import MemoryService

    settings = dataclasses.replace(store.settings, mode=mode)
    return MemoryService(store, settings, **kwargs)


async def wait_until(predicate: Callable[[], bool], *, timeout: float = 15.0, what: str = "") -> None:
    """Wait for a condition (never a fixed sleep), failing the test after `timeout`."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what or predicate}")
        await asyncio.sleep(0.01)


def scripted_extraction(facts_by_text: dict[str, list[dict[str, str]]]) -> RecordingLLM:
    """An extraction LLM that answers with the given facts for each user message."""

    from harness.scripted import LLMRequest, RecordingLLM

    def respond(request: LLMRequest) -> str:
        payload = json.loads(request.messages[-1][1])
        return json.dumps({"facts": facts_by_text.get(payload["latest_user_message"], [])})

    return RecordingLLM(respond)
