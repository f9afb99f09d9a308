"""Where turns go when the write journal refuses them (a full or read-only disk).

The journal (`write_queue.py`) is what lets a turn survive the worker being killed.
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
once. Hand-written: an append-only file of JSON lines needs no library.
"""

from __future__ import annotations

import hashlib
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


class Spill:
    """One queue's spill file, and the take-over of stopped queues' files."""

    def __init__(self, root: Path, journal: Path) -> None:
        tag = hashlib.sha256(str(Path(journal).resolve()).encode()).hexdigest()[:16]
        self.dir = Path(root) / tag
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
            if os.write(self._fd, line) != len(line):
                raise OSError("short write")
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
            for number, line in enumerate(taken.read_bytes().split(b"\n"), 1):
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
