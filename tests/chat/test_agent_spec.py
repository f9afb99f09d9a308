"""`memory-chat --agent`: a class the chat cannot make is named before the chat starts, in
one line, not later as "the chat stopped" next to the model's URL."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory.chat.terminal import agent_factory

NEEDS_A_NAME = """
from livekit.agents import Agent


class Concierge(Agent):
    def __init__(self, name: str, *, tone: str = "warm") -> None:
        super().__init__(instructions=f"You are {name}, {tone}.")
"""

DEFAULTS_ONLY = """
from livekit.agents import Agent


class Concierge(Agent):
    def __init__(self, name: str = "Ada") -> None:
        super().__init__(instructions=f"You are {name}.")
"""


def test_an_agent_that_needs_arguments_is_named_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "needs_a_name.py").write_text(NEEDS_A_NAME)
    with pytest.raises(ValueError) as refused:
        agent_factory(str(tmp_path / "needs_a_name.py"))
    said = str(refused.value)
    assert "\n" not in said and said.startswith(f"--agent '{tmp_path / 'needs_a_name.py'}': ")
    assert "Concierge" in said and "'name'" in said and "no arguments" in said


def test_an_agent_whose_arguments_all_have_defaults_is_made(tmp_path: Path) -> None:
    (tmp_path / "defaults_only.py").write_text(DEFAULTS_ONLY)
    made = agent_factory(str(tmp_path / "defaults_only.py"))()
    assert made.instructions == "You are Ada."
