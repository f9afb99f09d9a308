"""Prompt files from `prompts/`, read once; prompts are not buried in code."""

from __future__ import annotations

from functools import cache
from pathlib import Path

PROMPTS_DIR = Path(__file__).resolve().parents[1] / "prompts"


@cache
def load_prompt(name: str) -> str:
    """The text of `prompts/<name>.md`; a missing file names the path it looked for."""
    path = PROMPTS_DIR / f"{name}.md"
    try:
        return path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise FileNotFoundError(f"prompt file not found: {path}") from None
