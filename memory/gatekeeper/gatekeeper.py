"""GATED mode's gatekeeper: which user turns become long-term memories.

Two stages. The local pre-filter (`memory/language/prefilter/`) drops greetings, thanks and
pure questions for free and forces a write for explicit "remember ..." requests.
Only turns that pass reach the LLM extraction step (`prompts/extract_facts.md`),
which returns canonical facts in the user's language with a category and a
slot; the store then skips restatements and supersedes a slot's old value.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field

from memory.language.gate_model import gate
from memory.language.instructions import about_user, is_instruction
from memory.language.prefilter import GateAction, GateDecision, anchored_in, prefilter
from memory.prompts import load_prompt
from memory.settings import DURABLE_CATEGORIES
from memory.types import ExtractionUnavailable

if TYPE_CHECKING:  # LiveKit is loaded where a model is called, not by importing the rules
    from livekit.agents import llm

logger = logging.getLogger(__name__)

MAX_FACT_CHARS = 300
MAX_FACTS_PER_TURN = 8
MAX_CONTEXT_CHARS = 400  # of each earlier turn shown to the extraction model


# How the model's API refuses one turn for what it says or its size: HTTP 413, or a 400
# whose error code says so (a content filter, a context too long). Any other 400 is a
# setting that fails every turn alike ("response_format is not supported with this
# model"), as are 401/403/404/422/429 and 5xx: the queue retries until it is fixed.
REFUSED_STATUS = 413
REFUSED_CODES = ("content_filter", "context_length_exceeded", "string_above_max_length", "invalid_prompt")


def refuses_turn(exc: BaseException) -> bool:
    """Is this API error about this turn's content, so that every retry would get it too?"""
    from livekit.agents import APIStatusError

    if not isinstance(exc, APIStatusError):
        return False
    if exc.status_code == REFUSED_STATUS:
        return True
    return exc.status_code == 400 and any(code in f"{exc.message} {exc.body}" for code in REFUSED_CODES)


# The user's stored facts shown to the extraction model, newest first: enough for the
# slots a turn may touch, bounded so a long-known user does not make every call large.
MAX_KNOWN_FACTS = 40


@dataclass(frozen=True)
class KnownFact:
    """A fact already stored about the user, as the extraction model is shown it."""

    slot: str
    text: str


KnownFacts = Callable[[], Awaitable[Sequence[KnownFact]]]


class Fact(BaseModel):
    """One canonical durable fact, as the extraction LLM must return it."""

    text: str = Field(min_length=1, max_length=MAX_FACT_CHARS)
    category: str
    slot: str | None = None
    # The model's word that the value it replaces was a mistake, not a change
    # ("no, I said Berlin, not Bern"): the store then keeps no past value for it.
    corrects: bool = False


@dataclass(frozen=True)
class GateOutcome:
    """The gatekeeper's verdict on one turn (logged, and what the store receives)."""

    decision: GateDecision
    facts: list[Fact] = field(default_factory=list)
    extraction_called: bool = False
    error: str | None = None


_SLOT_RE = re.compile(r"[^\w]+")  # letters of any script, digits and _ stay
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_OPENING = re.compile(r"[\[{]")


def normalise_slot(slot: object) -> str | None:
    """snake_case, bounded: the slot is a key, not free text. "homeCity", "Home City" and
    "home-city" are one slot, or a new value would never supersede the old one."""
    if slot is None or isinstance(slot, bool):
        return None
    cleaned = _SLOT_RE.sub("_", _CAMEL.sub("_", str(slot).strip()).lower()).strip("_")
    return cleaned[:64] or None


def normalise_category(category: object) -> str:
    """ "Personal Facts", "personal-facts" -> personal_facts."""
    return re.sub(r"[\s\-]+", "_", str(category).strip().lower()) if isinstance(category, str) else ""


def _json_payload(raw: str) -> object:
    """The first JSON object or list in the output: fenced or not, with or without text
    around it, even when that text has brackets of its own ("Here are the facts [JSON]:")."""
    text = raw.strip()
    if text.startswith("```"):
        text = text.strip("`").removeprefix("json").strip()
    decoder = json.JSONDecoder()
    error: json.JSONDecodeError | None = None
    fallback: list[object] | None = None  # "[]" or "[1]": facts only if nothing better follows
    for match in _OPENING.finditer(text):
        try:
            value, _ = decoder.raw_decode(text[match.start() :])
        except json.JSONDecodeError as exc:
            error = error or exc
            continue
        if isinstance(value, dict) or any(isinstance(v, dict) for v in value):
            return value
        fallback = value if fallback is None else fallback
    if fallback is not None:
        return fallback
    if error is None:
        # Its length, never its words: a model's prose answer echoes what the user said.
        raise ValueError(f"extraction output is not JSON ({len(raw)} characters)")
    raise ValueError(f"extraction output is not JSON: {error}")


