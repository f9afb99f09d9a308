"""The decision: the cues tried in order of strength, then the most specific reason to
SKIP; and the same reading exposed to the learned stage (`cues`, `fired_rules`).

The order of precedence lives here alone; every cue is defined in its own module.
"""

from __future__ import annotations

from collections.abc import Sequence

from memory.language.prefilter.clauses import HAS_PUNCT, read_clauses
from memory.language.prefilter.context import (
    AGREE_EN,
    AGREE_ZH,
    BARE_ANSWER,
    PREV_QUESTION,
    THIRD_PERSON_SUBJECT,
    YES_NO_QUESTION,
    YOUR_NOUN,
    asks,
    previous_turn,
)
from memory.language.prefilter.decision import GateAction, GateDecision
from memory.language.prefilter.force import asks_to_remember, orders_to_remember
from memory.language.prefilter.formulas import is_ack, is_greeting
from memory.language.prefilter.reactions import ADVICE_ZH, GENERIC_ZH, YOU_EN, YOU_ZH, about_listener, passing_zh
from memory.language.prefilter.reading import read_clause
from memory.language.prefilter.repair import changes, echo_repair, refers_back, repairs
from memory.language.prefilter.self_reference import first_person
from memory.language.prefilter.text import CJK, HAS_WORD, normalise


def prefilter(text: str, context: Sequence[str] = (), *, off: frozenset[str] = frozenset()) -> GateDecision:
    """Decide SKIP / EXTRACT / FORCE for one user turn.

    ``context`` holds the previous turns, oldest first; the last one is normally the
    assistant's turn just before this one. Pure function, safe to call on any thread.
    ``off`` names EXTRACT rules (reason tags) not to use: how bench/gate/run.py's
    cross-validation selects a rule set; the product uses them all.
    """
    t = normalise(text)
    if not HAS_WORD.search(t):
        return GateDecision(GateAction.SKIP, "empty")
    if orders_to_remember(t):
        return GateDecision(GateAction.FORCE, "explicit_remember")
    if "remember_request" not in off and asks_to_remember(t):
        return GateDecision(GateAction.EXTRACT, "remember_request")

    clauses = read_clauses(t)
    if not clauses:
        return GateDecision(GateAction.SKIP, "ack")
    statements = [c.text for c in clauses if not c.question]
    readings = [read_clause(c, off) for c in statements]

    # 1. Anything in the turn itself that points at the user.
    for r in readings:
        if r.disclosure:
            return GateDecision(GateAction.EXTRACT, r.disclosure)

    # 2. Corrections and changes of something said before (no first-person word needed).
    content = [c for c, r in zip(statements, readings, strict=True) if r.content]
    prev = previous_turn(context)
    # Chinese 这/那 open a reaction and a definite subject alike ("这个会议改到周五了").
    said = [c for c, r in zip(statements, readings, strict=True) if r.content or (CJK.search(c) and not is_ack(c))]
    if "correction" not in off and (repairs(t, said, prev) or echo_repair(t, prev)):
        return GateDecision(GateAction.EXTRACT, "correction")
    unanchored = False
    if "change" not in off and changes(said):
        if refers_back(said, context):
            return GateDecision(GateAction.EXTRACT, "change")
        unanchored = True

    # 3. Cues from the previous turn.
    if (
        "answer_to_question" not in off
        and content
        and prev
        and (PREV_QUESTION.search(prev) or (not HAS_PUNCT.search(prev) and asks(prev)))
    ):
        return GateDecision(GateAction.EXTRACT, "answer_to_question")
    if "answer_to_question" not in off and YES_NO_QUESTION.search(prev) and BARE_ANSWER.match(t):
        return GateDecision(GateAction.EXTRACT, "answer_to_question")
    if (
        "about_relation" not in off
        and YOUR_NOUN.search(prev)
        and any(THIRD_PERSON_SUBJECT.match(c) for c in statements)
    ):
        return GateDecision(GateAction.EXTRACT, "about_relation")
    if "agreement" not in off and prev and any(AGREE_EN.match(c) or AGREE_ZH.match(c) for c in statements):
        if any(not c.question and first_person(c.text) for c in read_clauses(prev)):
            return GateDecision(GateAction.EXTRACT, "agreement")

    # 4. Chinese drops 我: substantive statements go to the LLM unless clearly generic.
    zh_content = [c for c in content if CJK.search(c)]
    if (
        "default" not in off
        and zh_content
        and any(not (ADVICE_ZH.match(c) or GENERIC_ZH.search(c) or passing_zh(c)) for c in zh_content)
    ):
        return GateDecision(GateAction.EXTRACT, "default")

    # 5. Nothing durable: the most specific reason. A change that points at nothing said
    # in the session may still be about a stored fact: the gatekeeper checks those.
    if unanchored:
        return GateDecision(GateAction.SKIP, "unanchored_change")
    if all(is_ack(c.text) for c in clauses) and any(is_greeting(c.text) for c in clauses):
        return GateDecision(GateAction.SKIP, "greeting")
    if all(is_ack(c.text) for c in clauses):
        return GateDecision(GateAction.SKIP, "ack")
    if not content:
        if any(c.question for c in clauses):
            return GateDecision(GateAction.SKIP, "pure_question")
        if any(r.frame == "stance" for r in readings):
            return GateDecision(GateAction.SKIP, "stance")
        return GateDecision(GateAction.SKIP, "reaction")
    if zh_content:
        return GateDecision(GateAction.SKIP, "generic_statement")
    return GateDecision(GateAction.SKIP, "no_self_reference")


# ==================================================================================
# The cues, for the learned stage (memory/language/gate_model.py)
# ==================================================================================


def fired_rules(text: str, context: Sequence[str] = ()) -> frozenset[str]:
    """Every rule that would pass this turn, not only the first: the pre-filter asked
    again with each rule it used switched off, until it skips."""
    off: set[str] = set()
    while True:
        d = prefilter(text, context, off=frozenset(off))
        if d.action is GateAction.SKIP or d.reason in off:
            return frozenset(off)
        off.add(d.reason)
        if d.action is GateAction.FORCE:  # an explicit request cannot be switched off
            return frozenset(off)


def cues(text: str, context: Sequence[str] = ()) -> frozenset[str]:
    """What the rules read in a turn, clause by clause, as names: how many statements and
    questions; for each statement its cue (``d:<tag>``), frame, whether it says anything,
    first person, addresses the listener, or only acknowledges; for questions whether they
    are about the speaker or the listener; and what the turn before asked. The grammar the
    rules are written in, without their order of precedence, for a model to weigh."""
    t = normalise(text)
    out: set[str] = set()
    clauses = read_clauses(t)
    questions = sum(c.question for c in clauses)
    out.add(f"questions:{min(questions, 2)}")
    out.add(f"statements:{min(len(clauses) - questions, 3)}")
    for c in clauses:
        if c.question:
            if first_person(c.text):
                out.add("question:first_person")
            if YOU_EN.search(c.text) or YOU_ZH.search(c.text):
                out.add("question:you")
            continue
        r = read_clause(c.text)
        out.update((f"d:{r.disclosure}", f"frame:{r.frame}", f"content:{r.content}"))
        if first_person(c.text):
            out.add("statement:first_person")
        if about_listener(c.text):
            out.add("statement:you")
        if is_ack(c.text):
            out.add("statement:ack")
    prev = previous_turn(context)
    if prev:
        if PREV_QUESTION.search(prev):
            out.add("prev:asks")
        if YES_NO_QUESTION.search(prev):
            out.add("prev:yes_no")
        if YOUR_NOUN.search(prev):
            out.add("prev:your_noun")
    return frozenset(out)
