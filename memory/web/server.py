"""Start the operator's web server with the worker's own configuration (.env) and store.

    uv run python -m memory.web

It refuses to start without `MEMORY_WEB_SECRET` or a store to show (exit 2, naming what
is missing), listens on `MEMORY_WEB_LISTEN` (127.0.0.1:8765 by default)
and prints where. Without LiveKit's variables the pages work and the token endpoint says
which are missing.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from memory.progname import program_name
from memory.settings import ConfigError, LiveKitCredentials, livekit_credentials, load_settings, web_settings

if TYPE_CHECKING:  # loaded once the configuration is known to be complete: a missing
    from aiohttp import web  # secret is said in well under a second, not after LiveKit loads

PROG = program_name("memory-web", "memory.web")


async def serve(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, str]:
    """Start `app` on host:port (0: any free port); the runner and the URL it answers at."""
    from aiohttp import web

    from memory.web.app import PathOnlyAccessLogger

    runner = web.AppRunner(app, access_log_class=PathOnlyAccessLogger, handle_signals=False)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound_host, bound_port = runner.addresses[0][:2]
    shown = f"[{bound_host}]" if ":" in bound_host else bound_host
    return runner, f"http://{shown}:{bound_port}"


def _livekit() -> LiveKitCredentials | str:
    try:
        return livekit_credentials()
    except ConfigError as exc:
        return str(exc)


async def _run(app: web.Application, host: str, port: int, loopback: bool) -> None:
    runner, url = await serve(app, host, port)
    print(f"{PROG}: serving {url}/ (log in with MEMORY_WEB_SECRET); LiveKit token endpoint: POST {url}/api/token",
          flush=True)  # fmt: skip
    if not loopback:
        print(f"{PROG}: listening on {host}, reachable from the network in plain HTTP: serve it behind TLS",
              file=sys.stderr, flush=True)  # fmt: skip
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()


def main(argv: Sequence[str] | None = None) -> int:
    argparse.ArgumentParser(
        prog=PROG, description=__doc__.split("\n\n")[0], epilog="Configured by MEMORY_WEB_* (see .env.example)."
    ).parse_args(argv)
    try:
        web_cfg = web_settings()
        settings = load_settings()
    except ConfigError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    from memory.commands import open_store
    from memory.storage.locate import where

    store, problems = open_store(settings)
    if store is None:
        print(f"{PROG}: no memory store to show:\n  " + "\n  ".join(problems), file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    print(f"{PROG}: memory store {where(settings)}, MEM0_SETTING={settings.mode.value}", flush=True)
    livekit = _livekit()
    if not (web_cfg.token_key or web_cfg.token_operator):
        print(f"{PROG}: POST /api/token mints nothing until MEMORY_WEB_TOKEN_KEY is set (docs/web.md)",
              file=sys.stderr, flush=True)  # fmt: skip
    elif isinstance(livekit, str):
        print(f"{PROG}: POST /api/token answers 503 until the LiveKit project is configured: {livekit}",
              file=sys.stderr, flush=True)  # fmt: skip
    try:
        from memory.web.app import build_app
        from memory.web.views import Operator

        app = build_app(Operator(store, settings), settings, web_cfg, livekit=livekit)
        asyncio.run(_run(app, web_cfg.host, web_cfg.port, web_cfg.loopback))
    finally:
        store.close()
    return 0
