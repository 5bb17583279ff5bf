"""The console's pages while the tables are read, over fake-gcs-server with a store slow to read: the
tables page and the lineage graph answer within their patience, say how far the reading has got
("reading tables: N of M read"), list only the tables read so far (no health for one not read),
and once the reading is done show every table; in Chromium, without a reload."""

from __future__ import annotations

import dataclasses
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import uvicorn
from starlette.testclient import TestClient

from tests.cli.conftest import World
from tests.e2e.test_console_browser import CHROMIUM, CHROMIUM_ARGS
from tests.ui.conftest import TOKEN, client_of, console_of
from tests.ui.test_console_app import HEAD, blocked, text_of
from turnstile.names.paths import Table
from turnstile.store.gcs import GcsStore
from turnstile.store.port import StoredObject
from turnstile.ui import serve
from turnstile.ui.app import create_app

SLOW = "sales/late/"  # the table whose reads wait for the test to let them through
DELAY = 0.05  # every read: a store slow to read
PATIENCE = 0.3
HELD_AT_MOST = 8.0  # the held reads go on by themselves then (a page that waited for them is late)


class SlowStore:
    """The emulator's store, each read `DELAY` seconds late, and those under `SLOW` held until
    `let_through` (or `HELD_AT_MOST` seconds)."""

    def __init__(self, inner: GcsStore) -> None:
        self.inner = inner
        self.through = threading.Event()
        self.held = 0

    def let_through(self) -> None:
        self.through.set()

    def read(self, name: str) -> StoredObject | None:
        time.sleep(DELAY)
        if name.startswith(SLOW):
            self.held += 1
            self.through.wait(HELD_AT_MOST)
        return self.inner.read(name)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.fixture
def slow(gcs_store: GcsStore) -> Iterator[SlowStore]:
    """Four tables: sales.orders BLOCKED, sales.late and two more IDLE (a batch committed)."""
    blocked(World(gcs_store, Table(gcs_store.bucket, "sales/orders", "sales", "orders")))
    for name in ("late", "a", "b"):
        world = World(gcs_store, Table(gcs_store.bucket, f"sales/{name}", "sales", name))
        world.result(HEAD, world.upload(HEAD))
    store = SlowStore(gcs_store)
    yield store
    store.let_through()


def client(store: SlowStore) -> TestClient:
    console = console_of(store)  # type: ignore[arg-type]
    return client_of(dataclasses.replace(console, patience_seconds=PATIENCE, max_age_seconds=3600))


def timed(console: TestClient, path: str) -> tuple[float, str]:
    began = time.monotonic()
    page = console.get(path)
    assert page.status_code == 200, page.text
    return time.monotonic() - began, page.text


def rows(page: str) -> dict[str, str]:
    """Each table row's health word, by table."""
    found = re.findall(r'<tr data-table="([^"]+)">.*?<span class="badge [a-z]+">([A-Z]+)</span>', page, re.S)
    return dict(found)


def test_the_tables_page_answers_while_the_tables_are_read_and_shows_none_unread(slow: SlowStore) -> None:
    console = client(slow)
    seconds, page = timed(console, "/")
    assert seconds < PATIENCE + 1.0, f"the page waited {seconds:.1f} s for the reading"
    said = text_of(page)
    assert re.search(r"reading tables: (\d+ of 4 read|searching for them)", said), said
    assert 'data-reading="' in page  # what makes the page fetch its rows again
    assert "sales.late" not in page  # not read: not shown, healthy or otherwise
    shown = rows(page)
    assert all(health in ("BLOCKED", "IDLE") for health in shown.values()), shown
    deadline = time.monotonic() + 10  # the others are read while the late one is held
    while set(rows(page)) != {"sales.orders", "sales.a", "sales.b"}:
        assert time.monotonic() < deadline, text_of(page)
        seconds, page = timed(console, "/fragment/tables")
        assert seconds < PATIENCE + 1.0
    assert "reading tables: 3 of 4 read" in text_of(page)
    assert rows(page) == {"sales.orders": "BLOCKED", "sales.a": "IDLE", "sales.b": "IDLE"}
    assert "1 BLOCKED 2 IDLE" in text_of(page)  # the counts: of the tables read
    assert "sales.late" not in page
    slow.let_through()
    deadline = time.monotonic() + 10
    while "data-reading" in page:
        assert time.monotonic() < deadline, text_of(page)
        page = console.get("/fragment/tables").text
    assert rows(page) == {
        "sales.orders": "BLOCKED",
        "sales.late": "IDLE",
        "sales.a": "IDLE",
        "sales.b": "IDLE",
    }
    assert "reading tables" not in page and "4 of 4 tables shown" in text_of(page)


def test_the_lineage_page_says_the_tables_are_read_then_draws_the_graph(slow: SlowStore) -> None:
    console = client(slow)
    seconds, page = timed(console, "/lineage")
    assert seconds < PATIENCE + 1.0, f"the page waited {seconds:.1f} s for the reading"
    assert "reading tables:" in text_of(page) and 'data-src="/fragment/lineage"' in page
    assert "data-reading" in page and "depends_on in its load.json" not in page
    slow.let_through()
    deadline = time.monotonic() + 10
    while "data-reading" in page:
        assert time.monotonic() < deadline, text_of(page)
        page = console.get("/fragment/lineage").text
    assert "<html" not in page and "No table under" in text_of(page)  # none has depends_on


@contextmanager
def served(store: SlowStore) -> Iterator[str]:
    """The console served as `turnstile ui` serves it (uvicorn on loopback, no lifespan: the first
    page starts the reading), in a thread; its URL with the token."""
    console = dataclasses.replace(console_of(store), patience_seconds=PATIENCE)  # type: ignore[arg-type]
    sock = serve.bind(0)
    config = uvicorn.Config(create_app(console), log_level="warning", access_log=False, lifespan="off")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield serve.url_of(sock, TOKEN)
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def test_in_a_browser_the_reading_state_turns_into_the_whole_table_without_a_reload(slow: SlowStore) -> None:
    if not CHROMIUM.exists():
        pytest.skip(f"no browser at {CHROMIUM}: install Debian's chromium (make setup does)")
    playwright_api = pytest.importorskip("playwright.sync_api")
    sync_playwright, expect = playwright_api.sync_playwright, playwright_api.expect
    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    try:
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch_persistent_context(
                profile, executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
            )
            page = browser.new_page()
            with served(slow) as url:
                page.goto(url)
                assert "reading tables:" in page.locator("#reading").inner_text()
                assert page.locator('tr[data-table="sales.late"]').count() == 0
                page.evaluate("document.body.dataset.loaded = 'yes'")  # gone if the page reloaded
                # A locator assertion polls without evaluating a string: the page's CSP forbids eval.
                expect(page.locator("tr[data-table]")).to_have_count(3)
                assert "3 of 4 read" in page.locator("#reading").inner_text()
                slow.let_through()
                late = page.locator('tr[data-table="sales.late"] .badge')
                late.wait_for(timeout=15_000)
                assert late.inner_text() == "IDLE"
                assert page.locator("#reading").count() == 0
                assert "4 of 4 tables shown" in page.locator("#counts").inner_text()
                assert page.evaluate("document.body.dataset.loaded") == "yes"
            browser.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)
