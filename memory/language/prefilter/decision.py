"""What the pre-filter decides about a turn: an action and a short reason tag.

Its own module so that the gatekeeper, the service and the learned stage can name the
decision without importing the rules that make it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class GateAction(str, Enum):
    SKIP = "skip"
    EXTRACT = "extract"
    FORCE = "force"


@dataclass(frozen=True)
class GateDecision:
    """What to do with a user turn; ``reason`` is a short machine-readable tag."""

    action: GateAction
    reason: str


#: Every reason tag ``prefilter`` can return, by action (for dashboards and tests).
REASONS: dict[GateAction, tuple[str, ...]] = {
    GateAction.FORCE: ("explicit_remember",),
    GateAction.EXTRACT: (
        "first_person_statement",
        "implied_first_person",
        "relation_mention",
        "attribute_statement",
        "speaker_location",
        "opinion",
        "answer_to_question",
        "about_relation",
        "correction",
        "change",
        "agreement",
        "default",
        "remember_request",
        "change_of_known_fact",
    ),
    GateAction.SKIP: (
        "empty",
        "greeting",
        "ack",
        "pure_question",
        "stance",
        "reaction",
        "generic_statement",
        "no_self_reference",
        "unanchored_change",
    ),
}
