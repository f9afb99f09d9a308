"""The forget's confirmation and its report (memory/commands.py): only the identity typed
as it is confirms (an empty line, Enter, does not); a pipe never confirms; `--yes` does;
the exit status is 0 forgotten, 1 nothing stored, 3 not finished (the documented codes)."""

from __future__ import annotations

import dataclasses
import io
import logging
from pathlib import Path

import pytest

from memory.commands import confirm_forget, exit_status, open_store, quiet_logs, report, store_ids
from memory.settings import load_settings
from memory.storage.store import MemoryStore
from memory.userdata import Forgotten


class Terminal(io.StringIO):
    """What the operator types, on a terminal."""

    def isatty(self) -> bool:
        return True


def ask(typed: str, identities: list[str], *, yes: bool = False, stdin: io.StringIO | None = None) -> tuple[bool, str]:
    err = io.StringIO()
    ok = confirm_forget(identities, yes=yes, prog="memory-forget", stdin=stdin or Terminal(typed), stderr=err)
    return ok, err.getvalue()


def test_enter_at_the_confirmation_does_not_confirm() -> None:
    ok, said = ask("\n", ["alice"])
    assert ok is False
    assert "that is not the identity: nothing was forgotten" in said


@pytest.mark.parametrize("typed", ["", "alic\n", "Alice\n", "alice \n", " alice\n", "bob\n"])
def test_anything_but_the_identity_as_it_is_does_not_confirm(typed: str) -> None:
    assert ask(typed, ["alice"])[0] is False


@pytest.mark.parametrize("typed", ["alice\n", "alice\r\n", "alice"])
def test_the_identity_typed_as_it_is_confirms(typed: str) -> None:
    ok, said = ask(typed, ["alice"])
    assert ok is True
    assert "This deletes everything kept about alice, everywhere, with no undo." in said


def test_each_identity_is_typed_and_one_wrong_confirms_none() -> None:
    assert ask("alice\nbob\n", ["alice", "bob"])[0] is True
    assert ask("alice\n\n", ["alice", "bob"])[0] is False


def test_a_pipe_never_confirms_and_yes_always_does() -> None:
    ok, said = ask("", ["alice"], stdin=io.StringIO("alice\n"))
    assert ok is False and "not on a terminal" in said and "--yes" in said
    assert ask("", ["alice"], yes=True, stdin=io.StringIO(""))[0] is True


def test_the_exit_status_of_a_forget() -> None:
    assert exit_status(Forgotten({"memories": 2, "journal": 0})) == 0
    assert exit_status(Forgotten({"memories": 0, "journal": 0})) == 1
    assert exit_status(Forgotten({"memories": 2}, {"journal": "disk full"})) == 3
    assert exit_status(Forgotten({"memories": 0}, {"journal": "disk full"})) == 3


def test_the_report_says_what_went_and_what_could_not(capsys: pytest.CaptureFixture[str]) -> None:
    assert report("alice", Forgotten({"memories": 2, "journal": 1}), prog="memory-forget") == 0
    out, err = capsys.readouterr()
    assert out == "forgot alice: memories 2, journal 1\n" and err == ""
    assert report("bob", Forgotten({"memories": 0}), prog="memory-forget") == 1
    out, err = capsys.readouterr()
    assert out == "forgot bob: memories 0\n"
    assert err.startswith("memory-forget: nothing was stored under 'bob'") and "--stored-id" in err
    assert report("carol", Forgotten({"memories": 1}, {"journal": "disk full"}), prog="memory-forget") == 3
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("memory-forget: could not finish forgetting 'carol': journal: disk full.")


def test_the_ids_a_command_is_given_are_an_identity_or_a_stored_id() -> None:
    from memory.errors import InvalidIdentity

    # An identity is kept under itself, or under "lk-" and a hash when the store cannot keep it as it is.
    assert store_ids(["alice", "bob"], stored=False) == ["alice", "bob"]
    [hashed] = store_ids(["alice smith"], stored=False)
    assert hashed.startswith("lk-") and len(hashed) == 43
    # A stored id (`--stored-id`, from the logs) is used as it is, and one the store could never hold is refused.
    assert store_ids([hashed], stored=True) == [hashed]
    with pytest.raises(InvalidIdentity, match="whitespace"):
        store_ids(["alice", "alice smith"], stored=True)


def test_a_command_opens_no_empty_store_where_there_is_none(tmp_path: Path) -> None:
    settings = load_settings({"MEMORY_DATA_DIR": str(tmp_path / "nowhere")}, dotenv=False)
    opened, problems = open_store(settings)
    assert opened is None
    assert problems == [f"no memory store in MEMORY_DATA_DIR={str(tmp_path / 'nowhere')!r} (is it the worker's?)"]
    assert not (tmp_path / "nowhere").exists()  # nothing made


