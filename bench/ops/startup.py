"""What memory adds to start-up: `python -m bench.ops.startup [--rounds 3]`.

Three starts, each timed with memory and without it (a bare LiveKit agent with the same
plugins, as `bench/common/plain_agent.py`), in one run, order alternated per round, after one
unmeasured start of each (a warm install: files in the page cache, the data directory made):

- import: a fresh `python -c` that imports LiveKit's agents and the OpenAI and Silero
  plugins, and then the public API (`import memory`, `memory.attach`, `memory.warm_up`);
  without memory, the same less memory;
- chat to its prompt: `python -m memory.chat USER` against the local OpenAI-compatible
  stand-in (bench/common/local_llm_server.py), until the greeting is printed and the user can
  type; without memory, a bare LiveKit text chat (the same LLM plugin and stand-in, an
  `AgentSession` and an `Agent`) to its greeting;
- chat to its first reply: the same two chats, the first line typed as soon as the greeting
  is printed (memory's models load behind the prompt; that line waits for them, and the chat
  says when memory is ready): spawn to that line's reply, and the wait after the line;
- `dev` to registered: `agent.py dev` and `bench/common/plain_agent.py dev` against the stand-in
  LiveKit server `bench.fleet.job_memory` uses (bench.ops.start_soak), until the worker has registered.

Prints a table (median seconds with and without memory, the added seconds) and, last, one
JSON line: import_added_s, chat_prompt_added_s, chat_first_reply_added_s (with
chat_first_reply_wait_memory_s / _plain_s and chat_memory_ready_after_prompt_s),
dev_registered_added_s, with the load average. Goal: at most 3 s added to each on a quiet
2-core machine. On a busy machine wall time says little, so the chat's start is also given
as the CPU time its process had used when the greeting was printed
(`chat_prompt_cpu_added_s`; /proc, the process's own threads, not the embedded Postgres
server it starts).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench.common.livekit_stub import Soak, fake_livekit, free_port
from bench.common.local_llm_server import start as start_llm
from bench.common.paths import ROOT as REPO_ROOT

ROOT = REPO_ROOT
GOAL_S = 3.0

IMPORT_PLAIN = "import livekit.agents\nfrom livekit.plugins import openai, silero\n"
IMPORT_MEMORY = IMPORT_PLAIN + "import memory\nmemory.attach, memory.warm_up\n"

# A bare LiveKit text chat: the chat's LLM plugin, session and agent, no memory.
PLAIN_CHAT = r"""
import asyncio, os, sys
from livekit.agents import Agent, AgentSession, TurnHandlingOptions
from livekit.plugins import openai


async def main():
    llm = openai.LLM(model="gpt-4.1-mini", api_key="unused", base_url=os.environ["OPENAI_BASE_URL"])
    session = AgentSession(llm=llm, turn_handling=TurnHandlingOptions(turn_detection="manual"))
    session.on("conversation_item_added", lambda ev: ev.item.role == "assistant" and print(
        f"agent: {ev.item.text_content}", flush=True))
    await session.start(agent=Agent(instructions="You are a helpful assistant."))
    print("· chatting", flush=True)
    await session.generate_reply(instructions="Greet the user.")
    while line := await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline):
        await session.run(user_input=line.strip())
    await session.aclose()


asyncio.run(main())
"""


def _cpu_s(pid: int) -> float | None:
    """CPU time (user + system) process `pid` has used so far, its own threads; None off Linux."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


async def _until_line(cmd: list[str], env: dict[str, str], marker: str, limit_s: float) -> tuple[float, float | None]:
    """Seconds from spawn to the first standard-output line starting with `marker`, and the
    CPU seconds the process had used by then; the process is then ended (its standard input
    closed, then SIGINT)."""
    started = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        *cmd, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        env=env, cwd=str(ROOT),
    )  # fmt: skip
    assert proc.stdout is not None and proc.stdin is not None
    seen: list[str] = []
    try:
        async with asyncio.timeout(limit_s):
            while line := (await proc.stdout.readline()).decode(errors="replace"):
                seen.append(line)
                if line.startswith(marker):
                    return time.perf_counter() - started, _cpu_s(proc.pid)
    except TimeoutError:
        pass
    finally:
        await _end(proc)
    raise SystemExit(f"bench.ops.startup: {cmd[1:3]} never printed {marker!r}:\n{''.join(seen[-15:])}")


async def _end(proc: asyncio.subprocess.Process) -> None:
    if proc.stdin is not None and not proc.stdin.is_closing():
        proc.stdin.close()
    if proc.returncode is None:
        proc.send_signal(signal.SIGINT)
        try:
            await asyncio.wait_for(proc.communicate(), 60)
        except TimeoutError:
            proc.kill()
            await proc.wait()


