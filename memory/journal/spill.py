"""Where turns go when the write journal refuses them (a full or read-only disk).

The journal (`queue.py`) is what lets a turn survive the worker being killed.
When it cannot take a turn, the turn is written straight to the store, but until
the store has it, it would live in the process's memory only: a kill -9 then lost
acknowledged turns. So each refused turn is first appended, as one JSON line in one
`write` call, to a spill file on another file system, by default `/dev/shm` (a RAM
disk every Linux has): it survives the process being killed, as the journal's WAL
does (`synchronous=NORMAL`), and not a power cut, as the journal's last commits may
not. A full data disk leaves it writable.

One file per queue, `<dir>/<journal-tag>/<host>-<pid>-<token>.jsonl`; deleted when
every turn in it is in the journal or the store. The next queue that starts (or a
live one, every lease period) takes over the files of dead processes, and those a
queue released at close, by renaming them first (atomic: one taker). Replays are
NOOPs in the store (write ids), so a turn in both the file and the store is written
once. "Forget me" removes a user's lines from every file of the journal's directory,
live workers' included (`purge_user`): each append, take-over and purge holds the
file's lock (`flock`), so a purge never meets half a line nor loses another's.
Hand-written: an append-only file of JSON lines needs no library.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from memory.journal.codec import decode_turn, encode_turn

if TYPE_CHECKING:
    from memory.types import Turn

logger = logging.getLogger(__name__)

_RELEASED = ".released"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def spill_dir_of(root: Path, journal: Path) -> Path:
    """The directory of the spill files of the queues of one journal."""
    return Path(root) / hashlib.sha256(str(Path(journal).resolve()).encode()).hexdigest()[:16]


class Spill:
    """One queue's spill file, and the take-over of stopped queues' files."""

    def __init__(self, root: Path, journal: Path) -> None:
        self.dir = spill_dir_of(root, journal)
        self.host = socket.gethostname()
        self.path = self.dir / f"{self.host}-{os.getpid()}-{uuid.uuid4().hex[:12]}.jsonl"
        self._fd: int | None = None

    def add(self, turn: Turn) -> bool:
        """Append the turn (one `write`); False if the spill file refuses it too."""

        line = (encode_turn(turn) + "\n").encode("utf-8", "surrogateescape")
        try:
            if self._fd is None:
                self.dir.mkdir(parents=True, exist_ok=True)
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            locked = _lock(self._fd, fcntl.LOCK_EX)  # a forget may be rewriting the file
            try:
                if os.write(self._fd, line) != len(line):
                    raise OSError("short write")
            finally:
                if locked:
                    _lock(self._fd, fcntl.LOCK_UN)
        except OSError as exc:
            logger.error("spill file %s refuses a turn too: %s", self.path, exc)
            return False
        return True

    def clear(self) -> None:
        """Everything spilled is safe elsewhere: the file goes."""
        if self._fd is None:
            return
        os.close(self._fd)
        self._fd = None
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass

    def release(self) -> None:
        """The queue closes with turns still only here: any queue may take them now."""
        if self._fd is None:
            return
        os.close(self._fd)
        self._fd = None
        try:
            self.path.rename(self.path.with_name(self.path.name + _RELEASED))
        except FileNotFoundError:
            pass

    def orphans(self) -> Iterator[list[Turn]]:
        """The turns of each file whose queue is gone, the file taken (renamed) first and
        deleted once read: the caller puts them in the journal or its own spill file."""

        if not self.dir.is_dir():
            return
        for path in sorted(self.dir.iterdir()):
            if path == self.path or not self._orphaned(path):
                continue
            taken = path.with_name(f"{path.name}.taken-{os.getpid()}-{uuid.uuid4().hex[:6]}")
            try:
                path.rename(taken)
            except FileNotFoundError:  # another queue took it
                continue
            turns = []
            try:
                data = _read_locked(taken)
            except FileNotFoundError:
                continue
            for number, line in enumerate(data.split(b"\n"), 1):
                if not line.strip():
                    continue
                try:
                    turns.append(decode_turn(line.decode("utf-8", "surrogateescape")))
                except Exception as exc:  # a line cut short by the kill: the rest still counts
                    logger.error("spill file %s line %d unreadable: %r", path.name, number, exc)
            yield turns
            taken.unlink(missing_ok=True)

    def _orphaned(self, path: Path) -> bool:
        name = path.name
        if name.endswith(_RELEASED):
            return True
        if ".jsonl.taken-" in name:  # a taker that died before it was done with it
            pid = name.rpartition(".taken-")[2].partition("-")[0]
            return pid.isdigit() and not _pid_alive(int(pid))
        if not name.endswith(".jsonl"):
            return False
        host, _, rest = name[: -len(".jsonl")].rpartition("-")[0].rpartition("-")
        pid = rest
        if host != self.host or not pid.isdigit():
            return False  # another machine's (a shared directory): its own workers take it
        return not _pid_alive(int(pid))


def _lock(fd: int, how: int) -> bool:
    """`flock`, or nothing on a file system without it (the turn matters more than the lock)."""
    try:
        fcntl.flock(fd, how)
    except OSError:
        return False
    return True


def _read_locked(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY)
    try:
        _lock(fd, fcntl.LOCK_SH)
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _is_users(line: bytes, user_id: str) -> bool:
    """Is this spilled line a turn of `user_id`? A line cut short by a kill cannot be
    decoded: it counts as the user's when it names the user id."""
    try:
        return decode_turn(line.decode("utf-8", "surrogateescape")).user_id == user_id
    except Exception:  # noqa: BLE001 - a damaged line: judged by its text
        named = (json.dumps({"user_id": user_id}, ensure_ascii=a)[1:-1].encode("utf-8", "surrogateescape")
                 for a in (False, True))  # fmt: skip
        return any(n in line for n in named)


