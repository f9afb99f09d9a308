"""agent.py's own entrypoint, run in LiveKit's fake job context on the pipeline it
ships: real speech into the real Silero VAD, STT fakes timed like OpenAI's in each
mode, VAD turn detection and preemptive generation as agent.py sets them, the real
memory on the real store. Only the cloud models are fakes (harness/)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from harness import PipelineHarness, load_utterances
from memory.retrieval.retriever import Retriever
from memory.storage.archive import archive_for
from memory.storage.store import MemoryStore

ROOT = Path(__file__).resolve().parents[2]
UTTERANCES = load_utterances()


@pytest.fixture
def userdata(store: MemoryStore) -> dict[str, Any]:
    """What prewarm leaves in a job process, over the suite's store. A long recall budget:
    these tests check what reaches the store and the LLM, not how fast, so a busy machine
    cannot fail them (`python -m bench.latency.run` measures the real budget on this pipeline)."""
    settings = dataclasses.replace(store.settings, recall_budget_ms=10_000)
    return {"settings": settings, "store": store, "retriever": Retriever(store, settings)}


def _plugins_of_agent() -> None:
    """agent.make_plugins sets the realtime plugin's interim pace, as a worker's prewarm does."""
    from livekit.plugins import silero

    import agent

    agent.make_plugins(None, silero.VAD.load(), env={"OPENAI_API_KEY": "sk-test"})


async def _session(harness: PipelineHarness, userdata: dict[str, Any], user: str, key: str) -> Any:
    """One job: the greeting, then the user says one utterance; returns (turn, memory session)."""
    from memory.livekit.session import MemorySession

    seen: list[MemorySession] = []
    real_attach = MemorySession.attach

    def spy(self: MemorySession, session: Any) -> None:
        seen.append(self)
        real_attach(self, session)

    MemorySession.attach = spy
    try:
        async with harness.entrypoint(userdata, user_id=user, job_id=f"job-{uuid.uuid4().hex[:8]}"):
            await harness.greeted()
            turn = await harness.say(UTTERANCES[key])
            memory = seen[0] if seen else None
            log = memory.turns[-1] if memory and memory.turns else None
    finally:
        MemorySession.attach = real_attach
    return turn, memory, log


@pytest.mark.parametrize("stt_kind", ["realtime", "batch"])
async def test_the_shipped_entrypoint_remembers_a_spoken_fact_and_the_next_session_recalls_it(
    stt_kind: str, userdata: dict[str, Any]
) -> None:
    """Removing `memory.attach(session)` from agent.py, or the injection from llm_node,
    fails this: nothing is stored, or nothing reaches the LLM. Removing the archive's
    attachment (`ArchiveSession(...).attach`) fails it too: the conversation is not kept."""
    _plugins_of_agent()
    user = f"pipe-{uuid.uuid4().hex[:8]}"
    first = PipelineHarness(stt_kind)
    turn, _, _ = await _session(first, userdata, user, "t00")
    assert turn.committed.startswith("My sister is called Anna")
    stored = [r.text for r in userdata["store"].search(user, "sister Anna")]
    assert any("Anna" in text for text in stored), f"the spoken turn was never written to memory: {stored}"
    archived = [(m["message_type"], m["content"]) for m in archive_for(userdata["store"]).messages(user)]
    assert any(kind == "user" and "Anna" in text for kind, text in archived), f"not archived: {archived}"
    assert any(kind == "assistant" for kind, _ in archived), f"the agent's side not archived: {archived}"

    second = PipelineHarness(stt_kind, vad=first.vad)
    turn, _, log = await _session(second, userdata, user, "t01")
    # one request for the turn, preemptive generation on, and it carried the memory
    assert len(turn.requests) == 1, [r.messages[-1] for r in turn.requests]
    block = turn.requests[-1].memory_block("recalled_memories")
    assert "Anna" in block, turn.requests[-1].messages
    assert log is not None and log.injected >= 1
    assert turn.first_audio_s is not None  # the reply played (its latency: bench.latency.run)


async def test_with_realtime_stt_the_look_up_for_the_words_said_starts_before_the_final_transcript(
    userdata: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The promise of the realtime mode: memory's look-up for what the user said is under
    way before the final transcript arrives, so the reply does not wait for it. Removing
    the prefetch from `user_input_transcribed` fails this."""
    from memory.retrieval.prefetch import transcript_key
    from memory.service import MemoryService

    _plugins_of_agent()
    started: list[tuple[float, str]] = []
    real_recall = MemoryService.recall

    async def recall(self: MemoryService, user_id: str, text: str, *args: Any, **kwargs: Any) -> Any:
        started.append((time.perf_counter(), transcript_key(text)))
        return await real_recall(self, user_id, text, *args, **kwargs)

    monkeypatch.setattr(MemoryService, "recall", recall)
    harness = PipelineHarness("realtime")
    user = f"pipe-{uuid.uuid4().hex[:8]}"
    turn, _, log = await _session(harness, userdata, user, "u16")
    finals = [at for kind, at, text in harness.stt.events if kind.value == "final_transcript" and text]
    words = transcript_key(turn.committed)
    assert finals and log is not None and log.recall is not None
    early = [at for at, key in started if key == words and at < finals[-1]]
    assert early, f"no look-up for {words!r} before the final transcript: {started}"
    assert log.recall.prefetched and not log.recall.missed_budget


