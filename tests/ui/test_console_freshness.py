"""How fresh the console's pages are, over fake-gcs-server: the tables page is served from the last
reading of every table, renewed in the background and never older than its bound; an action reads
its table afresh before it acts, whatever the tables page showed, and its row afresh after."""

from __future__ import annotations

import dataclasses
import re
import time

from starlette.testclient import TestClient

from tests.cli.conftest import World
from tests.ui.conftest import TOKEN, client_of, console_of
from tests.ui.test_console_app import HEAD, blocked, lock_of, text_of
from turnstile.state.records import LockState
from turnstile.store.gcs import GcsStore


def row_of(page: str, table: str = "sales.orders") -> str:
    found = re.search(rf'<tr data-table="{re.escape(table)}">(.*?)</tr>', page, re.S)
    assert found is not None, page
    return text_of(found.group(1))


def client(world: World, *, every: float, max_age: float) -> TestClient:
    console = console_of(world.store)  # type: ignore[arg-type]
    return client_of(dataclasses.replace(console, refresh_seconds=every, max_age_seconds=max_age))


def test_the_tables_page_says_how_old_its_reading_is(world: World) -> None:
    world.queue(HEAD)
    page = client(world, every=10, max_age=30).get("/")
    assert page.status_code == 200
    assert re.search(r"as of \d+s ago", text_of(page.text)), text_of(page.text)
    assert "the tables are read again every 10s" in page.text


def test_a_change_in_the_bucket_shows_once_the_reading_is_older_than_its_bound(world: World) -> None:
    world.queue(HEAD)
    console = client(world, every=3600, max_age=0.5)  # renewed only when a page finds it too old
    assert "BLOCKED" not in row_of(console.get("/").text)
    blocked(world)  # after the reading
    time.sleep(0.6)
    shown = console.get("/").text
    assert "BLOCKED" in row_of(shown)
    assert "as of 0s ago" in text_of(shown)


def test_the_reading_is_renewed_in_the_background(world: World) -> None:
    world.queue(HEAD)
    console = client(world, every=0.2, max_age=60)
    assert "BLOCKED" not in row_of(console.get("/").text)
    blocked(world)
    deadline = time.monotonic() + 10
    while "BLOCKED" not in row_of(console.get("/").text):
        assert time.monotonic() < deadline, "the change never showed"
        time.sleep(0.1)


def test_an_action_reads_its_table_afresh_before_and_after_whatever_the_tables_page_showed(
    world: World,
) -> None:
    blocked(world)
    console = client(world, every=3600, max_age=3600)  # the tables page shows its first reading
    shown = world.lock_generation()
    assert "BLOCKED" in row_of(console.get("/").text)
    world.fail(HEAD, error="failed again")  # the lock changes behind the console's back
    now = world.lock_generation()
    assert now != shown
    confirm = console.get(f"/confirm/unlock?table=sales/orders&expect_generation={shown}")
    assert confirm.status_code == 409  # the confirmation reads the lock: not the one shown
    form = {"token": TOKEN, "table": "sales/orders", "expect_generation": str(shown)}
    refused = console.post("/act/unlock", data=form)
    assert refused.status_code == 409
    assert f"the lock is at generation {now}, not {shown}" in text_of(refused.text)
    assert lock_of(world).state is LockState.FAILED
    done = console.post("/act/unlock", data=form | {"expect_generation": str(now)})
    assert done.status_code == 200, done.text
    assert lock_of(world).state is LockState.FREE
    after = row_of(console.get("/").text)  # the same reading, but the table's row read afresh
    assert "BLOCKED" not in after and "FREE" in after


def test_a_table_page_is_read_afresh_and_renews_the_tables_row(world: World) -> None:
    world.queue(HEAD)
    console = client(world, every=3600, max_age=3600)
    assert "BLOCKED" not in row_of(console.get("/").text)
    blocked(world)
    page = console.get("/table/sales/orders")
    assert page.status_code == 200 and "BLOCKED" in text_of(page.text)
    assert "BLOCKED" in row_of(console.get("/").text)


def test_a_listed_reading_serves_the_tables_page_as_the_per_table_one(
    gcs_store: GcsStore, world: World
) -> None:
    """One listing of the whole prefix (`turnstile ui` on the local stack) shows what one listing
    per table shows."""
    blocked(world)
    apart = client(world, every=10, max_age=30).get("/").text
    console = dataclasses.replace(console_of(gcs_store), one_listing=True)
    together = client_of(console).get("/").text
    assert without_ages(row_of(together)) == without_ages(row_of(apart))
    assert "BLOCKED" in row_of(together)


def without_ages(row: str) -> str:
    """The row with its ages (`0s`, `4m12s`) blanked: two readings a second apart age by it."""
    return re.sub(r"\b\d+[dhms](\d+[hms])?\b", "AGE", row)


def test_a_table_page_reads_the_tables_own_config_afresh(world: World) -> None:
    """The levels above the table come from the tables page's reading (younger than its bound);
    the table's own `_config/` is read again with its objects."""
    world.store.write("_config/load.json", b'{"format": "csv", "max_batches_per_job": 3}')
    world.queue(HEAD)
    console = client(world, every=3600, max_age=3600)
    assert console.get("/").status_code == 200  # the reading, with the levels it read
    world.store.write("sales/orders/_config/load.json", b'{"max_batches_per_job": 7}')  # since
    page = console.get("/table/sales/orders").text
    resolved = re.search(r'<pre id="resolved-config">(.*?)</pre>', page, re.S)
    assert resolved is not None
    assert '"max_batches_per_job": 7' in text_of(resolved.group(1))
