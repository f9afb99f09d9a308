"""Prompt files, read once; prompts are not buried in code.

They live in the repository's top-level `prompts/`; the wheel carries the same files inside
the package (`memory/prompt_files/`, pyproject.toml), so an installed package finds them
wherever it runs, and a checkout (or an editable install) reads the repository's."""

from __future__ import annotations

from functools import cache
from pathlib import Path

_HERE = Path(__file__).resolve().parent
PROMPTS_DIR = _HERE / "prompt_files" if (_HERE / "prompt_files").is_dir() else _HERE.parent / "prompts"


@cache
def load_prompt(name: str) -> str:
    """The text of `prompts/<name>.md`; a missing file names the path it looked for."""
    path = PROMPTS_DIR / f"{name}.md"
    try:
        return path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise FileNotFoundError(f"prompt file not found: {path}") from None
