"""`memory-chat USER` (`python -m memory.chat USER`): a typed conversation with the worker's
own agent.

The same pieces as a call (agent.py), through the package's API as a worker uses it: the
store and memory's models (as `memory.warm_up` loads them; here the models and a first
look-up load behind the prompt, and the first message waits for them), a LiveKit `AgentSession`
with the worker's LLM (`OPENAI_LLM_MODEL`; no speech models), `memory.attach` (NORMAL or
GATED as configured, the archive) and the worker's first agent. A typed turn goes where a
spoken one goes: LiveKit adds it to the conversation, memory journals and stores it from
there (`conversation_item_added`), and every reply's request gets the user's memories in
`llm_node` (`on_user_turn_completed`, which typed input skips, is used for neither). So
what a chat remembers, a call recalls, and the other way round.

Needs only an OpenAI key, or `OPENAI_BASE_URL` pointing at any OpenAI-compatible server
(Ollama, vLLM, llama.cpp's server): no LiveKit server, no sound card. The configuration
and the store are checked before LiveKit and the models load.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

from memory.errors import InvalidIdentity
from memory.livekit import startup
from memory.settings import cloud_models, env_file_note, load_env_file, load_settings, process_env, startup_problems
from memory.types import describe_error, memory_user_id

PROG = "memory-chat"
QUIT = ("/quit", "/exit", "quit", "exit", "/bye")
# How long leaving waits for memory's writes (the journal keeps what is not written yet,
# and the next start writes it): the next chat should find what this one said.
SAVE_S = 30.0
# How long a typed reply waits for memory at least. A spoken reply waits MEMORY_BUDGET_MS
# (150 ms) because the caller hears every millisecond, and its look-up has started while
# the user spoke; a typed message brings no such head start, and nobody hears the wait: a
# first look-up on a busy machine missed 150 ms and the chat answered as if it knew nothing.
CHAT_BUDGET_S = 1.0


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog=PROG,
        description="Chat with the agent in this terminal, as USER: it remembers you across chats and calls.",
        epilog="Type a message and Enter; /quit (or Ctrl-D) leaves. The worker's .env is read (MEM0_SETTING, "
        "OPENAI_*, MEMORY_*); LiveKit's variables are not needed.",
    )
    ap.add_argument("user", metavar="USER", help="who you are: the participant identity memory is kept under")
    ap.add_argument("--verbose", action="store_true", help="memory's own log lines, and tracebacks")
    return ap


def chat_problems(env: dict[str, str]) -> list[str]:
    """What stops the chat, as lines naming the variable: the worker's own checks less
    LiveKit's, and an OpenAI key or an OpenAI-compatible server."""
    problems = startup_problems(None, env)
    if not env.get("OPENAI_API_KEY", "").strip() and not env.get("OPENAI_BASE_URL", "").strip():
        problems.insert(
            0,
            "OPENAI_API_KEY is not set: the chat needs an OpenAI key, or OPENAI_BASE_URL pointing at an "
            "OpenAI-compatible server (Ollama: OPENAI_BASE_URL=http://localhost:11434/v1 OPENAI_LLM_MODEL=llama3.2)",
        )
    return problems


def _say(text: str) -> None:
    print(text, flush=True)


