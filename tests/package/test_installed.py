"""The package as an integrator gets it: `uv build` makes the wheel, a fresh virtualenv
outside the repository installs it, and docs/integrate.md's example agent runs from another
directory against a scripted OpenAI-compatible server (bench/local_llm_server.py: it answers
with the notes memory put in the request). Two sessions of one identity, each in a cold
process that warms up as the page says: the second recalls the first within the default
budget (MEMORY_BUDGET_MS, 150 ms).

Cost: one wheel build (about 3 s), one virtualenv from uv's cache (offline, hard links:
about 5 s), and two runs of the example (LiveKit, Mem0 and the embedder loaded in each)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from bench.local_llm_server import start as start_llm

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "docs" / "examples" / "my_agent.py"

# A job of the example, as LiveKit runs one, without a LiveKit server: a cold process runs the
# example's prewarm, then its entrypoint with a stand-in job context (no room: the user types,
# as in LiveKit's text mode), then one line from the user; it prints what happened as JSON.
DRIVER = r"""
import asyncio, importlib.util, json, sys, time, types
started = time.perf_counter()
spec = importlib.util.spec_from_file_location("my_agent", sys.argv[1])
my_agent = importlib.util.module_from_spec(spec)
spec.loader.exec_module(my_agent)
import memory

proc = types.SimpleNamespace(userdata={})
my_agent.prewarm(proc)  # the documented warm-up, in this cold process
made = []
attach = memory.attach


def attached(session, **kw):
    made.append((session, attach(session, **kw)))
    start = session.start

    async def start_without_room(*args, room=None, **kwargs):  # no room here: the user types
        return await start(*args, **kwargs)

    session.start = start_without_room
    return made[-1][1]


memory.attach = attached


class Participant:
    identity = sys.argv[2]


class JobContext:
    room = None
    def __init__(self):
        self.proc = proc
    async def connect(self):
        pass
    async def wait_for_participant(self):
        return Participant()


async def main():
    await my_agent.entrypoint(JobContext())
    session, mem = made[0]
    run = await session.run(user_input=sys.argv[3])
    turn = mem.turns[-1]
    reply = [e.item.text_content for e in run.events if getattr(e, "type", "") == "message"]
    drained = await mem.drain(120.0)
    await session.aclose()
    await mem.aclose()
    stored = [w.event for r in mem.write_reports for w in r.writes]
    print(json.dumps({"reply": reply, "injected": turn.injected, "stored": stored,
                      "missed_budget": bool(turn.recall and turn.recall.missed_budget),
                      "budget_ms": mem.recaller.budget_s * 1000, "module": memory.__file__,
                      "drained": drained, "seconds": round(time.perf_counter() - started, 1)}))
    memory.close()


asyncio.run(main())
"""


def _uv() -> str:
    uv = os.environ.get("UV") or shutil.which("uv")
    assert uv, "uv is needed to build and install the wheel (CI installs it: .ci/run)"
    return uv


def _run(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kwargs)  # type: ignore[call-overload]
    assert proc.returncode == 0, f"{cmd}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    return proc


def _install(tmp_path: Path) -> Path:
    """The wheel built from this checkout, in a new virtualenv outside it; its python."""
    uv, dist, venv = _uv(), tmp_path / "dist", tmp_path / "venv"
    _run([uv, "build", "--wheel", "--out-dir", str(dist), str(ROOT)], cwd=tmp_path)
    (wheel,) = dist.glob("livekit_agent_memory-*.whl")
    _run([uv, "venv", "--python", sys.executable, str(venv)], cwd=tmp_path)
    python = venv / "bin" / "python"
    install = [uv, "pip", "install", "--python", str(python), str(wheel)]
    # uv's cache holds every dependency (the repository's own environment came from it):
    # offline first; a cache that lacks one (a fresh machine) goes to the index.
    if subprocess.run([*install, "--offline"], capture_output=True, cwd=tmp_path, timeout=600).returncode != 0:
        _run(install, cwd=tmp_path)
    return python


async def _session(python: Path, cwd: Path, env: dict[str, str], user: str, line: str) -> dict[str, object]:
    proc = await asyncio.create_subprocess_exec(
        str(python), "-c", DRIVER, str(EXAMPLE), user, line,
        cwd=cwd, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 300)
    assert proc.returncode == 0, err.decode()[-3000:]
    return {**json.loads(out.decode().strip().splitlines()[-1]), "stderr": err.decode()[-3000:]}


@pytest.mark.installed_package
async def test_the_installed_wheel_runs_the_integration_example_and_the_next_session_remembers(tmp_path: Path) -> None:
    python = await asyncio.to_thread(_install, tmp_path)
    # A data directory of the installed package's own (its embedded Postgres, started by the
    # first session, stopped by the last): outside pytest's tree, which is private to root.
    data_dir = Path(tempfile.mkdtemp(prefix="memory-tests-installed-"))
    data_dir.chmod(0o755)
    elsewhere = tmp_path / "somewhere-else"
    elsewhere.mkdir()
    runner, url = await start_llm()
    try:
        env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "OPENAI_BASE_URL": url, "OPENAI_API_KEY": "sk-local",
               "MEMORY_DATA_DIR": str(data_dir)}  # fmt: skip  # no PYTHONPATH: the package comes from the venv
        user = f"integrator-{uuid.uuid4().hex[:8]}"
        first = await _session(python, elsewhere, env, user, "My sister is called Anna.")
        assert Path(str(first["module"])).is_relative_to(tmp_path / "venv"), first  # the installed package
        assert first["stored"] == ["ADD"], first

        second = await _session(python, elsewhere, env, user, "What is my sister's name?")
        assert second["budget_ms"] == pytest.approx(150.0)  # the default budget, as documented
        assert not second["missed_budget"] and second["injected"] == 1, second
        assert any("From memory:" in r and "Anna" in r for r in second["reply"]), second
    finally:
        await runner.cleanup()
        shutil.rmtree(data_dir, ignore_errors=True)
