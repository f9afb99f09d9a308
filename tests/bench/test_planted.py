"""`bench.mutations.planted` tells a caught bug from one that survives, on a tiny tree of its own.

The tree holds a real module (memory/errors.py, copied) and one test file written here;
the runner copies it, plants each bug, chooses the test file because it imports the
module, and runs it with the copy's code."""

from __future__ import annotations

import json
from pathlib import Path

from bench.mutations import planted

ROOT = Path(__file__).resolve().parents[2]

TINY_TEST = """
from memory.errors import Unavailable, retryable


def test_an_outage_may_be_tried_again():
    assert retryable(Unavailable("the store is down")) is True
"""


def _tree(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    (tree / "memory").mkdir(parents=True)
    (tree / "memory" / "__init__.py").write_text("")
    (tree / "memory" / "errors.py").write_text((ROOT / "memory" / "errors.py").read_text(encoding="utf-8"))
    (tree / "tests").mkdir()
    (tree / "tests" / "__init__.py").write_text("")
    (tree / "tests" / "test_tiny.py").write_text(TINY_TEST)
    (tree / "tests" / "test_unrelated.py").write_text("def test_nothing_here():\n    assert False\n")
    return tree


def _bug(id_: str, file: str, old: str, new: str) -> dict[str, str]:
    return {"id": id_, "file": file, "old": old, "new": new, "breaks": "a test of the runner"}


def test_a_bug_a_test_catches_is_caught_and_a_no_op_survives(tmp_path, capsys):
    tree = _tree(tmp_path)
    bugs = {
        "about": "the runner's own test",
        "bugs": [
            _bug("caught", "memory/errors.py", "    retryable = True", "    retryable = False"),
            _bug(
                "no-op",
                "memory/errors.py",
                '"""Base of every error the memory package raises on purpose."""',
                '"""Base of every error this package raises on purpose."""',
            ),  # fmt: skip
            _bug("gone", "memory/errors.py", "this text is in no file", "anything"),
        ],
    }
    path = tmp_path / "bugs.json"
    path.write_text(json.dumps(bugs))
    out_json = tmp_path / "out.json"

    args = [str(path), "--tree", str(tree), "--timeout", "120", "--json-out", str(out_json), "--no-baseline"]
    assert planted.main(args) == 0

    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert (last["total"], last["caught"], last["survived"], last["not_applicable"], last["errors"]) == (3, 1, 1, 1, 0)
    assert last["survived_ids"] == ["no-op"] and last["not_applicable_ids"] == ["gone"]
    by_id = {o["bug"]["id"]: o for o in json.loads(out_json.read_text())["outcomes"]}
    assert by_id["caught"]["tests"] == ["tests/test_tiny.py"]  # the unrelated (failing) file is not chosen
    # the tree itself is never changed
    assert "    retryable = True" in (tree / "memory" / "errors.py").read_text()


def test_code_moved_to_another_module_is_found(tmp_path):
    tree = _tree(tmp_path)
    bug = planted.Bug("x", "memory/old_errors.py", "return value if isinstance(value, bool) else None", "return None")
    file, text, how = planted.locate(tree, bug)
    assert (file, how) == ("memory/errors.py", "moved")
    assert "    return None\n" in text
    assert planted.choose_tests(tree, [planted.dotted(file)]) == (["tests/test_tiny.py"], "import the module")


def test_code_moved_into_a_class_is_found_and_the_bug_reindented(tmp_path):
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "a.py").write_text(
        "class Holder:\n    def release(self, key):\n        if key:\n            return 1\n        return 0\n"
    )
    bug = planted.Bug("x", "memory/b.py", "if key:\n    return 1\n", "if not key:\n    return 1\n")
    file, text, how = planted.locate(tmp_path, bug)
    assert file == "memory/a.py" and "reindented" in how
    expected = (
        "class Holder:\n    def release(self, key):\n        if not key:\n            return 1\n        return 0\n"
    )
    assert text == expected