class _Quiet(logging.Filter):
    """Without --verbose, a warning or error is one line: its message and the exception's."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None:
            record.msg, record.args = f"{record.getMessage()} ({describe_error(record.exc_info[1])})", None
            record.exc_info = record.exc_text = None
        return True


def _logging(verbose: bool) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("· %(levelname)s %(name)s: %(message)s"))
    if not verbose:
        handler.addFilter(_Quiet())
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    if verbose:
        logging.getLogger("memory").setLevel(logging.INFO)


def _lines(loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[str | None]) -> None:
    """Standard input, a line at a time, from a daemon thread (a read blocked on a
    terminal must not keep the process from exiting); None at its end."""

    def read() -> None:
        for line in sys.stdin:
            loop.call_soon_threadsafe(queue.put_nowait, line)
        loop.call_soon_threadsafe(queue.put_nowait, None)

    threading.Thread(target=read, name="chat-stdin", daemon=True).start()


def _memory_note(memory: Any, before: int) -> str | None:
    """What memory gave the replies since turn `before`: a line, or None when nothing."""
    recalled = sum(t.injected for t in memory.turns[before:])
    profile = any(t.profile_injected for t in memory.turns[before:])
    parts = ([f"recalled {recalled}"] if recalled else []) + (["your profile"] if profile else [])
    return f"· memory: {', '.join(parts)}" if parts else None


def _llm(model: str) -> Any:
    """The worker's LLM as configured (OPENAI_*): a local server needs no key, but the
    OpenAI client wants one."""
    from livekit.plugins import openai

    models = cloud_models()
    return openai.LLM(model=model, api_key=models.api_key or "unused", base_url=models.base_url or None)


async def _chat(identity: str, settings: Any, load: Callable[[], Future[None]]) -> int:
    from livekit.agents import AgentSession, TurnHandlingOptions, llm

    import memory
    from memory.ops import heap

    models = cloud_models()
    chat_llm = _llm(models.llm_model)
    # Typed in, printed out: no VAD, no speech models, turns end when a line is sent.
    session = AgentSession(llm=chat_llm, turn_handling=TurnHandlingOptions(turn_detection="manual"))
    extraction = chat_llm if models.memory_llm_model == models.llm_model else _llm(models.memory_llm_model)
    budget_ms = max(settings.recall_budget_ms, CHAT_BUDGET_S * 1000)
    mem = memory.attach(session, user_id=identity, llm=extraction, budget_ms=budget_ms)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    inbox: asyncio.Queue[str | None] = asyncio.Queue()
    loop.add_signal_handler(signal.SIGINT, lambda: inbox.put_nowait(None))

    def on_item(ev: Any) -> None:
        item = ev.item
        if isinstance(item, llm.ChatMessage) and item.role == "assistant" and item.text_content:
            _say(f"agent: {item.text_content}")

    def on_close(ev: Any) -> None:
        if getattr(ev, "error", None) is not None:
            _say(f"· the session ended: {describe_error(ev.error.error) if hasattr(ev.error, 'error') else ev.error}")
        stop.set()
        inbox.put_nowait(None)

    session.on("conversation_item_added", on_item)
    session.on("close", on_close)
    status = 0
    try:
        await session.start(agent=memory.first_agent(None, mem, identity=identity))
        _say(f"· chatting as {identity!r} ({settings.mode.value}); /quit or Ctrl-D to leave")
        await session.generate_reply(instructions=memory.load_prompt("greeting"))  # as a call begins
        loading = load()  # memory's models, behind the prompt
        _lines(loop, inbox)
        while not stop.is_set():
            if sys.stdin.isatty():
                print("you: ", end="", flush=True)
            line = await inbox.get()
            if line is None or line.strip().lower() in QUIT:
                break
            if not line.strip():
                continue
            if not loading.done():  # memory's models still loading: this message waits for them, once
                await asyncio.wrap_future(loading)
                heap.settle()  # everything loaded, out of the collector's full passes
            before = len(mem.turns)
            await session.run(user_input=line.strip())
            if note := _memory_note(mem, before):
                _say(note)
    except Exception as exc:  # noqa: BLE001 - said in one line; the journal keeps what was said
        models = cloud_models()
        _say(f"· the chat stopped: {describe_error(exc)} (OPENAI_BASE_URL: {models.base_url or 'api.openai.com'}, "
             f"OPENAI_LLM_MODEL: {models.llm_model})")  # fmt: skip
        status = 1
    finally:
        _say("· saving what memory keeps...")
        await mem.drain(SAVE_S)  # before the session's close closes memory (with a shorter drain)
        await session.aclose()
        await mem.aclose(drain_timeout_s=SAVE_S)
        waiting = mem.queue.owned_pending_count()
        writes = [w.event for report in mem.write_reports for w in report.writes]
        _say(f"· memory: {writes.count('ADD')} added, {writes.count('UPDATE')} updated"
             + (f", {waiting} still in the journal (written at the next start)" if waiting else ""))  # fmt: skip
        memory.close()  # the last one out stops the embedded server
    return status


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    load_env_file()
    env = process_env()
    problems = chat_problems(env)
    try:
        identity = args.user
        memory_user_id(identity)
    except InvalidIdentity as exc:
        problems.append(f"USER: {exc}")
    if problems:
        _cannot_start(problems)
        return 2
    _logging(args.verbose)
    startup.talk("chat")
    settings = load_settings(env, dotenv=False)
    # Before the first prompt: the LLM server (reachable, model known), and the store checked and
    # memory warmed up, in threads (mostly waiting on the servers) while LiveKit is imported.
    found: list[str] = []
    loading: list[Callable[[], Future[None]]] = []
    llm_check = threading.Thread(target=lambda: found.extend(startup.check_llm(env, settings)), daemon=True)
    store = threading.Thread(target=lambda: found.extend(_memory_ready(settings, loading)), daemon=True)
    llm_check.start()
    store.start()
    llm_check.join()  # quick: a server that does not answer is said before LiveKit loads
    if not found:
        _say("· loading the agent (LiveKit and the models)...")
        import livekit.agents  # noqa: F401 - imported beside the store's check
        import livekit.plugins.openai  # noqa: F401 - imported beside the store's check
    store.join()
    if found:
        _cannot_start(found)
        return 2
    return asyncio.run(_chat(identity, settings, loading[0]))


def _cannot_start(problems: list[str]) -> None:
    """One problem on one line (with the `.env` read, or where one was looked for); several,
    one a line."""
    if len(problems) == 1:
        print(f"{PROG}: cannot start: {problems[0]} ({env_file_note()})", file=sys.stderr)
    else:
        print(f"{PROG}: cannot start ({env_file_note()}):" + "".join(f"\n  {p}" for p in problems), file=sys.stderr)


def _memory_ready(settings: Any, loading: list[Callable[[], Future[None]]]) -> list[str]:
    """The store's check (with its ready lines), then the store opened for the session; Mem0,
    the embedder, the language tables and a first look-up go on loading behind the prompt
    (`loading`). What stops the chat, as lines."""
    from memory import api

    problems = startup.memory_problems(settings, embedder=False, keep_embedded=True)
    if problems:
        return problems
    try:
        loading.append(api.warm_up_behind(settings))
    except Exception as exc:  # noqa: BLE001 - said in one line: a table made for another embedder
        return [f"memory cannot be loaded: {describe_error(exc)}"]
    return []