async def _import(memory: bool, env: dict[str, str]) -> tuple[float, float | None]:
    started = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", IMPORT_MEMORY if memory else IMPORT_PLAIN, env=env, cwd=str(ROOT)
    )
    if await proc.wait() != 0:
        raise SystemExit("bench.ops.startup: the import failed")
    return time.perf_counter() - started, None


async def _chat(memory: bool, env: dict[str, str]) -> tuple[float, float | None]:
    cmd = [sys.executable, "-m", "memory.chat", f"bench-startup-{uuid.uuid4().hex[:6]}"] if memory else [
        sys.executable, "-c", PLAIN_CHAT]  # fmt: skip
    return await _until_line(cmd, env, "agent: ", 300)


async def _dev(memory: bool, env: dict[str, str]) -> tuple[float, float | None]:
    soak, port = Soak(), free_port()
    stand_in = await fake_livekit(soak, port)
    script = ROOT / "agent.py" if memory else ROOT / "bench" / "common" / "plain_agent.py"
    started = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(script), "dev", env={**env, "LIVEKIT_URL": f"ws://127.0.0.1:{port}"}, cwd=str(ROOT),
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = started + 300
        while not soak.registered:
            if proc.returncode is not None or time.perf_counter() > deadline:
                raise SystemExit(f"bench.ops.startup: {script.name} dev did not register (exit {proc.returncode})")
            await asyncio.sleep(0.05)
        return time.perf_counter() - started, None
    finally:
        await _end(proc)
        await stand_in.cleanup()


# The chat's first reply: what the first message typed at the prompt waits (memory loads
# behind the prompt, and that message waits for it), per run: (wait after the line was sent,
# memory ready after the prompt or None without memory).
FIRST_LINE = "What's my sister's name?"
first_reply_parts: dict[str, list[tuple[float, float | None]]] = {"on": [], "off": []}


async def _chat_first_reply(memory: bool, env: dict[str, str]) -> tuple[float, float | None]:
    """Seconds from spawn to the reply to a line typed as soon as the greeting is printed
    (the greeting is the prompt), with the wait after the line and when memory said ready."""
    cmd = [sys.executable, "-m", "memory.chat", f"bench-startup-{uuid.uuid4().hex[:6]}"] if memory else [
        sys.executable, "-c", PLAIN_CHAT]  # fmt: skip
    started = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        *cmd, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        env=env, cwd=str(ROOT),
    )  # fmt: skip
    assert proc.stdout is not None and proc.stdin is not None
    seen: list[str] = []
    prompt = sent = ready = None
    try:
        async with asyncio.timeout(300):
            while line := (await proc.stdout.readline()).decode(errors="replace"):
                seen.append(line)
                now = time.perf_counter()
                if line.startswith("· memory is ready") and prompt is not None:
                    ready = now - prompt
                if not line.startswith("agent: "):
                    continue
                if sent is None:  # the greeting: the prompt is there, the user types at once
                    prompt = sent = now
                    proc.stdin.write(f"{FIRST_LINE}\n".encode())
                    await proc.stdin.drain()
                    continue
                first_reply_parts["on" if memory else "off"].append((now - sent, ready))
                return now - started, None
    except TimeoutError:
        pass
    finally:
        await _end(proc)
    raise SystemExit(f"bench.ops.startup: {cmd[1:3]} never replied to the first line:\n{''.join(seen[-15:])}")


MEASURES = {"import": _import, "chat_prompt": _chat, "chat_first_reply": _chat_first_reply, "dev_registered": _dev}


