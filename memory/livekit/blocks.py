"""The one door for everything memory adds to an LLM request.

Every block memory puts in a request is built here, from data the features hand over
(`Blocks`), never from messages they made: the user's profile (and GATED's line about
the last conversation), the recalled memories, the conversation's summary, earlier
conversations, the session's forms and the shared context's id; and the text of a
shared context that the context tool returns. One rule for all of them:

- **Quoting**: each item is one line of JSON (`memory/language/quoting.py`), between the
  block's tags, under a header that says it is data, not instructions. Stored or
  submitted text cannot close a block, forge one, or start a line of its own, in ASCII
  or in a look-alike (docs/hostile-input.md).
- **Role**: `MEMORY_ROLE`, the assistant's. Untrusted text stays out of system and
  developer messages, which outrank the user (OpenAI's agent-safety guidance); a user
  message would give it the user's authority; LiveKit's RAG guide adds retrieved context
  as an assistant message. The one system message is the agent's own instructions.
- **Position and id**: decided by `apply` alone. After the instructions: the profile,
  the shared context's id, the forms. In the conversation: the summary in place of the
  messages it covers. Right before the message being answered: the recalled memories,
  then earlier conversations. Each block has a fixed id (`PROFILE_ID`, ...), so a
  request never carries two of one kind.

`apply` edits the request's own copy of the context inside `llm_node` (LiveKit's
preemptive reply is kept: one LLM request per turn); the session's history never holds
a block.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, tzinfo

from livekit.agents import llm

from memory.language.quoting import quote
from memory.livekit.turns import answered_turn
from memory.prompts import load_prompt
from memory.types import MemoryRecord, parse_time

# The role of every memory block (see the module's docstring and docs/hostile-input.md).
MEMORY_ROLE: llm.ChatRole = "assistant"

PROFILE_ID = "memory_profile"
RECALL_ID = "memory_recall"
SUMMARY_ID = "memory_conversation_summary"
PAST_ID = "memory_past_conversations"
CONTEXT_ID_ID = "shared_context_id"
FORMS_ID = "working_memory"
BLOCK_IDS = (PROFILE_ID, CONTEXT_ID_ID, FORMS_ID, SUMMARY_ID, PAST_ID, RECALL_ID)

LAST_LINE_CHARS = 200  # GATED's line about the last conversation, in characters of text


@dataclass(frozen=True)
class Said:
    """Something said in an earlier conversation: a message or a conversation's summary."""

    day: str  # where the user lives (ISO date)
    kind: str  # "user", "you" (the assistant), "summary", or "last_conversation"
    text: str


@dataclass(frozen=True)
class FormLine:
    """A form as its block shows it, quoted once when it is submitted (`form_line`):
    working memory keeps these and measures its bound on them."""

    title: str
    line: str


@dataclass
class Blocks:
    """What memory adds to one request, as data. The features fill it; `apply` builds
    and places the blocks."""

    zone: tzinfo = UTC
    profile: list[MemoryRecord] = field(default_factory=list)
    last_conversation: Said | None = None
    recalled: list[MemoryRecord] = field(default_factory=list)
    recalled_line_max: int | None = None  # each recalled line cut to this (None: whole)
    today: date | None = None
    summary: str | None = None
    summary_covers: frozenset[str] = frozenset()  # ids of the context items it stands for
    past: list[Said] = field(default_factory=list)
    context_id: str | None = None
    forms: list[FormLine] = field(default_factory=list)


@dataclass(frozen=True)
class Placed:
    """What `apply` did to one request (tests, logs, bench.latency.summary_swap)."""

    ids: tuple[str, ...]
    took_s: float


# ------------------------------------------------------------------- lines
def _local_date(stamp: str | None, zone: tzinfo) -> str:
    """The day a memory was said, where the user lives (a morning in Beijing is the day
    before in UTC)."""
    when = parse_time(stamp)
    if when is None:
        return (stamp or "")[:10]
    return when.astimezone(zone).date().isoformat()


def _about(rec: MemoryRecord) -> str:
    days = rec.metadata.get("dates")
    if not isinstance(days, list):
        return ""
    return "; ".join(str(d) for d in days[:3] if isinstance(d, str))[:80]


