"""A conversation's older part in at most `MAX_SUMMARY_CHARS`, by the LLM.

The prompt (prompts/summarize_conversation.md) asks for 400 characters, leaving room;
a model that writes more is cut at the last sentence end that fits, so the bound holds
whatever the model does. The previous summary goes in first: a rolling summary covers
the whole conversation so far, not only the newest slice.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from livekit.agents import llm

from memory.language.redact import redact_secrets
from memory.prompts import load_prompt

MAX_SUMMARY_CHARS = 500
_SENTENCE_END = re.compile(r"[.!?。！？…](?:\s|$)|[。！？]")


def fit_summary(text: str, limit: int = MAX_SUMMARY_CHARS) -> str:
    """One line of at most `limit` characters, cut after a sentence where one ends."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    window = text[:limit]
    ends = [m.end() for m in _SENTENCE_END.finditer(window) if m.end() >= limit // 2]
    if ends:
        return window[: ends[-1]].strip()
    return window[: limit - 1].rstrip() + "…"


async def summarize(model: llm.LLM, messages: Sequence[tuple[str, str]], *, previous: str | None = None) -> str:
    """The summary of `previous` (a summary of what came before) and `messages`
    ((role, text), oldest first, as archived: cleaned and redacted once where they came in,
    `memory/livekit/turns.py`); what the model writes is redacted. Raises what the model
    raises; empty output is an error."""
    ctx = llm.ChatContext.empty()
    ctx.add_message(role="system", content=load_prompt("summarize_conversation"))
    payload = {
        "summary_so_far": previous or "",
        "messages": [{"role": role, "text": text} for role, text in messages],
    }
    ctx.add_message(role="user", content=json.dumps(payload, ensure_ascii=False))
    parts: list[str] = []
    async with model.chat(chat_ctx=ctx) as stream:
        async for chunk in stream:
            if chunk.delta and chunk.delta.content:
                parts.append(chunk.delta.content)
    text = fit_summary(redact_secrets("".join(parts))[0])
    if not text:
        raise ValueError("the summary model returned nothing")
    return text