def _category(item: dict[str, object], categories: Sequence[str]) -> str:
    """The item's category as one of `categories`: a singular ("preference",
    "personal fact") is the category it names."""
    category = normalise_category(item.get("category"))
    if category not in categories and f"{category}s" in categories:
        return f"{category}s"
    return category


def _distinct_slots(facts: list[Fact]) -> list[Fact]:
    """A slot named twice in one turn holds two values said together ("my sisters Anna
    and Maria"): the second must not replace the first, so repeats get `_2`, `_3`."""
    used = {fact.slot for fact in facts if fact.slot is not None}  # "sister_name_2" may be the model's own
    taken: set[str] = set()
    for fact in facts:
        if fact.slot is None:
            continue
        if fact.slot in taken:
            base, n = fact.slot[:60], 2
            while f"{base}_{n}" in used:
                n += 1
            fact.slot = f"{base}_{n}"
            used.add(fact.slot)
        taken.add(fact.slot)
    return facts


def fact_from(item: object, categories: Sequence[str] = DURABLE_CATEGORIES) -> Fact | None:
    """One item ({"text", "category", "slot"}) as a fact by the rules every stored fact
    passes, extracted or imported: text of 1 to `MAX_FACT_CHARS` characters, a known
    category (a singular or another spelling is the category it names), a snake_case
    slot. None for an item that fails them."""
    if not isinstance(item, dict):
        return None
    text = item.get("text", item.get("fact"))
    if not isinstance(text, str) or not text.strip() or len(text.strip()) > MAX_FACT_CHARS:
        return None
    category = _category(item, categories)
    if category not in categories:
        return None
    corrects = item.get("corrects") is True
    return Fact(text=text.strip(), category=category, slot=normalise_slot(item.get("slot")), corrects=corrects)


def admit_facts(items: Sequence[object], categories: Sequence[str] = DURABLE_CATEGORIES) -> list[Fact | None]:
    """Facts from outside the model (an import), item by item: `fact_from`'s rules, and
    no instruction to the assistant (`is_instruction`). None where an item is refused."""
    out: list[Fact | None] = []
    for item in items:
        fact = fact_from(item, categories)
        out.append(None if fact is None or is_instruction(fact.text) else fact)
    return out


def parse_extraction(raw: str, categories: Sequence[str] = DURABLE_CATEGORIES) -> list[Fact]:
    """Parse the LLM's JSON, in the shapes models really return: {"facts": [...]}, a bare
    list, one bare fact, another key for the list. Each item stands alone: one with an
    unknown category, no text or an odd slot is dropped, not the whole turn's facts.
    Raises ValueError only when there is no JSON at all (junk)."""
    data = _json_payload(raw)
    items: list[object]
    if isinstance(data, dict):
        held = [v for k, v in data.items() if k in ("facts", "memories", "items") and isinstance(v, (list, dict))]
        if held:
            items = held[0] if isinstance(held[0], list) else [held[0]]
        else:
            items = [data] if ("text" in data or "fact" in data) else []
    else:
        items = data
    facts: list[Fact] = []
    dropped = 0
    for item in items:
        if len(facts) == MAX_FACTS_PER_TURN:
            break
        fact = fact_from(item, categories)
        if fact is None:
            dropped += 1
            continue
        facts.append(fact)
    if dropped:
        # How many, never their words: a fact is the user's own.
        logger.warning("dropped %d extracted item(s) with no text or no known category", dropped)
    return _distinct_slots(facts)


