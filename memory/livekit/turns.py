"""What a user turn becomes on its way to memory (its stored part, its journal rows,
its context for later turns, the words a look-up searches for), and which user message
a request to the LLM answers. Pure functions: `MemorySession` calls them.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from dataclasses import dataclass

from livekit.agents import llm

from memory.language.redact import redact_secrets
from memory.language.split import split_turn
from memory.types import Turn, clean_text

logger = logging.getLogger(__name__)

# Items that may follow the user's message in a request that still answers it: a tool
# call and its result (LiveKit asks the LLM again with them), notes such as a reply's
# own instructions (added as a system message after it), a hand-off to another agent.
_TOOL_ITEMS = ("function_call", "function_call_output")
_ANSWERING_ITEMS = (*_TOOL_ITEMS, "agent_handoff", "agent_config_update")


def answered_turn(items: list[llm.ChatItem]) -> int | None:
    """The index of the user message this request answers, or None when the agent
    already answered it (a greeting, an instruction of its own). The assistant's words
    between tool calls still answer it."""
    last_user = next((i for i in range(len(items) - 1, -1, -1) if getattr(items[i], "role", None) == "user"), None)
    if last_user is None:
        return None
    after = items[last_user + 1 :]
    in_tool_loop = any(item.type in _TOOL_ITEMS for item in after)
    for item in after:
        role = getattr(item, "role", None)
        if item.type in _ANSWERING_ITEMS or role in ("system", "developer") or (role == "assistant" and in_tool_loop):
            continue
        return None
    return last_user


def same_words(a: str, b: str) -> bool:
    """Equal but for case, punctuation and spacing, as LiveKit compares transcripts."""
    return [w for w in re.split(r"\W+", a.casefold()) if w] == [w for w in re.split(r"\W+", b.casefold()) if w]


# Turns up to this long are redacted and split on the event loop (well under a
# millisecond); longer ones on a thread.
INLINE_TURN_CHARS = 4000


# What a turn contributes to the context of the turns after it (the journal row, the
# extraction call): its last characters, once, not the whole of it with every part.
CONTEXT_ITEM_CHARS = 300


def bounded_turn(text: str, limit: int, turn_id: str | None = None) -> str:
    """The part of a turn that is stored: its first `limit` characters (MEMORY_MAX_TURN_CHARS)."""
    if len(text) <= limit:
        return text
    logger.warning(
        "user turn %s is %d characters; only the first %d are stored (MEMORY_MAX_TURN_CHARS)",
        turn_id, len(text), limit,
    )  # fmt: skip
    return text[:limit]


def query_text(text: str, limit: int) -> str:
    """What a look-up searches for: the last `limit` characters of what was said."""
    return text if len(text) <= limit else text[-limit:].strip()


@dataclass(frozen=True)
class Redacted:
    """A message's text as memory keeps it: `clean_text`, then `redact_secrets`. Made once,
    where the message comes in (`MemorySession`), and carried to its journal rows, its
    context for later turns and the archive, so that none of them does it again."""

    text: str
    secrets: tuple[str, ...] = ()


def redacted(text: str) -> Redacted:
    """`text` cleaned and its secrets replaced, with the kinds of secret found."""
    kept, secrets = redact_secrets(clean_text(text))
    return Redacted(kept, tuple(secrets))


def context_text(text: str | Redacted) -> str:
    """A turn as context for later turns: its end, secrets left out. Redacted before the cut
    (the whole message when it came redacted; else its end with a margin), so a secret the
    cut goes through is redacted whole, then cut."""
    if isinstance(text, Redacted):
        kept = text.text
    else:
        tail = text if len(text) <= 2 * CONTEXT_ITEM_CHARS else text[-2 * CONTEXT_ITEM_CHARS :]
        kept, _ = redact_secrets(clean_text(tail))
    return kept if len(kept) <= CONTEXT_ITEM_CHARS else "…" + kept[-CONTEXT_ITEM_CHARS:]


def turn_parts(turn: Turn, max_chars: int) -> list[Turn]:
    """The journal rows of one turn: no secrets, no character the store would refuse, cut
    into parts the store keeps whole. The first part carries the context; the rest
    carry none (a 5 MB turn journaled the two items before it with each of its parts).
    A turn that came redacted (`Turn.redacted`) is not redacted again; every part is
    marked redacted (its context is `context_text`'s, redacted too)."""
    kept = turn.text if turn.redacted else redact_secrets(clean_text(turn.text))[0]
    parts = split_turn(kept, max_chars)
    seq = turn.seq
    return [
        dataclasses.replace(
            turn,
            text=part,
            turn_id=turn.turn_id if n == 0 else f"{turn.turn_id}/{n}",
            context=turn.context if n == 0 else (),
            seq=None if seq is None else seq + n,
            redacted=True,
        )
        for n, part in enumerate(parts)
    ]
