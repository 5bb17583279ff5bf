"""`turnstile ui` as a command: it prints a URL on 127.0.0.1 with a token, serves the local stack's
bucket to that token only, is read-only when asked, stops on Ctrl-C, and says so when its port is
taken."""

from __future__ import annotations

import socket
from pathlib import Path

import requests

from tests.cli.conftest import Run, World, one_error_line
from tests.ui.process import ConsoleProcess, read_through
from turnstile.local.stackinfo import StackInfo


def test_it_serves_the_stack_bucket_on_loopback_to_its_token_only(
    stack: StackInfo, world: World, tmp_path: Path
) -> None:
    world.queue("incremental/2024/05/01/13")
    world.fail("incremental/2024/05/01/13")
    console = ConsoleProcess([], {"TURNSTILE_HOME": stack.home}, tmp_path / "ui.log")
    try:
        assert console.base.startswith("http://127.0.0.1:")
        assert len(console.token) >= 24
        assert requests.get(f"{console.base}/", timeout=10).status_code == 403
        with requests.Session() as browser:
            page = browser.get(console.url, timeout=30)  # the token moves to a cookie
            assert page.status_code == 200, page.text
            assert page.url == f"{console.base}/"
            assert f"gs://{stack.bucket} on the local stack at {stack.storage_url}" in page.text
            rows = read_through(browser, console.base, page.text)
            assert "sales.orders" in rows and ">BLOCKED<" in rows
    finally:
        code = console.stop()
    assert code == 0, console.output()


def test_read_only_is_said_on_every_page(stack: StackInfo, world: World, tmp_path: Path) -> None:
    world.queue("incremental/2024/05/01/13")
    console = ConsoleProcess(["--read-only"], {"TURNSTILE_HOME": stack.home}, tmp_path / "ui.log")
    try:
        with requests.Session() as browser:
            page = browser.get(console.url, timeout=30)
            assert "Read-only: started with --read-only" in page.text
    finally:
        console.stop()


def test_a_port_in_use_is_refused_in_one_line(run: Run, world: World) -> None:
    del world
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = run("ui", "--port", str(port))
    assert result.exit_code == 2
    line = one_error_line(result)
    assert f"cannot listen on 127.0.0.1:{port}" in line and "--port" in line
