"""The operator console in a real browser: Chromium (Debian's `chromium`, driven through Playwright's
Python API, never a downloaded browser) against `turnstile ui` serving a local stack with real
batches: fake-gcs-server, the function hosts, local Spark writing Iceberg.

One stack, one console process and one browser for the module; the tests run in order over one
story: a bad batch blocks `shop.orders`, the tables page and the table page show it, the lineage
graph shows `mart.climate` waiting for a sensor, a batch folder named `<script>` shows as text, a
POST without the token changes nothing, and confirming the unlock in the page applies the fixed
batch (read back from Iceberg). With SCREENSHOTS=<folder> each page is saved there as a PNG
(`make screenshots` writes docs/ui-*.png)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.ui.process import ConsoleProcess
from turnstile.local.bridge import wait_until
from turnstile.local.stack import Stack, StackOptions
from turnstile.state.records import Lock, LockState
from turnstile.store.gcs import GcsStore, make_client

pytestmark = [pytest.mark.spark, pytest.mark.slow]

CHROMIUM = Path("/usr/bin/chromium")
# No download, no network: the system browser, headless, with a profile of its own.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOTS = os.environ.get("SCREENSHOTS")  # a folder: save each page there
ORDERS = "shop/orders"
CLIMATE_SQL = """SELECT t.ts, t.celsius, h.percent
FROM ${catalog}.sensors.temp t JOIN ${catalog}.sensors.humidity h ON t.ts = h.ts
WHERE t.ts >= ${window_start} AND t.ts < ${window_end}"""


def _playwright() -> Any:
    if not CHROMIUM.exists():
        pytest.skip(
            f"no browser at {CHROMIUM}: install Debian's chromium (make setup does: .ci/system-deps.sh)"
        )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("Playwright is not installed: pip install -r requirements.txt")
    return sync_playwright


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, warehouse: Path, iceberg_jars: list[Path]
) -> Iterator[Stack]:
    _playwright()  # skip before starting anything when there is no browser
    running = Stack(
        StackOptions(
            home=tmp_path_factory.mktemp("console-stack"),
            sweep_every=10,
            environment={"ICEBERG_CATALOG": "local", "ICEBERG_WAREHOUSE": str(warehouse)},
        )
    )
    running.start()
    yield running
    running.stop()


def _store(stack: Stack) -> GcsStore:
    assert stack.info is not None
    return GcsStore(make_client("local", stack.info.storage_url), stack.info.bucket)


def _lock(store: GcsStore, table: str) -> Lock:
    found = store.read(f"{table}/_bqlock")
    return Lock() if found is None else Lock.decode(found.data, table)


def _put(store: GcsStore, folder: str, csv: str) -> None:
    store.write(f"{folder}/part-0.csv", csv.encode())
    store.write(f"{folder}/_SUCCESS", b"")


@pytest.fixture(scope="module")
def story(stack: Stack) -> GcsStore:
    """The bucket after a bad batch, a late sensor and a hostile folder name."""
    store = _store(stack)
    store.write(f"{ORDERS}/_config/ORDERME", b"")
    store.write(f"{ORDERS}/_config/load.json", json.dumps({"schema": "order_id INT, amount DOUBLE"}).encode())
    for table, column in (("sensors/temp", "celsius"), ("sensors/humidity", "percent")):
        store.write(f"{table}/_config/ORDERME", b"")
        load = {"schema": f"ts TIMESTAMP, {column} DOUBLE", "natural_time": "hourly"}
        store.write(f"{table}/_config/load.json", json.dumps(load).encode())
    climate = {
        "derived": {"step": "1h", "start": "2024-05-01T10:00:00Z"},
        "depends_on": ["sensors.temp", "sensors.humidity"],
    }
    store.write("mart/climate/_config/ORDERME", b"")
    store.write("mart/climate/_config/load.json", json.dumps(climate).encode())
    store.write("mart/climate/_config/transform.sql", CLIMATE_SQL.encode())
    _put(store, f"{ORDERS}/2024/05/01/10", "order_id,amount\n101,5.0\n102,7.5\n")
    _put(store, "sensors/temp/2024/05/01/10", "ts,celsius\n2024-05-01 10:00:00,21.5\n")
    _put(store, "web/clicks/<script>", "user,page\nu1,/home\n")  # a folder name that is markup
    assert wait_until(lambda: _lock(store, ORDERS).position == "2024/05/01/10", 300, 1), (
        f"lock {_lock(store, ORDERS)}; see {stack.home / 'logs'}"
    )
    _put(store, f"{ORDERS}/2024/05/01/11", "order_id,amount\n201,not-a-number\n")
    assert wait_until(lambda: _lock(store, ORDERS).state is LockState.FAILED, 300, 1), (
        f"lock {_lock(store, ORDERS)}; see {stack.home / 'logs'}"
    )
    assert wait_until(lambda: bool(store.list_objects("web/clicks/_turnstile/results/")), 300, 1)
    assert wait_until(lambda: bool(store.read("sensors/temp/_turnstile/watermark.json")), 300, 1)
    return store


@pytest.fixture(scope="module")
def console(
    stack: Stack, story: GcsStore, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ConsoleProcess]:
    del story
    assert stack.info is not None
    environment = {"TURNSTILE_HOME": stack.info.home}
    running = ConsoleProcess([], environment, tmp_path_factory.mktemp("console") / "ui.log")
    yield running
    assert running.stop() == 0, running.output()


@pytest.fixture(scope="module")
def browser(console: ConsoleProcess) -> Iterator[Any]:
    """One Chromium for the module, signed in through the URL `turnstile ui` printed."""
    sync_playwright = _playwright()
    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            profile,
            executable_path=str(CHROMIUM),
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1360, "height": 900},
        )
        page = context.new_page()
        page.dialogs = []
        page.on("dialog", lambda dialog: (page.dialogs.append(dialog.message), dialog.dismiss()))
        page.goto(console.url)
        yield page
        context.close()
    shutil.rmtree(profile, ignore_errors=True)


def _shot(page: Any, name: str) -> None:
    if SCREENSHOTS:
        Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SCREENSHOTS) / f"ui-{name}.png"), full_page=True)


def test_the_tables_page_lists_the_blocked_table(browser: Any, console: ConsoleProcess) -> None:
    page = browser
    assert page.url == f"{console.base}/"  # the token left the address bar for a cookie
    row = page.locator('tr[data-table="shop.orders"]')
    assert row.locator(".badge").inner_text() == "BLOCKED"
    assert "2024/05/01/11" in row.inner_text()  # the head it is blocked on
    assert page.locator('tr[data-table="mart.climate"] .badge').inner_text() == "WAITING"
    _shot(page, "tables")


def test_the_table_page_shows_the_failure_and_the_unlock_command(
    browser: Any, console: ConsoleProcess, story: GcsStore
) -> None:
    page = browser
    page.locator('tr[data-table="shop.orders"] a').click()
    page.wait_for_url(f"{console.base}/table/shop/orders")
    failure = page.locator("#failure")
    assert "Blocked at batch 2024/05/01/11" in failure.inner_text()
    assert "not-a-number" in page.locator("#lock-error").inner_text()
    generation = story.stat(f"{ORDERS}/_bqlock")
    assert generation is not None
    assert page.locator("#cmd-unlock").inner_text() == (
        f"turnstile unlock gs://{story.bucket}/{ORDERS} --expect-generation {generation.generation}"
    )
    assert page.locator('g.batch[data-rel="2024/05/01/11"]').get_attribute("data-state") == "BLOCKED"
    assert page.locator('g.batch[data-rel="2024/05/01/10"]').get_attribute("data-state") == "COMMITTED"
    _shot(page, "table")


def test_the_lineage_graph_shows_the_mart_waiting_for_a_sensor(browser: Any, console: ConsoleProcess) -> None:
    page = browser
    page.goto(f"{console.base}/lineage")
    waiting = page.locator('g.edge-label[data-source="sensors/humidity"][data-dependent="mart/climate"]')
    said = waiting.text_content() or ""  # SVG: its text, not an HTML element's innerText
    assert "waits for 2024-05-01 11:00" in said and "wm none yet" in said
    edge = page.locator('path.edge[data-source="sensors/humidity"][data-dependent="mart/climate"]')
    assert "waiting" in (edge.get_attribute("class") or "")
    temp = page.locator('g.edge-label[data-source="sensors/temp"][data-dependent="mart/climate"]')
    said = temp.text_content() or ""
    assert "wm 2024-05-01 11:00" in said and "waits for" not in said
    assert "WAITING" in (page.locator('g.node[data-table="mart.climate"]').text_content() or "")
    _shot(page, "lineage")


def test_a_folder_named_script_is_shown_as_text(browser: Any, console: ConsoleProcess) -> None:
    page = browser
    page.goto(f"{console.base}/table/web/clicks")
    assert page.locator('#history tr[data-rel="<script>"] td').first.inner_text() == "<script>"
    assert page.locator("script").count() == 1  # the console's own, nothing the name injected
    assert page.dialogs == []


def test_a_post_without_the_token_is_refused(browser: Any, console: ConsoleProcess, story: GcsStore) -> None:
    page = browser
    before = story.stat(f"{ORDERS}/_bqlock")
    assert before is not None
    form = {"table": ORDERS, "expect_generation": str(before.generation)}
    # The browser's own cookie, no token in the form: what a page that forges the form would send.
    forged = page.context.request.post(f"{console.base}/act/unlock", form=form)
    assert forged.status == 403
    # A page of another origin submitting the same form, the token guessed.
    page.set_content(
        f'<form method="post" action="{console.base}/act/unlock">'
        f'<input name="table" value="{ORDERS}"><input name="token" value="guess">'
        f'<input name="expect_generation" value="{before.generation}"></form>'
    )
    with page.expect_navigation():
        page.evaluate("document.forms[0].submit()")
    assert "refused" in page.locator("body").inner_text()
    assert requests.post(f"{console.base}/act/unlock", data=form, timeout=10).status_code == 403
    after = story.stat(f"{ORDERS}/_bqlock")
    assert after is not None and after.generation == before.generation


def test_confirming_unlock_in_the_page_applies_the_fixed_batch(
    browser: Any, console: ConsoleProcess, story: GcsStore, stack: Stack, spark: Any
) -> None:
    from playwright.sync_api import expect

    page = browser
    story.write(f"{ORDERS}/2024/05/01/11/part-0.csv", b"order_id,amount\n201,6.0\n")  # the fix
    page.goto(f"{console.base}/table/shop/orders")
    page.locator("#failure a.button.primary").click()
    effects = page.locator("#effects").inner_text()
    assert "unlock releases the lock; batch '2024/05/01/11' is applied again" in effects
    _shot(page, "confirm")
    page.locator("#confirm").click()
    assert "released the FAILED lock" in page.locator("#done").inner_text()
    assert wait_until(
        lambda: (
            _lock(story, ORDERS).state is LockState.FREE and _lock(story, ORDERS).position == "2024/05/01/11"
        ),
        300,
        1,
    ), f"lock {_lock(story, ORDERS)}; see {stack.home / 'logs'}"
    rows = sorted(tuple(r) for r in spark.sql("SELECT order_id, amount FROM local.shop.orders").collect())
    assert rows == [(101, 5.0), (102, 7.5), (201, 6.0)]
    # The tables page follows without a reload: its rows are fetched again in place.
    page.goto(f"{console.base}/")
    page.evaluate("document.body.dataset.loaded = 'yes'")  # gone if the page reloaded
    page.locator("#refresh-now").click()
    # A locator assertion polls without evaluating a string: the page's CSP forbids eval.
    expect(page.locator('tr[data-table="shop.orders"]')).not_to_contain_text("BLOCKED", timeout=30_000)
    assert page.evaluate("document.body.dataset.loaded") == "yes"
