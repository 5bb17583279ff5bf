"""A derived hourly fact table end to end: two staged sources arrive out of step through
fake-gcs-server and functions-framework; the fact table waits with the reason `turnstile status`
gives, then catches up in order, one Iceberg commit per step, read back from the warehouse."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from turnstile.cli import app
from turnstile.local.bridge import wait_until
from turnstile.local.stack import Stack, StackOptions
from turnstile.state.records import Lock, LockState
from turnstile.store.gcs import GcsStore, make_client

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SOURCE = {"natural_time": "hourly", "schema": "ts TIMESTAMP, v DOUBLE"}
FACT = {
    "derived": {"step": "1h", "start": "2026-01-01T00:00:00Z"},
    "depends_on": ["stage.orders", "stage.rates"],
    "mode": "overwrite_partitions",
    "partition_by": ["hours(ts)"],
}
FACT_SQL = """
SELECT o.ts, o.v * r.v AS amount
FROM ${catalog}.stage.orders o JOIN ${catalog}.stage.rates r ON date_trunc('HOUR', o.ts) = r.ts
WHERE o.ts >= ${window_start} AND o.ts < ${window_end}
"""


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, warehouse: Path, iceberg_jars: list[Path]
) -> Iterator[Stack]:
    running = Stack(
        StackOptions(
            home=tmp_path_factory.mktemp("derived-stack"),
            sweep_every=10,
            environment={"ICEBERG_CATALOG": "local", "ICEBERG_WAREHOUSE": str(warehouse)},
        )
    )
    running.start()
    yield running
    running.stop()


def _lock(store: GcsStore, table: str) -> Lock:
    found = store.read(f"{table}/_bqlock")
    return Lock() if found is None else Lock.decode(found.data, table)


def _arrive(store: GcsStore, table: str, hour: int, value: float) -> None:
    folder = f"{table}/2026/01/01/{hour:02d}"
    store.write(f"{folder}/part-0.csv", f"ts,v\n2026-01-01 {hour:02d}:00:00,{value}\n".encode())
    store.write(f"{folder}/_SUCCESS", b"")


def _fact_commits(spark: Any) -> list[str]:
    return [
        r[0]
        for r in spark.sql(
            "SELECT summary['turnstile.batch'] FROM local.mart.fact.snapshots ORDER BY committed_at"
        ).collect()
    ]


def test_a_fact_table_waits_for_its_late_source_then_catches_up_in_order_once(
    stack: Stack, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert stack.info is not None
    store = GcsStore(make_client("local", stack.info.storage_url), stack.info.bucket)
    for table in ("stage/orders", "stage/rates"):
        store.write(f"{table}/_config/ORDERME", b"")
        store.write(f"{table}/_config/load.json", json.dumps(SOURCE).encode())
    store.write("mart/fact/_config/ORDERME", b"")
    store.write("mart/fact/_config/load.json", json.dumps(FACT).encode())
    store.write("mart/fact/_config/transform.sql", FACT_SQL.encode())
    for hour in (0, 1, 2):  # orders are complete up to 03:00; rates only up to 01:00
        _arrive(store, "stage/orders", hour, 10.0 * (hour + 1))
    _arrive(store, "stage/rates", 0, 2.0)

    # The subscriber moves the watermark just after it releases the lock: wait for both.
    fact_watermark = "mart/fact/_turnstile/watermark.json"
    assert wait_until(
        lambda: (
            _lock(store, "mart/fact").position == "2026/01/01/00" and store.stat(fact_watermark) is not None
        ),
        300,
        1,
    ), f"lock {_lock(store, 'mart/fact')}; see {stack.home / 'logs'}"
    monkeypatch.setenv("TURNSTILE_HOME", str(stack.home))
    status = CliRunner().invoke(app, ["status", "--output", "json"])
    assert status.exit_code == 0, status.stderr
    tables = {t["table"]: t for t in json.loads(status.stdout)["tables"]}
    # Why the fact table stops at 01:00: rates has reached only 01:00, though orders reached 03:00.
    # No step past its sources is queued; status names what the next one waits for.
    assert tables["mart.fact"]["health"] == "WAITING"
    assert tables["mart.fact"]["waiting_for"] == [
        "next step 2026/01/01/01: stage/rates to reach 2026-01-01T02:00:00+00:00 "
        "(its watermark: 2026-01-01T01:00:00+00:00)"
    ]
    text = CliRunner().invoke(app, ["status"])
    assert "mart.fact: the derived table waits for next step 2026/01/01/01: stage/rates" in text.stdout
    watermarks = {name: tables[name]["watermark"] for name in ("mart.fact", "stage.orders", "stage.rates")}
    assert watermarks == {
        "mart.fact": "2026-01-01T01:00:00+00:00",
        "stage.orders": "2026-01-01T03:00:00+00:00",
        "stage.rates": "2026-01-01T01:00:00+00:00",
    }
    assert tables["mart.fact"]["backlog_depth"] == 0
    assert _fact_commits(spark) == ["2026/01/01/00#1"]  # step 01 waits for the rates of hour 01

    _arrive(store, "stage/rates", 2, 4.0)  # out of step: hour 02 before hour 01
    _arrive(store, "stage/rates", 1, 3.0)
    assert wait_until(lambda: _lock(store, "mart/fact").position == "2026/01/01/02", 300, 1), (
        f"lock {_lock(store, 'mart/fact')}; see {stack.home / 'logs'}"
    )
    assert wait_until(lambda: _lock(store, "mart/fact").state is LockState.FREE, 60, 0.5)
    assert _fact_commits(spark) == ["2026/01/01/00#1", "2026/01/01/01#1", "2026/01/01/02#1"]
    rows = [tuple(r) for r in spark.sql("SELECT ts, amount FROM local.mart.fact ORDER BY ts").collect()]
    assert rows == [
        (datetime(2026, 1, 1, 0), 20.0),
        (datetime(2026, 1, 1, 1), 60.0),
        (datetime(2026, 1, 1, 2), 120.0),
    ]
