"""Issue 40: the page served as docs/web.md says to serve it off the machine, behind a
TLS-terminating proxy: Debian's nginx on loopback, started here with a configuration and
a self-signed certificate of this test's own, in front of the real server; headless
Chromium logs in, forgets a user and logs out through it. Before, every form answered 403
(the browser's `Origin: https://...` against the server's `http://...`) and the session
cookie was never `Secure`.

nginx runs as whoever runs the tests, in the foreground (`daemon off`, one process:
`master_process off`), with every path it writes (pid, logs, temporary files) in the
test's directory, so no root and no system file is needed. `.ci/run` installs nginx and
openssl where missing; on a developer's machine without them the test is skipped.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.pgbouncer import free_port
from memory.storage.store import MemoryStore
from memory.web import security
from tests.web.conftest import SECRET, Web, follow, start_web

CONFIG = """
daemon off;
master_process off;
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 64; }}
http {{
  access_log off;
  client_body_temp_path {dir}/body;
  proxy_temp_path {dir}/proxy;
  fastcgi_temp_path {dir}/fastcgi;
  uwsgi_temp_path {dir}/uwsgi;
  scgi_temp_path {dir}/scgi;
  server {{
    listen 127.0.0.1:{port} ssl;
    ssl_certificate {dir}/cert.pem;
    ssl_certificate_key {dir}/key.pem;
    location / {{
      proxy_pass http://127.0.0.1:{upstream};
      proxy_set_header Host $host;
      proxy_set_header X-Forwarded-Proto $scheme;
      proxy_set_header X-Forwarded-Host $http_host;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
    }}
  }}
}}
"""


def _binary(name: str, *candidates: str) -> str | None:
    for path in (shutil.which(name), *candidates):
        if path and os.access(path, os.X_OK):
            return path
    return None


@pytest.fixture
def tls_proxy(tmp_path: Path) -> Iterator[Any]:
    """A function that starts nginx with TLS on a free loopback port in front of a URL,
    and returns the proxy's https:// URL; stopped after the test."""
    nginx, openssl = _binary("nginx", "/usr/sbin/nginx"), _binary("openssl", "/usr/bin/openssl")
    if nginx is None or openssl is None:
        if os.environ.get("TESTS_REQUIRE_BROWSER"):
            pytest.fail("nginx and openssl are needed: apt-get install -y nginx openssl (.ci/run does)")
        pytest.skip("no nginx or openssl on this machine (apt-get install -y nginx openssl)")
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(tmp_path / "key.pem"), "-out", str(tmp_path / "cert.pem")],
        check=True, capture_output=True,
    )  # fmt: skip
    started: list[subprocess.Popen[bytes]] = []

    def start(upstream_url: str) -> str:
        upstream = int(upstream_url.rsplit(":", 1)[1])
        for _attempt in range(5):  # a free port may be taken between the look and nginx's bind
            port = free_port()
            (tmp_path / "nginx.conf").write_text(CONFIG.format(dir=tmp_path, port=port, upstream=upstream))
            proc = subprocess.Popen(
                [nginx, "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf"), "-e", str(tmp_path / "error.log")],
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            )  # fmt: skip
            started.append(proc)
            deadline = time.monotonic() + 30
            while proc.poll() is None and time.monotonic() < deadline:  # until it accepts, or has exited
                with socket.socket() as sock:
                    if sock.connect_ex(("127.0.0.1", port)) == 0:
                        return f"https://127.0.0.1:{port}"
                time.sleep(0.05)
            log = (tmp_path / "error.log").read_text() if (tmp_path / "error.log").exists() else ""
            if "Address already in use" not in log:
                raise RuntimeError(f"nginx did not start: {log[-2000:]}")
        raise RuntimeError("nginx found no free port in 5 tries")

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(10)
        if proc.stderr is not None:
            proc.stderr.close()


async def test_login_forget_and_logout_work_in_a_browser_behind_a_tls_proxy(
    browser: Any, tls_proxy: Any, store: MemoryStore, user_id: str, tmp_path: Path
) -> None:
    server: Web = await start_web(store, tmp_path / "journal", trusted_proxies=("127.0.0.1/32",))
    context = None
    try:
        public = tls_proxy(server.url)
        store.add_raw(user_id, "I keep bees on the roof")
        context = await browser.new_context(ignore_https_errors=True)  # the test's own certificate
        page = await context.new_page()

        await page.goto(f"{public}/user?id={user_id}")
        assert page.url.startswith(f"{public}/login?next="), page.url
        await page.fill("input[name=secret]", SECRET)
        await follow(page, "form.login button[type=submit]")
        assert page.url == f"{public}/user?id={user_id}", (page.url, await page.inner_text("body"))
        (cookie,) = [c for c in await context.cookies() if c["name"] == security.SESSION_COOKIE]
        assert cookie["secure"] and cookie["httpOnly"] and cookie["sameSite"] == "Strict"

        await follow(page, "text=Forget this user…")
        await page.fill("input[name=confirm]", user_id)
        await follow(page, "form.forget button[type=submit]")
        assert await page.is_visible("#nothing-left"), await page.inner_text("main")
        assert store.list_user(user_id) == []

        await follow(page, "header form button[type=submit]")  # log out
        assert page.url.startswith(f"{public}/login"), page.url
        assert not [c for c in await context.cookies() if c["name"] == security.SESSION_COOKIE]
        await page.goto(f"{public}/store")
        assert page.url.startswith(f"{public}/login?next="), page.url  # the session is gone
    finally:
        if context is not None:
            await context.close()
        await server.runner.cleanup()
