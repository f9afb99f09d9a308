"""Disk faults for tests and `bench.privacy.hostile`: a real tiny tmpfs that fills up or turns
read-only (needs root and mount permission), or, where mounting is not permitted, the
same refusal SQLite gives ("database or disk is full") raised at the journal's boundary.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sqlite3
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

from memory.journal.queue import DurableWriteQueue


def can_mount() -> bool:
    """Can this process mount a tmpfs (root, and a container that allows it)?"""
    probe = Path("/tmp") / f"mount-probe-{uuid.uuid4().hex[:8]}"
    probe.mkdir()
    try:
        ok = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(probe)],
                            capture_output=True).returncode == 0  # fmt: skip
        if ok:
            subprocess.run(["umount", str(probe)], capture_output=True)
        return ok
    except OSError:
        return False
    finally:
        probe.rmdir()


@contextlib.contextmanager
def tiny_tmpfs(path: Path, size_kb: int = 256) -> Iterator[Path]:
    """A tmpfs of `size_kb` mounted at `path` for the block's duration."""
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_kb}k", "tmpfs", str(path)], check=True)
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(directory: Path) -> Path:
    """Fill the file system of `directory` up to the last byte (real ENOSPC after)."""
    filler = directory / "filler"
    with open(filler, "wb", buffering=0) as f:
        for size in (65536, 4096, 512, 1):  # the last partial blocks too
            try:
                while True:
                    f.write(b"\0" * size)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
    return filler


def remount(path: Path, *, read_only: bool) -> None:
    subprocess.run(["mount", "-o", f"remount,{'ro' if read_only else 'rw'}", str(path)], check=True)


class RefusingJournalQueue(DurableWriteQueue):
    """The real journal, refusing every write while `refuse` is set with SQLite's own
    error for a full disk: for machines where no tmpfs can be mounted."""

    refuse = False

    def _execute(self, sql: str, params: tuple = ()) -> list[tuple]:
        if self.refuse and sql.lstrip().upper().startswith(("INSERT", "DELETE", "UPDATE")):
            self._journal_ok = False
            raise sqlite3.OperationalError("database or disk is full")
        return super()._execute(sql, params)


def free_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize
