"""`turnstile status` for tables with dependencies: the watermark, its lag, and what a WAITING
table's head batch waits for (text and JSON)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from tests.cli.conftest import Run, World
from turnstile.names.paths import parse_success
from turnstile.protocol import publisher
from turnstile.state.records import Watermark

MARK = datetime(2024, 5, 1, 13, tzinfo=UTC)


def dependent_waiting(world: World) -> None:
    """sales.orders waits for web.clicks, whose watermark is 13:00: hour 13 needs 14:00."""
    world.store.write("web/clicks/_config/load.json", b'{"natural_time": "hourly"}')
    mark = Watermark(watermark=MARK, rel="2024/05/01/12", updated_at=MARK)
    world.store.write("web/clicks/_turnstile/watermark.json", mark.encode())
    load = {"natural_time": "hourly", "depends_on": ["web.clicks"]}
    world.store.write("sales/orders/_config/load.json", json.dumps(load).encode())
    world.store.write("sales/orders/_config/ORDERME", b"")
    generation = world.upload("incremental/2024/05/01/13")
    batch = parse_success(
        world.store.bucket, f"{world.table.batch_folder('incremental/2024/05/01/13')}_SUCCESS"
    )
    publisher.queue(world.inv, batch, generation)  # queued, no subscriber: it would only wait


def test_json_shows_the_watermark_its_lag_and_the_wait(run: Run, world: World) -> None:
    dependent_waiting(world)
    before = (datetime.now(UTC) - MARK).total_seconds()
    result = run("status", "--output", "json")
    found = {t["table"]: t for t in json.loads(result.stdout)["tables"]}
    orders, clicks = found["sales.orders"], found["web.clicks"]
    assert orders["health"] == "WAITING"
    assert orders["waiting_for"] == [
        "web/clicks to reach 2024-05-01T14:00:00+00:00 (its watermark: 2024-05-01T13:00:00+00:00)"
    ]
    assert orders["watermark"] is None  # nothing committed yet
    assert clicks["watermark"] == MARK.isoformat()
    assert before <= clicks["watermark_lag_seconds"] <= before + 60


def test_text_says_what_the_head_batch_waits_for(run: Run, world: World) -> None:
    dependent_waiting(world)
    out = run("status").stdout
    assert (
        "sales.orders: batch 'incremental/2024/05/01/13' waits for web/clicks to reach "
        "2024-05-01T14:00:00+00:00 (its watermark: 2024-05-01T13:00:00+00:00)"
    ) in out
    clicks = next(line for line in out.splitlines() if line.startswith("web.clicks "))
    assert "2024-05-01 13:00:00" in clicks