def _held(rec: MemoryRecord) -> str:
    """The span a value that no longer holds held ("from 2024-01-05 until 2026-03-14");
    "" for a fact that holds now (its line is as it always was)."""
    until = rec.metadata.get("valid_until")
    if not isinstance(until, str) or not until:
        return ""
    since = rec.metadata.get("valid_from")
    return f"from {since[:10]} until {until[:10]}" if isinstance(since, str) and since else f"until {until[:10]}"


def _memory_line(rec: MemoryRecord, line_max: int | None = None, zone: tzinfo = UTC) -> str:
    """One memory as a quoted JSON line; with `line_max`, its text is cut to fit."""
    fields: dict[str, str] = {}
    held = _held(rec)
    # A past value was said when it was first said, not when a change set it aside.
    stamp = rec.metadata.get("timestamp") if held else None
    if said := _local_date(stamp if isinstance(stamp, str) else rec.updated_at or rec.created_at, zone):
        fields["said"] = said
    if rec.category:
        fields["kind"] = rec.category
    if held:
        # A GATED value that a change replaced (memory/storage/store.py): true only then.
        fields["held"] = held
    if isinstance(newer := rec.metadata.get("newer_than"), str):
        # Said after another note of the block about the same thing (memory/retrieval/ranking.py).
        fields["newer_than"] = newer
    if days := _about(rec):
        # The days its "yesterday", "next week", 上周五 name, resolved when it was stored
        # (memory/language/indexing.py): the model cannot tell from "said" alone.
        fields["about"] = days
    return _fitted(fields, " ".join(rec.text.split()), line_max)


def _fitted(fields: dict[str, str], text: str, line_max: int | None) -> str:
    """`fields` and the note `text` as a line, the text cut (with "…") to `line_max`."""
    line = quote({**fields, "note": text})
    if line_max is None or len(line) <= line_max:
        return line
    # The longest start of the text that fits once quoted (an escape is 6 characters).
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(quote({**fields, "note": text[:mid] + "…"})) <= line_max:
            lo = mid
        else:
            hi = mid - 1
    cut = text[:lo]
    space = cut.rfind(" ", len(cut) - 30)  # between words where there are any
    return quote({**fields, "note": (cut[:space] if space > 0 else cut).rstrip() + "…"})


def said_line(said: Said, line_max: int | None = None) -> str:
    """An earlier conversation's message or summary as a quoted JSON line."""
    return _fitted({"said": said.day, "kind": said.kind}, " ".join(said.text.split()), line_max)


def form_line(title: str, updated: str, fields: Mapping[str, object]) -> FormLine:
    """A submitted form as its quoted JSON line: title, time, fields."""
    return FormLine(title, quote({"form": title, "updated": updated, "fields": dict(fields)}))


def note_line(agent: str, at: str, text: str) -> str:
    """A shared context's note as a quoted JSON line."""
    return quote({"agent": agent, "at": at, "note": text})


def fit_memories(records: list[MemoryRecord], max_chars: int, *, line_max: int | None = None) -> list[MemoryRecord]:
    """The records whose lines fit in `max_chars`, in order; one too long is passed over,
    not the end of the list. With `line_max`, each line is first cut to that length."""
    kept, used = [], 0
    for rec in records:
        size = len(_memory_line(rec, line_max)) + 1
        if used + size - 1 <= max_chars:
            kept.append(rec)
            used += size
    return kept


def fit_recalled(records: list[MemoryRecord], max_chars: int) -> tuple[list[MemoryRecord], int | None]:
    """The recalled memories a reply's block shows, and the line length they are cut to
    (None: shown whole). Whole when they all fit; else each line is cut to a third of the
    block, so one long turn leaves room for others, and what still does not fit is left out."""
    if fit_memories(records, max_chars) == records:
        return records, None
    line_max = (max_chars - 2) // 3
    return fit_memories(records, max_chars, line_max=line_max), line_max


def format_memories(
    records: list[MemoryRecord],
    *,
    max_chars: int | None = None,
    line_max: int | None = None,
    zone: tzinfo = UTC,
) -> str:
    """One memory a line, with its category and date (in `zone`), bounded in length."""
    shown = records if max_chars is None else fit_memories(records, max_chars, line_max=line_max)
    return "\n".join(_memory_line(rec, line_max, zone) for rec in shown)


