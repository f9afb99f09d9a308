"""Event-loop stalls at session start and during turns: `python -m bench.latency.loop_stalls`.

A job process prepared by agent.prewarm (with the real OpenAI plugins constructed, as a
worker's are) runs agent.entrypoint on the shipped pipeline (harness/: real speech,
Silero VAD, realtime STT fake, memory on the embedded store), under LiveKit's own
event-loop monitor with its warning threshold at 50 ms. Every stall it logs is listed
with where the loop was, split into session start (entrypoint to the greeting's first
audio) and turns. Stalls where the process was not running at all (the host's other
work) are not logged by the monitor and are not counted: nothing in the code to fix.

Prints the stalls and, last, one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import re
import sys
import tempfile
import time
import types


class _Stalls(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)
        self.seen: list[tuple[float, float, str]] = []  # (perf_counter, ms, where)

    def emit(self, record: logging.LogRecord) -> None:
        msg = record.getMessage()
        if "event loop blocked" in msg:
            m = re.search(r"blocked for (\d+)ms", msg)
            self.seen.append((time.perf_counter(), float(m.group(1)) if m else float("nan"), msg[:300]))


async def run(turns: int, mode: str) -> dict[str, object]:
    from livekit.agents.telemetry import loop_monitor

    import agent
    from harness import PipelineHarness, load_utterances, memory_parts

    proc = types.SimpleNamespace(userdata={})
    agent.prewarm(proc)
    stalls = _Stalls()
    lk_logger = logging.getLogger("livekit.agents")
    lk_logger.setLevel(logging.WARNING)
    lk_logger.addHandler(stalls)
    loop_monitor.start_monitoring(
        asyncio.get_running_loop(),
        thresholds=loop_monitor.LoopMonitorThresholds(warn=0.05, error=0.5),
        emit_spans=False,
    )
    # The monitor must see a known stall, or "no stalls" would mean nothing.
    await asyncio.sleep(0.2)
    time.sleep(0.12)
    await asyncio.sleep(0.2)
    if not stalls.seen:
        raise SystemExit(
            "bench.latency.loop_stalls: LiveKit's loop monitor did not report a 120 ms block; cannot measure"
        )
    stalls.seen.clear()
    h = PipelineHarness(mode, vad=proc.userdata["vad"])
    userdata = memory_parts()
    utts = [u for k, u in sorted(load_utterances().items()) if k.startswith("u")][:turns]
    t_start = time.perf_counter()
    async with h.entrypoint(userdata, user_id="loop-stalls-user"):
        await h.greeted()
        t_greeted = time.perf_counter()
        for u in utts:
            await h.say(u)
    userdata["store"].close()
    start = [(ms, where) for at, ms, where in stalls.seen if t_start <= at <= t_greeted]
    during = [(ms, where) for at, ms, where in stalls.seen if at > t_greeted]
    return {"session_start": start, "turns": during, "n_turns": len(utts)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--stt", choices=("realtime", "batch"), default="realtime")
    args = parser.parse_args(argv)
    os.environ.setdefault("OPENAI_API_KEY", "sk-bench-offline")  # the real plugins are built, never called
    os.environ.setdefault("MEMORY_DATA_DIR", tempfile.mkdtemp(prefix="bench-loop-"))
    logging.basicConfig(level=logging.ERROR, stream=sys.stderr)
    out = asyncio.run(run(args.turns, args.stt))
    for phase in ("session_start", "turns"):
        print(f"{phase}: {len(out[phase])} stalls over 50 ms")
        for ms, where in out[phase]:
            print(f"  {ms:.0f} ms  {where}")
    print(
        json.dumps(
            {
                "bench": "loop_stalls",
                "stt": args.stt,
                "turns": out["n_turns"],
                "session_start_ms": [ms for ms, _ in out["session_start"]],
                "turns_ms": [ms for ms, _ in out["turns"]],
            }
        )
    )


if __name__ == "__main__":
    main()