async def amain(args: argparse.Namespace) -> dict[str, Any]:
    runner, llm_url = await start_llm()
    data_dir = tempfile.mkdtemp(prefix="bench-startup-")
    os.chmod(data_dir, 0o755)  # the embedded server's own user reaches its socket
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "OPENAI_BASE_URL": llm_url,
        "OPENAI_API_KEY": "sk-bench-offline",
        "LIVEKIT_API_KEY": "bench-key",
        "LIVEKIT_API_SECRET": "bench-secret-that-is-long-enough-for-hs256",
        "MEMORY_DATA_DIR": data_dir,
        "PYTHONUNBUFFERED": "1",
    }
    for name in ("PROMETHEUS_PORT", "AGENT_IDLE_PROCESSES", "MEMORY_DATABASE_URL"):
        env.pop(name, None)
    runs: dict[str, dict[str, list[float]]] = {name: {"on": [], "off": []} for name in MEASURES}
    cpu: dict[str, dict[str, list[float]]] = {name: {"on": [], "off": []} for name in MEASURES}
    loads = []
    try:
        for name, measure in MEASURES.items():
            if name in args.skip:
                continue
            for memory in (True, False):  # unmeasured: a warm install, the data directory made
                await measure(memory, env)
            for parts in first_reply_parts.values():
                parts.clear()  # the unmeasured runs' parts are not figures either
            for round_ in range(args.rounds):
                for memory in (True, False) if round_ % 2 == 0 else (False, True):
                    seconds, cpu_s = await measure(memory, env)
                    runs[name]["on" if memory else "off"].append(round(seconds, 2))
                    if cpu_s is not None:
                        cpu[name]["on" if memory else "off"].append(round(cpu_s, 2))
                    loads.append(os.getloadavg()[0])
                    print(f"{name:>15} memory {'on ' if memory else 'off'}: {seconds:6.2f} s"
                          + (f", CPU {cpu_s:5.2f} s" if cpu_s is not None else "")
                          + f" (load {loads[-1]:.2f})", flush=True)  # fmt: skip
    finally:
        await runner.cleanup()
        from memory.storage.postgres import stop_if_unused

        stop_if_unused(Path(data_dir) / "pg")
    out: dict[str, Any] = {"bench": "startup", "rounds": args.rounds, "goal_added_s": GOAL_S}
    for name, r in runs.items():
        if not r["on"]:
            continue
        on, off = statistics.median(r["on"]), statistics.median(r["off"])
        out[f"{name}_memory_s"], out[f"{name}_plain_s"] = round(on, 2), round(off, 2)
        out[f"{name}_added_s"] = round(on - off, 2)
        if cpu[name]["on"] and cpu[name]["off"]:
            on, off = statistics.median(cpu[name]["on"]), statistics.median(cpu[name]["off"])
            out[f"{name}_cpu_memory_s"], out[f"{name}_cpu_plain_s"] = round(on, 2), round(off, 2)
            out[f"{name}_cpu_added_s"] = round(on - off, 2)
    if first_reply_parts["on"] and first_reply_parts["off"]:
        waits_on = [w for w, _ in first_reply_parts["on"]]
        out["chat_first_reply_wait_memory_s"] = round(statistics.median(waits_on), 2)
        out["chat_first_reply_wait_plain_s"] = round(statistics.median(w for w, _ in first_reply_parts["off"]), 2)
        ready = [r for _, r in first_reply_parts["on"] if r is not None]
        out["chat_memory_ready_after_prompt_s"] = round(statistics.median(ready), 2) if ready else None
        out["first_reply_runs"] = first_reply_parts
    out["runs"] = runs
    out["cpu_runs"] = {name: r for name, r in cpu.items() if r["on"]}
    out["load_average_1m"] = {"min": round(min(loads), 2), "max": round(max(loads), 2)} if loads else None
    out["cores"] = os.cpu_count()
    return out


def print_table(out: dict[str, Any]) -> None:
    print(f"{'start':>15} {'memory':>9} {'plain':>9} {'added':>9}  goal <= {GOAL_S:.0f} s")
    for name in MEASURES:
        if f"{name}_added_s" in out:
            added = out[f"{name}_added_s"]
            print(f"{name:>15} {out[f'{name}_memory_s']:>7.2f} s {out[f'{name}_plain_s']:>7.2f} s "
                  f"{added:>7.2f} s  {'met' if added <= GOAL_S else 'missed'}")  # fmt: skip
        if f"{name}_cpu_added_s" in out:
            print(f"{name + ' CPU':>15} {out[f'{name}_cpu_memory_s']:>7.2f} s {out[f'{name}_cpu_plain_s']:>7.2f} s "
                  f"{out[f'{name}_cpu_added_s']:>7.2f} s")  # fmt: skip
    if "chat_first_reply_wait_memory_s" in out:
        print(f"the first typed line's reply waited {out['chat_first_reply_wait_memory_s']:.2f} s with memory "
              f"({out['chat_first_reply_wait_plain_s']:.2f} s plain); memory said ready "
              f"{out['chat_memory_ready_after_prompt_s']} s after the prompt")  # fmt: skip
    print(f"load average (1 min) during the run: {out['load_average_1m']}")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3, help="measured starts of each kind, with and without memory")
    ap.add_argument("--skip", nargs="*", default=[], choices=list(MEASURES), help="starts not to measure")
    out = asyncio.run(amain(ap.parse_args(argv)))
    print_table(out)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
