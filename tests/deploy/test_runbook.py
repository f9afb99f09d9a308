"""The runbook's files (deploy/): PgBouncer's configuration run for real in front of the
embedded server with the role the runbook makes; the compose file and the Kubernetes
manifests parsed and checked against each other, the settings and docs/scaling.md
(their images cannot be pulled here)."""

from __future__ import annotations

import configparser
import os
import pwd
import re
import secrets
import shutil
import subprocess
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import yaml
from psycopg import sql

from harness.pgbouncer import free_port, pgbouncer_binary
from memory.retrieval.retriever import Retriever
from memory.settings import VARIABLES, load_settings
from memory.storage.store import MemoryStore
from tests.storage.test_pgbouncer import _need_pgbouncer

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "scaling.md"


def _ini() -> configparser.ConfigParser:
    ini = configparser.ConfigParser(interpolation=None)
    ini.optionxform = str  # type: ignore[assignment, method-assign]
    ini.read(DEPLOY / "pgbouncer.ini")
    return ini


def _roles_sql(role: str, replicator: str, password: str) -> list[str]:
    """deploy/roles.sql as psql runs it with its variables, for a role of another name."""
    text = (DEPLOY / "roles.sql").read_text()
    text = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))
    text = text.replace(":'memory_password'", f"'{password}'").replace(":'replication_password'", f"'{password}'")
    text = re.sub(r"\bmemory\b", role, text)
    text = re.sub(r"\breplicator\b", replicator, text)
    return [s.strip() for s in text.split(";") if s.strip()]


def test_the_runbooks_pgbouncer_ini_and_role_run_the_store_without_a_superuser(embedded_server_url: str) -> None:
    _need_pgbouncer()
    role, password = f"memory_{secrets.token_hex(4)}", secrets.token_hex(8)
    parts = urlsplit(embedded_server_url)
    work = Path(tempfile.mkdtemp(prefix="pgbouncer-runbook-"))
    data = tempfile.mkdtemp(prefix="memory-tests-runbook-")
    proc: subprocess.Popen[bytes] | None = None
    with psycopg.connect(embedded_server_url, autocommit=True) as conn:  # the DBA's role, as on a managed server
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(role)))
    try:
        with psycopg.connect(parts._replace(path=f"/{role}").geturl(), autocommit=True) as conn:
            for statement in _roles_sql(role, f"{role}_replicator", password):
                conn.execute(statement.encode())
        ini = _ini()
        target = f"host={parts.query.split('host=')[1].split('&')[0]} port=5432 dbname={role}"
        for name in ini["databases"]:  # the runbook's databases, pointed at the embedded server
            ini["databases"][name] = re.sub(r"host=\S+ port=\d+ dbname=\S+", target, ini["databases"][name])
        port = free_port()
        ini["pgbouncer"].update(listen_addr="127.0.0.1", listen_port=str(port), auth_file=str(work / "users.txt"),
                                logfile=str(work / "log"), pidfile=str(work / "pid"), admin_users=role,
                                stats_users=role)  # fmt: skip
        (work / "users.txt").write_text(f'"{role}" "{password}"\n')
        with (work / "pgbouncer.ini").open("w") as f:
            ini.write(f)
        user = "embedded_postgres" if os.geteuid() == 0 else None  # as root PgBouncer needs a user to run as
        if user is not None:
            entry = pwd.getpwnam(user)
            for path in (work, *work.iterdir()):
                os.chown(path, entry.pw_uid, entry.pw_gid)
        proc = subprocess.Popen([pgbouncer_binary(), *(["-u", user] if user else []), str(work / "pgbouncer.ini")],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
        url = f"postgresql://{role}:{password}@127.0.0.1:{port}/memory"
        _until_connects(url, proc)
        settings = load_settings({"MEMORY_DATA_DIR": data, "MEMORY_DATABASE_URL": url}, dotenv=False)
        store = MemoryStore.open(settings)  # the schema, made by the runbook's role through PgBouncer
        try:
            store.add_raw("ana", "My sister Anna lives in Lisbon")
            found = Retriever(store, settings).retrieve("ana", "Where does my sister live?")
            assert [m.text for m in found][:1] == ["My sister Anna lives in Lisbon"]
        finally:
            store.close()
        with psycopg.connect(url, autocommit=True, prepare_threshold=None) as conn:
            assert conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone() == (False,)
            # What the router reads on a replica: the WAL receiver's state needs pg_read_all_stats.
            assert conn.execute("SELECT pg_has_role('pg_read_all_stats', 'MEMBER')").fetchone() == (True,)
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(10)
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(data, ignore_errors=True)
        with psycopg.connect(embedded_server_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(role)))
            for name in (role, f"{role}_replicator"):
                conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(name)))