def test_agent_streams_every_realtime_delta_as_an_interim() -> None:
    """The plugin sends at most one interim per 0.5 s and drops the deltas between:
    agent.py sets that knob, and it must still exist in the installed plugin."""
    from livekit.plugins.openai import stt as openai_stt

    import agent

    assert hasattr(openai_stt, "_delta_transcript_interval")
    _plugins_of_agent()
    assert openai_stt._delta_transcript_interval == agent.INTERIM_INTERVAL_S == 0.0


@pytest.mark.parametrize(("mode", "streaming"), [("realtime", True), ("batch", False)])
def test_the_stt_mode_variable_picks_realtime_or_batch_transcription(mode: str, streaming: bool) -> None:
    from livekit.plugins import silero

    import agent

    vad = silero.VAD.load()
    env = {"OPENAI_API_KEY": "sk-test", "OPENAI_STT_MODE": mode}
    plugins = agent.make_plugins(None, vad, env=env)
    assert plugins.stt.capabilities.streaming is streaming
    assert plugins.stt.capabilities.interim_results is streaming
    assert plugins.stt.model == ("gpt-live-transcribe" if streaming else "gpt-4o-mini-transcribe")
    # one HTTP client (one SSL context) for all three
    assert plugins.llm._client is plugins.tts._client is plugins.stt._client


def test_turn_handling_is_explicit_and_needs_no_livekit_cloud() -> None:
    import agent

    opts = agent.turn_handling()
    assert opts["turn_detection"] == "vad"
    assert opts["interruption"]["mode"] == "vad"
    assert opts["preemptive_generation"]["enabled"] is True


def test_console_with_the_example_url_and_no_livekit_key_talks_to_no_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """`cp .env.example .env` + an OpenAI key: LiveKit's worker built its API client from
    the example LIVEKIT_URL and crashed ("either token, or api_key and api_secret")."""
    from memory.livekit import startup

    monkeypatch.setenv("LIVEKIT_URL", "wss://your-project.livekit.cloud")
    monkeypatch.delenv("LIVEKIT_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("MEMORY_LLM_CHECK", "off")  # no LLM server here
    monkeypatch.setattr(startup, "load_env_file", lambda: None)  # no developer's .env
    monkeypatch.setattr(startup, "audio_problems", lambda: [])  # no sound card here
    monkeypatch.setattr(startup, "memory_problems", lambda settings: [])
    startup.check(["agent.py", "console"])
    # Dropped before agent.py makes its server, which reads the variable when it is made.
    assert "LIVEKIT_URL" not in os.environ


def test_python_m_livekit_agents_start_runs_the_same_start_up_checks(tmp_path: Path) -> None:
    """LiveKit's deprecation warnings send users to `python -m livekit.agents start
    agent.py`, which never runs agent.py's main(): it started with no key and exited 0."""
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PYTHONPATH": str(ROOT), "MEM0_SETTING": "sometimes"}
    proc = subprocess.run(
        [sys.executable, "-m", "livekit.agents", "start", str(ROOT / "agent.py")],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert proc.returncode != 0
    assert "agent.py: cannot start" in proc.stderr and "MEM0_SETTING='sometimes'" in proc.stderr, proc.stderr[-2000:]
