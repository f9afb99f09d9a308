"""The package as an integrator gets it: `uv build` makes the wheel, a fresh virtualenv
outside the repository installs it, and docs/integrate.md's example agent is talked to as the
page says (`memory-chat USER --agent my_agent.py`), from another directory, against a
scripted OpenAI-compatible server (bench/common/local_llm_server.py: it answers with the notes
memory put in the request) and without an OpenAI key. Two sessions of one identity, each a
cold process: the second recalls the first. Only documented commands and output are used.

Cost: one wheel build (about 3 s), one virtualenv from uv's cache (offline, hard links:
about 5 s), and two runs of the example (LiveKit, Mem0 and the embedder loaded in each)."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from bench.common.local_llm_server import start as start_llm

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "docs" / "examples" / "my_agent.py"


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


async def _chat(python: Path, cwd: Path, env: dict[str, str], user: str, line: str) -> tuple[str, str]:
    """The documented typed session with one's own agent: `memory-chat USER --agent my_agent.py`
    of the installed package, one line typed; its output and errors."""
    proc = await asyncio.create_subprocess_exec(
        str(python.parent / "memory-chat"), user, "--agent", str(EXAMPLE),
        cwd=cwd, env=env, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(f"{line}\n/quit\n".encode()), 300)
    assert proc.returncode == 0, err.decode()[-3000:]
    return out.decode(), err.decode()


@pytest.mark.installed_package
async def test_the_installed_wheel_runs_the_integration_example_and_the_next_session_remembers(tmp_path: Path) -> None:
    """docs/integrate.md's steps, with only what it documents: the wheel, the example agent
    typed with `memory-chat --agent`, a local model server and no OpenAI key."""
    # The virtualenv outside pytest's tree too: the embedded server runs as its own system
    # user and loads pgvector from the installed package (pytest's tree is private to root).
    home = Path(tempfile.mkdtemp(prefix="memory-tests-venv-"))
    home.chmod(0o755)
    try:
        await _two_sessions(await asyncio.to_thread(_install, home), tmp_path)
    finally:
        shutil.rmtree(home, ignore_errors=True)


async def _two_sessions(python: Path, tmp_path: Path) -> None:
    # A data directory of the installed package's own (its embedded Postgres, started by the
    # first session, stopped by the last): outside pytest's tree, which is private to root.
    data_dir = Path(tempfile.mkdtemp(prefix="memory-tests-installed-"))
    data_dir.chmod(0o755)
    elsewhere = tmp_path / "somewhere-else"
    elsewhere.mkdir()
    runner, url = await start_llm()
    try:
        env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "OPENAI_BASE_URL": url,
               "MEMORY_DATA_DIR": str(data_dir)}  # fmt: skip  # no key, no PYTHONPATH: the package from the venv
        user = f"integrator-{uuid.uuid4().hex[:8]}"
        out, err = await _chat(python, elsewhere, env, user, "My sister is called Anna.")
        assert "· chatting with your Assistant as" in out and "· memory: 1 added" in out, out + err
        assert "Traceback" not in err, err[-3000:]

        out, err = await _chat(python, elsewhere, env, user, "What is my sister's name?")
        replies = [line for line in out.splitlines() if line.startswith("agent: ")]
        assert any("From memory:" in r and "Anna" in r for r in replies), out
        assert "· memory: recalled 1" in out and "Traceback" not in err, out + err

        # MCP is an extra: the plain install's command says so in one line.
        mcp = subprocess.run([str(python.parent / "memory-mcp")], capture_output=True, text=True, env=env,
                             cwd=elsewhere, timeout=120)  # fmt: skip
        assert mcp.returncode == 2 and len(mcp.stderr.splitlines()) == 1, mcp.stderr
        assert "pip install 'livekit-agent-memory[mcp]'" in mcp.stderr
    finally:
        await runner.cleanup()
        shutil.rmtree(data_dir, ignore_errors=True)
