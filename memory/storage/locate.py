"""Which store a command works on, in words, and whether there is one: checked before
the store is opened, since opening makes an empty one."""

from __future__ import annotations

import psycopg
from psycopg.conninfo import conninfo_to_dict

from memory.settings import MemorySettings
from memory.storage.postgres import connect


def where(settings: MemorySettings) -> str:
    """The store the command works on, in words (a database URL may hold a password)."""
    if settings.database_url:
        info = conninfo_to_dict(settings.database_url)
        place = f"database {info.get('dbname', '?')} on {info.get('host', 'localhost')}"
    else:
        place = f"MEMORY_DATA_DIR={str(settings.data_dir)!r}"
    return f"{place}, MEMORY_COLLECTION={settings.collection!r}"


def missing_store(settings: MemorySettings) -> str | None:
    """Why there is no memory store to work on, if there is none. Checked before opening:
    opening makes an empty one (a new embedded server in the directory the command
    happens to run in, or a new table), and a command on that finds nothing."""
    if not settings.database_url:
        if not (settings.pgdata / "PG_VERSION").exists():
            return f"no memory store in MEMORY_DATA_DIR={str(settings.data_dir)!r} (is it the worker's?)"
        return None
    try:
        with connect(settings.database_url) as conn:
            query = "SELECT to_regclass(quote_ident(%s))"  # the name as created, capitals kept
            (table,) = conn.execute(query, [settings.collection]).fetchone()
    except psycopg.Error:
        return None  # storage_problems names the variable
    return None if table else f"no table MEMORY_COLLECTION={settings.collection!r} in that database"
