"""Serving the console: uvicorn on a socket bound to 127.0.0.1 only, its URL (with the token)
said once the socket listens, the browser opened on it if asked."""

from __future__ import annotations

import socket
import threading
import webbrowser
from collections.abc import Callable

import uvicorn
from starlette.applications import Starlette

from turnstile.core.errors import SettingsError

HOST = "127.0.0.1"  # loopback only: nothing else on the network reaches the console


def bind(port: int) -> socket.socket:
    """A listening socket on HOST:port (0: any free port); SettingsError when the port is taken."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, port))
    except OSError as exc:
        sock.close()
        raise SettingsError(
            f"cannot listen on {HOST}:{port} ({exc.strerror}); pass another --port (0: any free one)"
        ) from exc
    sock.listen(64)  # connections wait here until the server takes them
    return sock


def url_of(sock: socket.socket, token: str) -> str:
    return f"http://{HOST}:{sock.getsockname()[1]}/?token={token}"


def run(
    app: Starlette,
    sock: socket.socket,
    url: str,
    *,
    say: Callable[[str], None],
    open_browser: bool = False,
) -> None:
    """Serve until interrupted (Ctrl-C)."""
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", server_header=False)
    server = uvicorn.Server(config)
    say(f"the turnstile console is at {url}")
    say("(it answers on this machine only, to that URL's token; Ctrl-C stops it)")
    if open_browser:
        threading.Timer(0.5, webbrowser.open, args=(url,)).start()
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:  # uvicorn raises the Ctrl-C again once it has shut down
        pass
    say("stopped")