def test_a_command_opens_the_store_it_names_without_loading_mem0(store: MemoryStore, tmp_path: Path) -> None:
    settings = dataclasses.replace(store.settings, data_dir=tmp_path, database_url=store.url)
    opened, problems = open_store(settings)
    assert problems == [] and opened is not None
    try:
        assert opened.table == store.table
        assert opened._mem0 is None  # Mem0 is loaded on its first use only (seconds of imports)
    finally:
        opened.close()
    missing = dataclasses.replace(settings, collection="no_such_table_i48")
    assert open_store(missing) == (None, ["no table MEMORY_COLLECTION='no_such_table_i48' in that database"])


def test_a_command_without_a_log_handler_prints_no_library_warning(capsys: pytest.CaptureFixture[str]) -> None:
    root = logging.getLogger()
    saved = root.handlers[:]
    root.handlers.clear()
    try:
        quiet_logs()
        assert len(root.handlers) == 1 and isinstance(root.handlers[0], logging.NullHandler)
        logging.getLogger("some.library").warning("a library's warning")
        assert capsys.readouterr().err == ""
        quiet_logs()  # a second call adds nothing
        assert len(root.handlers) == 1
    finally:
        root.handlers[:] = saved
    kept = logging.StreamHandler()
    root.handlers[:] = [kept]
    try:
        quiet_logs()  # a handler of the command's own: left as it is, none added
        assert root.handlers == [kept]
    finally:
        root.handlers[:] = saved


def test_the_confirmation_says_what_it_deletes_and_how_to_skip_it() -> None:
    ok, said = ask("alice\n", ["alice"])
    assert ok is True
    assert said == ("This deletes everything kept about alice, everywhere, with no undo.\n"
                    "Type the identity to confirm: ")  # fmt: skip
    ok, said = ask("", ["alice"], stdin=io.StringIO("alice\n"))
    assert said == ("memory-forget: nothing was forgotten: not on a terminal, so nobody typed the identity; "
                    "pass --yes to forget without asking\n")  # fmt: skip


def test_a_closed_or_missing_standard_input_never_confirms() -> None:
    closed = io.StringIO("alice\n")
    closed.close()
    assert ask("", ["alice"], stdin=closed)[0] is False

    class NoTty:
        def readline(self) -> str:
            return "alice\n"

    assert ask("", ["alice"], stdin=NoTty())[0] is False  # type: ignore[arg-type]


def test_a_store_that_cannot_be_opened_is_said_in_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from memory import commands
    from memory.settings import ConfigError

    settings = load_settings({"MEMORY_DATA_DIR": str(tmp_path)}, dotenv=False)
    monkeypatch.setattr(commands, "missing_store", lambda _s: None)
    monkeypatch.setattr(commands, "storage_problems", lambda *_: ["the server is not running"])
    assert open_store(settings) == (None, ["the server is not running"])
    monkeypatch.setattr(commands, "storage_problems", lambda *_: [])
    opened: list[bool] = []

    def refuse(_settings, *, load_mem0: bool):  # noqa: ANN001, ANN202
        opened.append(load_mem0)
        raise ConfigError("the table was made for another embedder")

    monkeypatch.setattr(commands.MemoryStore, "open", refuse)
    assert open_store(settings) == (None, ["the table was made for another embedder"])
    assert open_store(settings, load_mem0=True)[0] is None and opened == [False, True]

    def gone(_settings, *, load_mem0: bool):  # noqa: ANN001, ANN202
        raise OSError("connection refused")

    monkeypatch.setattr(commands.MemoryStore, "open", gone)
    opened_store, problems = open_store(settings)
    assert opened_store is None and len(problems) == 1
    assert problems[0].startswith("the memory store cannot be opened: ") and "connection refused" in problems[0]


def test_the_documented_exit_codes() -> None:
    from memory import commands

    assert (commands.EXIT_NOTHING_STORED, commands.EXIT_INCOMPLETE) == (1, 3)


def test_a_database_that_cannot_be_reached_is_named_by_its_variable(tmp_path: Path) -> None:
    # Port 1 on this machine: nothing listens, the connection is refused at once.
    url = "postgresql://memory@127.0.0.1:1/memory?connect_timeout=2"
    settings = load_settings({"MEMORY_DATA_DIR": str(tmp_path), "MEMORY_DATABASE_URL": url}, dotenv=False)
    opened, problems = open_store(settings)
    assert opened is None and len(problems) == 1
    assert problems[0].startswith("MEMORY_DATABASE_URL cannot be reached: "), problems


@pytest.mark.parametrize("identity", ["MAX", "alice XX", "lk-X"])
def test_an_identity_ending_in_any_letter_is_confirmed_by_typing_it(identity: str) -> None:
    assert ask(f"{identity}\n", [identity])[0] is True
    assert ask(f"{identity}\r\n", [identity])[0] is True  # a terminal's CR LF


def test_nothing_stored_is_said_in_the_documented_words(capsys: pytest.CaptureFixture[str]) -> None:
    assert report("bob", Forgotten({"memories": 0}), prog="memory-forget") == 1
    assert capsys.readouterr().err == (
        "memory-forget: nothing was stored under 'bob' (identities are exact: case, spaces and accents "
        "count; an lk-... id from the logs needs --stored-id). The request is recorded.\n"
    )
