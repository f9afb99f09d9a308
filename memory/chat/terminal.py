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

`--agent my_agent.py` puts an integrator's own Agent class in the worker's agent's place (its
instructions and tools; memory attached the same way): their integration, seen working typed.

Needs only an OpenAI key, or `OPENAI_BASE_URL` pointing at any OpenAI-compatible server
(Ollama, vLLM, llama.cpp's server): no LiveKit server, no sound card. The configuration
and the store are checked before LiveKit and the models load.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any

from memory import bodies
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
    ap.add_argument(
        "--agent",
        metavar="FILE_OR_MODULE[:CLASS]",
        help="talk to your own agent instead of the worker's: a file (my_agent.py) or module (my_pkg.agents) "
        "and its Agent class (default: the one Agent subclass it defines), made with no arguments; "
        "memory is attached to its session exactly as in a call",
    )
    ap.add_argument("--verbose", action="store_true", help="memory's own log lines, and tracebacks")
    return ap


def agent_factory(spec: str) -> Callable[[], Any]:
    """The Agent class `spec` names (`path/to/file.py[:Class]` or `package.module[:Class]`),
    imported as the worker would import it. Raises ValueError naming what is wrong."""
    import importlib
    import importlib.util
    from pathlib import Path

    from livekit.agents import Agent

    where, _, name = spec.rpartition(":") if ":" in spec else (spec, "", "")
    path = Path(where)
    try:
        if where.endswith(".py") or path.is_file():
            if not path.is_file():
                raise ValueError(f"--agent {spec!r}: there is no file {str(path)!r}")
            module_spec = importlib.util.spec_from_file_location(path.stem, path)
            if module_spec is None or module_spec.loader is None:
                raise ValueError(f"--agent {spec!r}: {str(path)!r} is not a Python file")
            module = importlib.util.module_from_spec(module_spec)
            sys.modules[path.stem] = module  # as `python my_agent.py` would name it, for its own imports
            sys.path.insert(0, str(path.resolve().parent))
            module_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(where)
    except ValueError:
        raise
    except Exception as exc:  # noqa: BLE001 - the module's own error, in one line
        raise ValueError(f"--agent {spec!r}: importing it failed: {describe_error(exc)}") from None
    if name:
        found = getattr(module, name, None)
        if not (isinstance(found, type) and issubclass(found, Agent)):
            raise ValueError(f"--agent {spec!r}: {where} has no Agent class {name!r}")
        return _made_bare(spec, found)
    own = [
        v
        for v in vars(module).values()
        if isinstance(v, type) and issubclass(v, Agent) and v.__module__ == module.__name__
    ]
    if len(own) != 1:
        named = ", ".join(sorted(v.__name__ for v in own)) or "none"
        raise ValueError(
            f"--agent {spec!r}: name the class (FILE:CLASS): {where} defines {len(own)} Agent classes ({named})"
        )
    return _made_bare(spec, own[0])


def _made_bare(spec: str, cls: type) -> type:
    """`cls` when it can be made with no arguments (as the chat makes it); else ValueError naming them."""
    import inspect

    try:
        inspect.signature(cls).bind()
    except TypeError:
        needed = [
            p.name
            for p in inspect.signature(cls).parameters.values()
            if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        ]
        raise ValueError(
            f"--agent {spec!r}: {cls.__name__} needs arguments ({', '.join(map(repr, needed))}); the chat makes "
            "it with no arguments: give them defaults, or name a class that needs none (FILE:CLASS)"
        ) from None
    except ValueError:  # no signature to read (a builtin's): the chat tries it
        pass
    return cls


def chat_problems(env: dict[str, str]) -> list[str]:
    """What stops the chat, as lines naming the variable: the worker's own checks less
    LiveKit's, and an OpenAI key or an OpenAI-compatible server."""
    problems = startup_problems(None, env)
    if not env.get("OPENAI_API_KEY", "").strip() and not env.get("OPENAI_BASE_URL", "").strip():
        problems.insert(
            0,
            "OPENAI_API_KEY is not set: the chat needs an OpenAI key, or OPENAI_BASE_URL pointing at an "
            "OpenAI-compatible server (Ollama: OPENAI_BASE_URL=http://localhost:11434/v1 OPENAI_LLM_MODEL=llama3.2; "
            "no model at all, in a checkout: `uv run python -m bench.common.local_llm_server` in another terminal, "
            "then OPENAI_BASE_URL=http://127.0.0.1:8089/v1)",
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
        elif record.exc_text:  # a traceback already formatted (a response body cut out of it): its last line
            record.msg, record.args = f"{record.getMessage()} ({record.exc_text.strip().splitlines()[-1]})", None
            record.exc_text = None
        return True


def _logging(verbose: bool) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("· %(levelname)s %(name)s: %(message)s"))
    if not verbose:
        handler.addFilter(_Quiet())
    handler.addFilter(bodies.NoResponseBodies())  # a web page where the model should be: its title only
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


PROFILE_NOTE = "your profile (the facts kept about you, which GATED gives every reply)"


def _memory_note(memory: Any, before: int, *, profile_said: bool = False) -> str | None:
    """What memory gave the replies since turn `before`: a line, or None when nothing. The
    profile is explained once (`profile_said`: the chat said it already), not after every turn."""
    recalled = sum(t.injected for t in memory.turns[before:])
    profile = not profile_said and any(t.profile_injected for t in memory.turns[before:])
    parts = ([f"recalled {recalled}"] if recalled else []) + ([PROFILE_NOTE] if profile else [])
    return f"· memory: {', '.join(parts)}" if parts else None


def _announce_loading(loop: asyncio.AbstractEventLoop, loading: Future[None]) -> None:
    """Say that memory is loading behind the prompt, and when it is ready: a first message
    typed before then waits for it."""
    import time

    started = time.perf_counter()
    if not loading.done():
        _say("· memory is loading (the embedder, Mem0, a first look-up); a message sent now waits for it")

    def ready(future: Future[None]) -> None:
        if future.exception() is not None or loop.is_closed():  # a failed load is said by the chat; gone: nobody
            return
        line = f"· memory is ready ({time.perf_counter() - started:.1f} s)"
        with contextlib.suppress(RuntimeError):  # the chat closed its loop meanwhile (left before memory was ready)
            loop.call_soon_threadsafe(_say, f"\n{line}\nyou: " if sys.stdin.isatty() else line)

    loading.add_done_callback(ready)


def _llm(model: str) -> Any:
    """The worker's LLM as configured (OPENAI_*): a local server needs no key, but the
    OpenAI client wants one."""
    from livekit.plugins import openai

    models = cloud_models()
    return openai.LLM(model=model, api_key=models.api_key or "unused", base_url=models.base_url or None)


async def _chat(
    identity: str, settings: Any, load: Callable[[], Future[None]], agent: Callable[[], Any] | None = None
) -> int:
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
    profile_said = False
    try:
        if agent is not None:  # the integrator's own agent, as their entrypoint starts it
            await session.start(agent=agent())
            _say(f"· chatting with your {type(session.current_agent).__name__} as {identity!r} "
                 f"({settings.mode.value}); /quit or Ctrl-D to leave")  # fmt: skip
        else:
            await session.start(agent=memory.first_agent(None, mem, identity=identity))
            _say(f"· chatting as {identity!r} ({settings.mode.value}); /quit or Ctrl-D to leave")
        await session.generate_reply(instructions=memory.load_prompt("greeting"))  # as a call begins
        loading = load()  # memory's models, behind the prompt
        _announce_loading(loop, loading)
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
            if note := _memory_note(mem, before, profile_said=profile_said):
                _say(note)
                profile_said = profile_said or PROFILE_NOTE in note
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
    agent: Callable[[], Any] | None = None
    if args.agent:  # the integrator's module, imported once the configuration is known to work
        try:
            agent = agent_factory(args.agent)
        except ValueError as exc:
            _cannot_start([str(exc)])
            import memory

            memory.close()  # the store opened for the chat; its embedded server stops with it
            return 2
    return asyncio.run(_chat(identity, settings, loading[0], agent))


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