def _until_connects(url: str, proc: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while True:
        try:
            psycopg.connect(url, prepare_threshold=None, connect_timeout=2).close()
            return
        except psycopg.OperationalError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def _manifests() -> dict[str, dict]:
    """Every Kubernetes object of the kustomization, by kind/name."""
    objects = {}
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    for resource in kustomization["resources"]:
        for doc in yaml.safe_load_all((DEPLOY / resource).read_text()):
            if doc:
                objects[f"{doc['kind']}/{doc['metadata']['name']}"] = doc
    return objects


def _containers(objects: dict[str, dict]) -> dict[str, dict]:
    return {name: c for name, obj in objects.items() if "template" in obj.get("spec", {})
            for c in obj["spec"]["template"]["spec"]["containers"]}  # fmt: skip


def test_compose_and_kubernetes_agree_with_each_other_the_ini_the_settings_and_the_docs() -> None:
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    objects = _manifests()
    containers = _containers(objects)
    ini = _ini()
    docs = DOCS.read_text()
    port = int(ini["pgbouncer"]["listen_port"])
    services = compose["services"]
    # One image per role, the same in both, named in the docs.
    images = {
        "postgres": {services["postgres-primary"]["image"], services["postgres-replica"]["image"],
                     containers["StatefulSet/postgres-primary"]["image"],
                     containers["StatefulSet/postgres-replica"]["image"]},
        "pgbouncer": {services["pgbouncer"]["image"], containers["Deployment/pgbouncer"]["image"]},
    }  # fmt: skip
    for role, found in images.items():
        assert len(found) == 1, (role, found)
        assert next(iter(found)) in docs, f"docs/scaling.md does not name the {role} image {found}"
    # The pooler's port, everywhere.
    assert services["pgbouncer"]["ports"] == [f"{port}:{port}"]
    assert objects["Service/pgbouncer"]["spec"]["ports"][0]["port"] == port
    assert containers["Deployment/pgbouncer"]["ports"][0]["containerPort"] == port
    # The workers' database URLs: PgBouncer's port, databases the ini defines, whose hosts
    # are the primary's and the replica's services in both.
    worker_env = [services["worker"]["environment"], objects["ConfigMap/memory-worker-env"]["data"]]
    for env in worker_env:
        assert set(env) - {"PGPASSWORD"} <= VARIABLES, set(env) - VARIABLES
        targets = {}
        for key in ("MEMORY_DATABASE_URL", "MEMORY_DATABASE_READ_URLS"):
            url = urlsplit(env[key])
            assert (url.hostname, url.port, url.password) == ("pgbouncer", port, None), env[key]
            entry = ini["databases"][url.path.lstrip("/")]
            targets[key] = re.search(r"host=(\S+)", entry).group(1)
        assert targets == {"MEMORY_DATABASE_URL": "postgres-primary", "MEMORY_DATABASE_READ_URLS": "postgres-replica"}
    for host in targets.values():
        assert host in services and f"Service/{host}" in objects
        assert objects[f"Service/{host}"]["spec"]["ports"][0]["port"] == 5432
    # LiveKit's health check port, in both and in the Dockerfile.
    assert containers["StatefulSet/memory-worker"]["readinessProbe"]["httpGet"]["port"] == 8081
    assert "8081" in " ".join(services["worker"]["healthcheck"]["test"])
    assert "EXPOSE 8081" in (DEPLOY.parent / "Dockerfile").read_text()
    # Who makes the schema: the operator's command, before the workers, in both.
    assert services["memory-schema"]["command"] == containers["Job/memory-schema"]["command"]
    assert services["worker"]["depends_on"]["memory-schema"]["condition"] == "service_completed_successfully"
    # The docs name every file of the runbook and every variable the workers are given.
    for path in ("deploy/pgbouncer.ini", "deploy/compose.yaml", "deploy/roles.sql", "deploy/kustomization.yaml"):
        assert path in docs, path
    for name in set(worker_env[0]) | set(worker_env[1]):
        assert name in docs, name
