"""The production path on the local stack (`LOCAL_DRIVER=spool`): each job a request in the
bucket's spool, served by the warm driver of DRIVER=warm (`entrypoints.spool_driver`), which the
runner launches as a spark-submit where Dataproc creates a batch: fake-gcs-server -> event bridge ->
functions-framework host -> spool -> driver -> Iceberg, checked in the warehouse and the spool."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from turnstile.jobs.local import DRIVERS
from turnstile.local.bridge import wait_until
from turnstile.local.stack import Stack, StackOptions
from turnstile.names import driverspool
from turnstile.state.records import Lock, LockState
from turnstile.state.spoolrecords import DriverRecord, DriverState, JobFinished, Outcome
from turnstile.store.gcs import GcsStore, make_client

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ORDERED = "spool/hours"
UNORDERED = "spool/clicks"


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, warehouse: Path, iceberg_jars: list[Path]
) -> Iterator[Stack]:
    home = tmp_path_factory.mktemp("spool-stack")
    running = Stack(
        StackOptions(
            home=home,
            sweep_every=15,
            environment={
                "ICEBERG_CATALOG": "local",
                "ICEBERG_WAREHOUSE": str(warehouse),
                "LOCAL_DRIVER": "spool",
                "DRIVER_POLL_SECONDS": "0.2",
            },
        )
    )
    running.start()
    yield running
    running.stop()


def _store(stack: Stack) -> GcsStore:
    assert stack.info is not None
    return GcsStore(make_client("local", stack.info.storage_url), stack.info.bucket)


def _drained(store: GcsStore, table: str, results: int) -> bool:
    found = store.read(f"{table}/_bqlock")
    lock = Lock() if found is None else Lock.decode(found.data, table)
    return (
        lock.state is LockState.FREE
        and not store.list_objects(f"{table}/_backlog/", limit=1)
        and len(store.list_objects(f"{table}/_turnstile/results/")) >= results
    )


def test_batches_of_two_tables_go_through_the_buckets_spool_to_a_warm_driver(
    stack: Stack, spark: Any
) -> None:
    store = _store(stack)
    store.write(f"{ORDERED}/_config/ORDERME", b"")
    store.write(f"{ORDERED}/_config/load.json", json.dumps({"table_schema": "hour INT, n INT"}).encode())
    store.write(f"{UNORDERED}/_config/load.json", json.dumps({"table_schema": "user STRING"}).encode())
    for hour in ("12", "10", "11"):  # out of order: applied 10, 11, 12
        store.write(f"{ORDERED}/2024/05/01/{hour}/part-0.csv", f"hour,n\n{hour},1\n".encode())
        store.write(f"{ORDERED}/2024/05/01/{hour}/_SUCCESS", b"")
    store.write(f"{UNORDERED}/2024/05/01/part-0.csv", b"user\nu1\nu2\n")
    store.write(f"{UNORDERED}/2024/05/01/_SUCCESS", b"")

    assert wait_until(lambda: _drained(store, ORDERED, 3) and _drained(store, UNORDERED, 1), 300)

    hours = spark.sql("SELECT hour FROM local.spool.hours").collect()
    assert sorted(r.hour for r in hours) == [10, 11, 12]
    order = spark.sql(
        "SELECT summary['turnstile.rel'] AS rel FROM local.spool.hours.snapshots ORDER BY committed_at"
    ).collect()
    assert [r.rel for r in order if r.rel] == ["2024/05/01/10", "2024/05/01/11", "2024/05/01/12"]
    assert spark.table("local.spool.clicks").count() == 2

    # Every job went through the spool: submitted, started and ended by a driver, SUCCEEDED.
    submitted = [o.name for o in store.list_objects(driverspool.JOBS) if o.name.endswith("/submitted.json")]
    assert len(submitted) >= 2
    ends = [store.read(name.replace("submitted.json", "finished.json")) for name in submitted]
    finished = [JobFinished.decode(e.data, "finished") for e in ends if e is not None]
    assert len(finished) == len(submitted)
    assert all(f.outcome is Outcome.SUCCEEDED and f.driver_id for f in finished)
    assert not store.list_objects(driverspool.REQUESTS)  # nothing left queued
    # Its drivers are the ones the runner launched as Spark applications of their own, and each
    # one's log has the jobs it served.
    drivers = {f.driver_id for f in finished}
    assert stack.info is not None
    launched = Path(stack.info.home) / DRIVERS
    for driver_id in drivers:
        record = store.read(driverspool.driver_name(driver_id))
        assert record is not None
        assert DriverRecord.decode(record.data, driver_id).state in (
            DriverState.RUNNING,
            DriverState.LEAVING,
            DriverState.GONE,
        )
        assert "turnstile driver: job" in (launched / driver_id / "job.log").read_text(errors="replace")
