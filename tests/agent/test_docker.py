"""The worker image keeps memories on its volume whatever the `--env-file` says. No image can
be built here (no Docker engine): the test reads the Dockerfile's last stage (its ENV, WORKDIR
and VOLUME), lays `.env.example` over it as `docker run --env-file .env` does, and resolves
the data directory as the worker would, in a copy of the container's directories."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from dotenv import dotenv_values

import memory.settings.process as settings_mod
from memory.settings import load_settings

ROOT = Path(__file__).resolve().parents[2]


def _last_stage() -> dict[str, object]:
    """ENV (name -> value), the last WORKDIR and the VOLUMEs of the Dockerfile's last stage."""
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    stage = re.split(r"^FROM .*$", text, flags=re.M)[-1]
    env: dict[str, str] = {}
    workdir, volumes = "/", []
    for line in stage.splitlines():
        word, _, rest = line.strip().partition(" ")
        if word == "ENV":
            env.update(dict(part.split("=", 1) for part in shlex.split(rest)))
        elif word == "WORKDIR":
            workdir = rest.strip()
        elif word == "VOLUME":
            volumes += re.findall(r'"([^"]+)"', rest) or rest.split()
    return {"env": env, "workdir": workdir, "volumes": volumes}


@pytest.mark.parametrize(
    "env_file",
    [
        ".env.example",  # cp .env.example .env, as the README says: MEMORY_DATA_DIR=.data
        "MEMORY_DATA_DIR=\n",  # emptied
        "MEMORY_DATA_DIR=data/memories\n",  # another relative path
        "",  # a file without the variable
    ],
)
def test_the_image_keeps_memories_on_its_volume_whatever_the_env_file_says(
    env_file: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    image = _last_stage()
    assert image["volumes"] == ["/data"]
    container = tmp_path / "container"  # the container's / here
    workdir = container / str(image["workdir"]).lstrip("/")
    workdir.mkdir(parents=True, exist_ok=True)
    text = (ROOT / ".env.example").read_text() if env_file == ".env.example" else env_file
    (tmp_path / "env").write_text(text)
    env = {**image["env"], **{k: v or "" for k, v in dotenv_values(tmp_path / "env").items()}}  # --env-file wins
    env = {k: v for k, v in env.items() if v.strip()}  # an empty variable means its default (load_env_file)
    if env.get("MEMORY_DATA_DIR", "").startswith("/"):
        env["MEMORY_DATA_DIR"] = str(container / env["MEMORY_DATA_DIR"].lstrip("/"))
    monkeypatch.chdir(workdir)  # the worker runs in the image's WORKDIR, with no .env of its own
    monkeypatch.setattr(settings_mod, "_env_file", None)
    data_dir = load_settings(env, dotenv=False).data_dir
    volume = container / "data"
    assert data_dir == volume or volume in data_dir.parents, (env_file, data_dir)
