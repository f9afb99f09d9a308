"""The token command: a newcomer joins as the same identity every time."""

from __future__ import annotations

import json

import pytest
from livekit import api

from memory.livekit import token as token_cmd
from memory.settings import ConfigError, livekit_credentials

ENV = {"LIVEKIT_URL": "wss://example.livekit.cloud", "LIVEKIT_API_KEY": "APIkey", "LIVEKIT_API_SECRET": "s" * 40}


@pytest.fixture
def project_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in ENV.items():
        monkeypatch.setenv(name, value)


def test_the_token_joins_as_the_given_identity(project_env: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert token_cmd.main(["alice", "--room", "r1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    claims = api.TokenVerifier(ENV["LIVEKIT_API_KEY"], ENV["LIVEKIT_API_SECRET"]).verify(out["token"])
    assert claims.identity == "alice"
    assert claims.video.room == "r1" and claims.video.room_join
    assert out["url"] == ENV["LIVEKIT_URL"]


def test_each_run_is_a_new_room_for_the_same_identity(project_env: None, capsys: pytest.CaptureFixture[str]) -> None:
    rooms = []
    for _ in range(2):
        assert token_cmd.main(["alice", "--json"]) == 0
        rooms.append(json.loads(capsys.readouterr().out)["room"])
    assert rooms[0] != rooms[1]


def test_the_printed_link_carries_url_and_token(project_env: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert token_cmd.main(["bob", "--room", "r2"]) == 0
    out = capsys.readouterr().out
    assert "https://meet.livekit.io/custom?liveKitUrl=wss%3A%2F%2Fexample.livekit.cloud&token=ey" in out


def test_missing_credentials_are_named() -> None:
    with pytest.raises(ConfigError, match="LIVEKIT_API_KEY, LIVEKIT_API_SECRET"):
        livekit_credentials({"LIVEKIT_URL": "wss://x"})


@pytest.mark.parametrize("bad", ["", "  ", " alice"])
def test_a_blank_or_padded_identity_is_refused(project_env: None, bad: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert token_cmd.main([bad]) == 2
    assert "identity" in capsys.readouterr().err
