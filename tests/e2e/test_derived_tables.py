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


# gaps "wait" said outright: unset, it waits only once the mart has registered as a dependent (the
# sweeper does that), which hour 12 may beat. A reprocessed hour replaces its partition.
SENSORS = {
    "natural_time": "hourly",
    "gaps": "wait",
    "schema": "ts TIMESTAMP, sensor STRING, v DOUBLE",
    "mode": "overwrite_partitions",
    "partition_by": ["hours(ts)"],
}
MART = {
    "derived": {"step": "1h", "start": "2026-01-01T10:00:00Z"},
    "depends_on": ["ds.sensors"],
    "mode": "replace_window",
    "time_column": "ts",
    "partition_by": ["hours(ts)"],
}
MART_SQL = """
SELECT date_trunc('HOUR', ts) AS ts, count(*) AS readings, sum(v) AS total
FROM ${catalog}.ds.sensors WHERE ts >= ${window_start} AND ts < ${window_end}
GROUP BY date_trunc('HOUR', ts)
"""
# The mart's transform over the whole sensors table as it is: what the mart must equal in the end.
OVER_FINAL_SENSORS = """
SELECT date_trunc('HOUR', ts) AS ts, count(*) AS readings, sum(v) AS total
FROM local.ds.sensors WHERE ts >= '2026-01-01 10:00:00' AND ts < '2026-01-01 13:00:00'
GROUP BY date_trunc('HOUR', ts) ORDER BY ts
"""


def _readings(store: GcsStore, hour: int, values: tuple[float, ...], *, success: bool = True) -> None:
    folder = f"ds/sensors/2026/01/01/{hour:02d}"
    rows = "".join(f"2026-01-01 {hour:02d}:{i * 10:02d}:00,s{i},{v}\n" for i, v in enumerate(values))
    store.write(f"{folder}/part-0.csv", f"ts,sensor,v\n{rows}".encode())
    if success:
        store.write(f"{folder}/_SUCCESS", b"")


def _status(table: str) -> dict[str, Any]:
    shown = CliRunner().invoke(app, ["status", "--output", "json"])
    assert shown.exit_code == 0, shown.stderr
    return next(t for t in json.loads(shown.stdout)["tables"] if t["table"] == table)


def _history(uri: str) -> list[dict[str, Any]]:
    shown = CliRunner().invoke(app, ["history", uri, "--output", "json", "--last", "0"])
    assert shown.exit_code == 0, shown.stderr
    entries: list[dict[str, Any]] = json.loads(shown.stdout)["entries"]
    return entries


def _rows(spark: Any, sql: str) -> list[tuple[Any, ...]]:
    spark.sql("REFRESH TABLE local.ds.mart")
    return [tuple(r) for r in spark.sql(sql).collect()]