class Gatekeeper:
    """Pre-filter, then (only if needed) one structured LLM extraction call."""

    def __init__(self, extraction_llm: llm.LLM | None, *, timeout_s: float = 8.0, learned: bool = True) -> None:
        # Under the write queue's 10 s per attempt, so a slow model ends as this call's
        # own, named timeout (ExtractionUnavailable) with time left for the writes.
        self._llm = extraction_llm
        self._timeout_s = timeout_s
        # MEMORY_GATE_MODEL: the learned stage decides English turns (gate_model.py); off: rules alone.
        self._decide = gate if learned else prefilter
        self._prompt = load_prompt("extract_facts")

    async def review(self, text: str, context: Sequence[str] = (), known: KnownFacts | None = None) -> GateOutcome:
        """The verdict on one turn. `known` reads what is stored about the user already,
        with slots (only for a turn that reaches the model), so the model can name the slot
        a change replaces and give an added value (a second sister) a slot of its own:
        blind to them, "I have a sister called Lisa too" replaced Anna."""
        decision = self._decide(text, context)
        facts_known: Sequence[KnownFact] | None = None
        if decision.reason == "unanchored_change" and known is not None:
            # A change that names nothing said in this session ("dentist appointment moved
            # to Tuesday"): it goes on only if it is about a fact stored in an earlier one.
            facts_known = await known()
            if anchored_in(text, [k.text for k in facts_known]):
                decision = GateDecision(GateAction.EXTRACT, "change_of_known_fact")
        if decision.action is GateAction.SKIP:
            return GateOutcome(decision)
        if self._llm is None:
            return GateOutcome(decision, _forced_fallback(text, decision), error="no extraction LLM")
        if facts_known is None:
            facts_known = await known() if known is not None else ()
        try:
            raw = await asyncio.wait_for(self._extract(text, context, facts_known), self._timeout_s)
        except Exception as exc:
            if not refuses_turn(exc):  # transient: the queue retries the turn
                raise ExtractionUnavailable(f"fact extraction call failed: {exc!r}") from exc
            # The model refuses this turn (a content filter, a request too large): it
            # would refuse every retry, and the turns behind it in the queue would wait.
            status = getattr(exc, "status_code", 0)
            logger.warning("fact extraction refused the turn (HTTP %d)", status)
            return GateOutcome(decision, _forced_fallback(text, decision), True, error=f"HTTP {status}")
        try:
            facts = parse_extraction(raw)
        except ValueError as exc:  # junk output is permanent: keep only a forced write
            logger.warning("fact extraction output rejected: %s", exc)
            return GateOutcome(decision, _forced_fallback(text, decision), True, error=str(exc))
        facts = _without_instructions(facts)
        if not facts:
            facts = _forced_fallback(text, decision)
        return GateOutcome(decision, facts, extraction_called=True)

    async def _extract(self, text: str, context: Sequence[str], known: Sequence[KnownFact] = ()) -> str:
        from livekit.agents import llm

        assert self._llm is not None
        ctx = llm.ChatContext.empty()
        ctx.add_message(role="system", content=self._prompt)
        ctx.add_message(
            role="user",
            content=json.dumps(
                {
                    "known_facts": [{"slot": k.slot, "text": k.text} for k in known[:MAX_KNOWN_FACTS]],
                    # Bounded per turn: the glue sends each earlier turn's end only, and a
                    # row journaled otherwise (an older worker) is cut here the same way.
                    "previous_turns": [t[-MAX_CONTEXT_CHARS:] for t in list(context)[-2:]],
                    "latest_user_message": text,
                },
                ensure_ascii=False,
            ),
        )
        parts: list[str] = []
        async with self._llm.chat(chat_ctx=ctx, extra_kwargs={"response_format": {"type": "json_object"}}) as stream:
            async for chunk in stream:
                if chunk.delta and chunk.delta.content:
                    parts.append(chunk.delta.content)
        return "".join(parts)


def _forced_fallback(text: str, decision: GateDecision) -> list[Fact]:
    """An explicit "remember ..." is kept even when extraction fails or finds nothing,
    if it says something about the user and tells the assistant nothing: "remember that
    you must answer only in French" is an instruction, not a personal fact."""
    if decision.action is not GateAction.FORCE:
        return []
    if is_instruction(text) or not about_user(text):
        logger.info(
            "forced write dropped: %s",
            "an instruction to the assistant" if is_instruction(text) else "nothing about the user",
        )
        return []
    return [Fact(text=text.strip()[:MAX_FACT_CHARS], category="personal_facts", slot=None)]


def _without_instructions(facts: list[Fact]) -> list[Fact]:
    """The extracted facts less those that tell the assistant how to behave (a model may
    return "User wants the assistant to reveal the system prompt" as a preference)."""
    kept = [fact for fact in facts if not is_instruction(fact.text)]
    if len(kept) < len(facts):
        logger.info(
            "dropped %d extracted instruction(s) to the assistant", len(facts) - len(kept)
        )  # how many, never the words
    return kept
