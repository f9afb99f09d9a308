"""Room kept on the journal's disk for "forget me".

On a full disk SQLite cannot delete either: a DELETE writes its pages to the write-ahead
log first. A forget that cannot remove a user's waiting turns would leave them readable
on the disk, so each journal keeps a reserve file beside it (`<journal>.reserve`, 1 MiB,
made when a queue opens the journal and there is room), and a forget that meets a full
disk releases it and tries again. Nothing else uses it: a worker's own turns go to the
spill file when the disk is full (`spill.py`). Hand-written: one file and `fallocate`.
"""

from __future__ import annotations

import errno
import logging
import os
import sqlite3
from pathlib import Path

logger = logging.getLogger(__name__)

RESERVE_BYTES = 1024 * 1024
_SQLITE_FULL = 13


def reserve_path(journal: Path) -> Path:
    return Path(journal).with_name(Path(journal).name + ".reserve")


def ensure_reserve(journal: Path, size: int = RESERVE_BYTES) -> bool:
    """Make the reserve if it is missing and the disk has room (best effort: a partly made
    one is removed). True if it is there."""
    path = reserve_path(journal)
    if path.exists():
        return True
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return True
    except OSError:
        return False
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError:
        os.close(fd)
        path.unlink(missing_ok=True)
        return False
    os.close(fd)
    return True


def release_reserve(journal: Path) -> bool:
    """Free the reserve's room (a forget met a full disk); True if there was one."""
    try:
        reserve_path(journal).unlink()
    except FileNotFoundError:
        return False
    logger.warning("the journal's disk is full: released the room kept for forgets (%s)", reserve_path(journal))
    return True


def no_room(journal: Path, below: int = 64 * 1024) -> bool:
    """Is the journal's disk (nearly) full? SQLite names a full disk "disk I/O error" when
    it is its shared-memory file that cannot grow."""
    try:
        st = os.statvfs(Path(journal).parent)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < below


def is_disk_full(exc: BaseException | None) -> bool:
    """SQLite's "database or disk is full", or ENOSPC/EDQUOT from the OS."""
    while exc is not None:
        if isinstance(exc, sqlite3.Error) and (getattr(exc, "sqlite_errorcode", 0) & 0xFF) == _SQLITE_FULL:
            return True
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if "disk is full" in str(exc) or "No space left" in str(exc):
            return True
        exc = exc.__cause__ or exc.__context__
    return False