def purge_user(root: Path, journal: Path, user_id: str) -> int:
    """ "Forget me": remove the user's lines from every spill file of the journal's
    directory (dead workers' and live ones', released and taken files); how many.

    Each file is rewritten in place under its lock: a live worker's next append lands
    after the kept lines, and the file never needs more room than it had. The directory
    is per machine by default (`/dev/shm`): another machine's files are reached by the
    command run there, or written (and refused: the forget is recorded) and deleted by
    that machine's next queue."""
    directory = spill_dir_of(root, journal)
    if not directory.is_dir():
        return 0
    removed = 0
    for path in sorted(directory.iterdir()):
        try:
            fd = os.open(path, os.O_RDWR)
        except (FileNotFoundError, IsADirectoryError):  # taken or cleared meanwhile
            continue
        try:
            _lock(fd, fcntl.LOCK_EX)
            chunks = []
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
            lines = b"".join(chunks).split(b"\n")
            kept = [ln for ln in lines if not (ln.strip() and _is_users(ln, user_id))]
            gone = len(lines) - len(kept)
            if gone:
                data = b"\n".join(kept)
                os.pwrite(fd, data, 0)
                os.ftruncate(fd, len(data))
                removed += gone
        finally:
            os.close(fd)
    return removed


def read_user(root: Path, journal: Path, user_id: str) -> list[Turn]:
    """The user's spilled turns on this machine (for a data-access request)."""
    directory = spill_dir_of(root, journal)
    if not directory.is_dir():
        return []
    out = []
    for path in sorted(directory.iterdir()):
        try:
            data = _read_locked(path)
        except (FileNotFoundError, IsADirectoryError):
            continue
        for line in data.split(b"\n"):
            if not line.strip():
                continue
            try:
                turn = decode_turn(line.decode("utf-8", "surrogateescape"))
            except Exception:  # noqa: BLE001 - a line cut short by a kill
                continue
            if turn.user_id == user_id:
                out.append(turn)
    return out
