"""The LiveKit `memory.attach` relies on is the LiveKit installed: every private name
`memory/livekit/private.py` touches exists, and an agent becomes active only through the
door it wraps, so no way of starting an agent skips memory. A LiveKit upgrade that changes
either fails here, by name, instead of recalling nothing in production."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import livekit.agents
import livekit.agents.voice as voice
import pytest
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from memory.livekit import private

ROOT = Path(__file__).resolve().parents[2]

# Where LiveKit makes an `AgentActivity` (the start of an agent's activity), and which
# functions call the door, read from LiveKit 1.8.9's source. A new entry is a new way to
# activate an agent: check that it goes through `_update_activity` (or wrap it) and add it.
MAKES_AN_ACTIVITY = {"AgentSession._update_activity"}
CALLS_THE_DOOR = {"AgentSession._update_activity_task", "AgentTask.__await_impl"}


def _functions_calling(source: str, predicate) -> set[str]:  # noqa: ANN001 - a test helper
    found: set[str] = set()

    def walk(node: ast.AST, where: list[str]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                walk(child, [*where, child.name])
            else:
                if isinstance(child, ast.Call) and predicate(child.func):
                    found.add(".".join(where))
                walk(child, where)

    walk(ast.parse(source), [])
    return found


def _voice_sources() -> list[Path]:
    return sorted(Path(voice.__file__).parent.rglob("*.py"))


def test_the_installed_livekit_is_in_the_supported_range() -> None:
    assert Version(livekit.agents.__version__) in SpecifierSet(private.SUPPORTED)
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert '"livekit-agents[openai,silero]~=1.8.9"' in pyproject  # the pin SUPPORTED stands for
    assert private.SUPPORTED in (ROOT / "docs" / "integrate.md").read_text()


@pytest.mark.parametrize(("owner", "name"), [(o, n) for o, names in private.PRIVATE_NAMES.items() for n in names])
def test_every_private_name_memory_touches_exists(owner: str, name: str) -> None:
    cls = getattr(voice, owner)
    member = getattr(cls, name, None)
    assert member is not None, f"LiveKit's {owner} has no {name}: memory.attach cannot reach agents"
    assert inspect.iscoroutinefunction(member), f"{owner}.{name} is no longer awaited"
    assert next(iter(inspect.signature(member).parameters)) == "self"
    assert list(inspect.signature(member).parameters)[1] == "agent", f"{owner}.{name} no longer takes the agent first"


def test_an_agent_becomes_active_only_through_the_door_memory_wraps() -> None:
    makes, calls = set(), set()
    for path in _voice_sources():
        source = path.read_text()
        makes |= _functions_calling(source, lambda f: isinstance(f, ast.Name) and f.id == "AgentActivity")
        calls |= _functions_calling(
            source, lambda f: isinstance(f, ast.Attribute) and f.attr == private.UPDATE_ACTIVITY
        )
    assert makes == MAKES_AN_ACTIVITY, "LiveKit makes an agent's activity somewhere memory.attach does not wrap"
    assert calls == CALLS_THE_DOOR, "a new caller of the activation door: check it is reached through the session"


async def test_the_wrapped_door_gives_memory_before_the_activity_is_made() -> None:
    order: list[str] = []

    class Session:
        async def _update_activity(self, agent: object, **kwargs: object) -> str:
            order.append(f"activity for {agent}")
            return "started"

    session = Session()
    assert private.on_activation(session, lambda agent: order.append(f"memory for {agent}"))
    assert await session._update_activity("receptionist", wait_on_enter=False) == "started"
    assert order == ["memory for receptionist", "activity for receptionist"]
    assert not private.on_activation(object(), lambda agent: None)  # no door: said, never silent