def test_sensors_hours_10_12_11_then_11_corrected_leave_the_mart_equal_to_its_transform(
    stack: Stack, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scenario of a late source hour: hours 10, 12, 11 land in that order; the mart waits at the
    gap (status says for what), hour 11 is let through, then reprocessed with corrected readings:
    the mart's hour 11 is rebuilt once, and the mart ends equal to its transform over the final
    sensors."""
    assert stack.info is not None
    monkeypatch.setenv("TURNSTILE_HOME", str(stack.home))
    bucket = stack.info.bucket
    store = GcsStore(make_client("local", stack.info.storage_url), bucket)
    store.write("ds/sensors/_config/ORDERME", b"")
    store.write("ds/sensors/_config/load.json", json.dumps(SENSORS).encode())
    store.write("ds/mart/_config/ORDERME", b"")
    store.write("ds/mart/_config/load.json", json.dumps(MART).encode())
    store.write("ds/mart/_config/transform.sql", MART_SQL.encode())
    _readings(store, 10, (1.0, 2.0))
    assert wait_until(lambda: _lock(store, "ds/sensors").position == "2026/01/01/10", 300, 1)
    _readings(store, 12, (5.0, 6.0))

    # Hour 11 is missing: the sensors' watermark stays at 11:00, and the mart waits at step 11.
    assert wait_until(
        lambda: (
            _lock(store, "ds/sensors").position == "2026/01/01/12"
            and _lock(store, "ds/mart").position == "2026/01/01/10"
            and _lock(store, "ds/mart").state is LockState.FREE
        ),
        300,
        1,
    ), f"sensors {_lock(store, 'ds/sensors')}, mart {_lock(store, 'ds/mart')}; see {stack.home / 'logs'}"
    sensors = _status("ds.sensors")
    assert sensors["watermark"] == "2026-01-01T11:00:00+00:00"
    assert sensors["missing_period"] == "2026-01-01T11:00:00+00:00"
    assert sensors["missing_holds"] == ["ds/mart"]
    mart = _status("ds.mart")
    assert mart["health"] == "WAITING"
    assert mart["waiting_for"] == [
        "next step 2026/01/01/11: ds/sensors to reach 2026-01-01T12:00:00+00:00 "
        "(its watermark: 2026-01-01T11:00:00+00:00)"
    ]
    text = CliRunner().invoke(app, ["status"]).stdout
    assert "ds.sensors: period 2026-01-01T11:00:00+00:00 is missing" in text

    # Hour 11 lands late: it stops the sensors table until an operator lets it through.
    _readings(store, 11, (3.0, 4.0))
    assert wait_until(lambda: _lock(store, "ds/sensors").state is LockState.FAILED, 120, 1)
    unlock = CliRunner().invoke(app, ["unlock", f"gs://{bucket}/ds/sensors", "--yes"])
    assert unlock.exit_code == 0, unlock.stderr
    assert wait_until(lambda: _lock(store, "ds/mart").position == "2026/01/01/12", 300, 1), (
        f"sensors {_lock(store, 'ds/sensors')}, mart {_lock(store, 'ds/mart')}; see {stack.home / 'logs'}"
    )
    assert wait_until(lambda: _lock(store, "ds/mart").state is LockState.FREE, 60, 0.5)
    assert _rows(spark, "SELECT hour(ts), readings, total FROM local.ds.mart ORDER BY ts") == [
        (10, 2, 3.0),
        (11, 2, 7.0),
        (12, 2, 11.0),
    ]
    assert not [e for e in _history(f"gs://{bucket}/ds/mart") if e["outcome"] == "REBUILT"]  # it waited

    # Hour 11 corrected upstream and reprocessed: the mart's step 11 is rebuilt, once.
    _readings(store, 11, (30.0, 40.0, 50.0), success=False)
    again = CliRunner().invoke(
        app, ["reprocess", f"gs://{bucket}/ds/sensors/2026/01/01/11", "--reason", "fix"]
    )
    assert again.exit_code == 0, again.stderr

    def rebuilt() -> list[dict[str, Any]]:
        return [e for e in _history(f"gs://{bucket}/ds/mart") if e["outcome"] == "REBUILT"]

    assert wait_until(lambda: bool(rebuilt()) and _lock(store, "ds/mart").state is LockState.FREE, 300, 1), (
        f"mart {_lock(store, 'ds/mart')}; see {stack.home / 'logs'}"
    )
    [entry] = rebuilt()
    assert entry["rel"] == "2026/01/01/11"
    assert entry["cause"]["table"] == "ds/sensors" and entry["cause"]["rel"] == "2026/01/01/11"
    assert entry["cause"]["reprocess"]  # the operator's request the change was
    final = _rows(spark, OVER_FINAL_SENSORS)
    assert [(t.hour, n, total) for t, n, total in final] == [(10, 2, 3.0), (11, 3, 120.0), (12, 2, 11.0)]
    assert _rows(spark, "SELECT ts, readings, total FROM local.ds.mart ORDER BY ts") == final
    mart = _status("ds.mart")
    assert mart["rebuilds_pending"] == 0 and mart["stale_steps"] == []