# ------------------------------------------------------------------ blocks
def _profile_block(blocks: Blocks) -> str | None:
    lines = [_memory_line(rec, zone=blocks.zone) for rec in blocks.profile]
    if (last := blocks.last_conversation) is not None:
        text = " ".join(last.text.split())
        if len(text) > LAST_LINE_CHARS:
            text = text[: LAST_LINE_CHARS - 1].rstrip() + "…"
        lines.append(said_line(Said(last.day, last.kind, text)))
    return load_prompt("user_profile").format(memories="\n".join(lines)) if lines else None


def _recall_block(blocks: Blocks) -> str | None:
    if not blocks.recalled:
        return None
    today = blocks.today or date.today()
    memories = format_memories(blocks.recalled, line_max=blocks.recalled_line_max, zone=blocks.zone)
    return load_prompt("recalled_memories").format(memories=memories, today=today.isoformat())


def _summary_block(blocks: Blocks) -> str | None:
    if blocks.summary is None:
        return None
    return load_prompt("conversation_summary").format(summary=quote({"note": " ".join(blocks.summary.split())}))


def _past_block(blocks: Blocks) -> str | None:
    if not blocks.past:
        return None
    return load_prompt("past_conversations").format(items="\n".join(said_line(s) for s in blocks.past))


def _context_id_block(blocks: Blocks) -> str | None:
    if not blocks.context_id:
        return None
    return load_prompt("shared_context_id").format(context_id=quote({"context_id": blocks.context_id}))


def _forms_block(blocks: Blocks) -> str | None:
    if not blocks.forms:
        return None
    return load_prompt("working_memory").format(forms="\n".join(f.line for f in blocks.forms))


def shared_context_text(context_id: str, notes: Sequence[tuple[str, str, str]]) -> str:
    """A shared context as the context tool returns it: its notes (agent, time, text),
    oldest first, quoted like every block (the tool's output is the one block whose
    place is the model's own tool call)."""
    lines = [note_line(agent, at, text) for agent, at, text in notes] or ["(no notes yet)"]
    return load_prompt("shared_context").format(context_id=quote({"context_id": context_id}), notes="\n".join(lines))


def _message(block_id: str, text: str) -> llm.ChatMessage:
    return llm.ChatMessage(role=MEMORY_ROLE, content=[text], id=block_id)


def apply(ctx: llm.ChatContext, blocks: Blocks) -> Placed:
    """Put the blocks into this request's copy of the context (in place), each at its
    one position with its one id and the memory role. Blocks already there (a request
    whose context was prepared before) are replaced, never doubled."""
    started = time.perf_counter()
    items = ctx.items
    # A summary placed before (a request prepared again) keeps its place among the messages.
    at = next((i for i, it in enumerate(items) if it.id == SUMMARY_ID), None)
    earlier = None if at is None else sum(1 for it in items[:at] if it.id not in BLOCK_IDS)
    items[:] = [it for it in items if it.id not in BLOCK_IDS]
    placed: list[str] = []
    # In the conversation: the summary in place of the first message it covers.
    if (summary := _summary_block(blocks)) is not None:
        first = next((i for i, it in enumerate(items) if it.id in blocks.summary_covers), earlier)
        if first is not None:
            items[:] = [it for it in items if it.id not in blocks.summary_covers]
            items.insert(first, _message(SUMMARY_ID, summary))
            placed.append(SUMMARY_ID)
    # Right before the message answered: this turn's memories, then earlier conversations.
    answered = answered_turn(items)
    if answered is not None:
        for block_id, text in ((RECALL_ID, _recall_block(blocks)), (PAST_ID, _past_block(blocks))):
            if text is not None:
                items.insert(answered, _message(block_id, text))
                answered += 1
                placed.append(block_id)
    # After the agent's instructions: the profile, the shared context's id, the forms.
    pos = 0
    while pos < len(items) and getattr(items[pos], "role", None) in ("system", "developer"):
        pos += 1
    for block_id, text in (
        (PROFILE_ID, _profile_block(blocks)),
        (CONTEXT_ID_ID, _context_id_block(blocks)),
        (FORMS_ID, _forms_block(blocks)),
    ):
        if text is not None:
            items.insert(pos, _message(block_id, text))
            pos += 1
            placed.append(block_id)
    return Placed(tuple(placed), time.perf_counter() - started)
