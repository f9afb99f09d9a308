"""A loopback TCP proxy that delays every packet: a database "on another machine".

`python -m harness.netdelay --upstream unix:/path/to/socket --rtt-ms 2` listens on a free
port of 127.0.0.1, prints it, and forwards each connection to the upstream (a Unix socket,
as the embedded Postgres has, or `host:port`), holding every chunk of bytes for half the
round trip in each direction. Order is kept per direction and chunks do not wait for each
other (a stream of rows pays the delay once, not once per chunk), as on a network whose
latency, not its bandwidth, is the cost.

It runs in a process of its own (`DelayProxy`): in the process it measures, its event loop
and the GIL would add delays of their own to whatever the benchmark times.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from types import TracebackType


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay_s: float) -> None:
    """Copy reader to writer, each chunk written `delay_s` after it was read."""
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def send() -> None:
        while True:
            due, chunk = await queue.get()
            if not chunk:
                break
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(chunk)
            await writer.drain()
        with contextlib.suppress(OSError):
            writer.write_eof()

    sender = asyncio.create_task(send())
    try:
        while chunk := await reader.read(65536):
            queue.put_nowait((time.monotonic() + delay_s, chunk))
    except OSError:
        pass
    finally:
        queue.put_nowait((0.0, b""))
        with contextlib.suppress(OSError, asyncio.CancelledError):
            await sender


async def _open_upstream(upstream: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    if upstream.startswith("unix:"):
        return await asyncio.open_unix_connection(upstream.removeprefix("unix:"))
    host, _, port = upstream.rpartition(":")
    return await asyncio.open_connection(host, int(port))


async def serve(upstream: str, rtt_ms: float, port: int = 0, ready: asyncio.Future[int] | None = None) -> None:
    """Listen on 127.0.0.1:`port` (0: a free one) and forward to `upstream` for ever."""
    one_way = rtt_ms / 2000.0

    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            up_r, up_w = await _open_upstream(upstream)
        except OSError:
            client_w.close()
            return
        await asyncio.gather(_pipe(client_r, up_w, one_way), _pipe(up_r, client_w, one_way))
        for w in (client_w, up_w):
            w.close()

    server = await asyncio.start_server(handle, "127.0.0.1", port)
    bound = server.sockets[0].getsockname()[1]
    if ready is not None:
        ready.set_result(bound)
    else:
        print(bound, flush=True)
    async with server:
        await server.serve_forever()


class DelayProxy:
    """The proxy in a child process: `with DelayProxy("unix:/sock", 2.0) as p: p.port`."""

    def __init__(self, upstream: str, rtt_ms: float) -> None:
        self.upstream = upstream
        self.rtt_ms = rtt_ms
        self.port = 0
        self._proc: subprocess.Popen[str] | None = None

    def start(self) -> DelayProxy:
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "harness.netdelay", "--upstream", self.upstream, "--rtt-ms", str(self.rtt_ms)],
            stdout=subprocess.PIPE,
            text=True,
            cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        )
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline().strip()
        if not line.isdigit():
            self.stop()
            raise RuntimeError(f"the delay proxy did not start (said {line!r})")
        self.port = int(line)
        return self

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None

    def __enter__(self) -> DelayProxy:
        return self.start()

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--upstream", required=True, help="unix:/path/to/socket or host:port")
    parser.add_argument("--rtt-ms", type=float, default=0.0, help="added round trip, milliseconds")
    parser.add_argument("--port", type=int, default=0, help="port to listen on (0: a free one, printed)")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))  # nothing to flush: the bytes in flight go
    parent = os.getppid()

    def orphaned() -> None:  # the benchmark that started it was killed: no proxy left behind
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=orphaned, daemon=True).start()
    asyncio.run(serve(args.upstream, args.rtt_ms, args.port))


if __name__ == "__main__":
    main()
