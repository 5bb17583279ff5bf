"""DRIVER=warm end to end: the runner the functions build (`wiring.job_runner`) queues two jobs of
two tables in the bucket's spool and starts one driver batch, the real `job/driver.py` of the real
package, which the Dataproc emulator runs with spark-submit: it serves both jobs in one Spark
session, each commits its Iceberg table, and it leaves."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_dataproc_emulator import PROJECT, REGION, write_manifest
from turnstile.config.settings import Settings
from turnstile.entrypoints.wiring import job_runner
from turnstile.jobs.port import JobState, JobStatus
from turnstile.jobs.warm_runner import DRIVER_LABEL, WarmRunner, driver_batch_id
from turnstile.names import driverspool as names
from turnstile.state.spoollaunch import DriverSequence
from turnstile.state.spoolrecords import DriverRecord, DriverState, JobStarted
from turnstile.store.gcs import GcsStore
from turnstile_dev.dataproc_emulator import DataprocEmulator

pytestmark = [pytest.mark.spark, pytest.mark.emulator]


def test_one_warm_driver_serves_two_tables_jobs_in_one_session_and_commits_both(
    dataproc_emulator: DataprocEmulator,
    job_uris: dict[str, str],
    warehouse: Path,
    gcs_store: GcsStore,
    spark: Any,
) -> None:
    env = job_uris | {
        "JOB_RUNNER": "dataproc",
        "DRIVER": "warm",
        "DRIVER_POLL_SECONDS": "0.5",
        "GOOGLE_CLOUD_PROJECT": PROJECT,
        "DATAPROC_REGION": REGION,
        "DATAPROC_ENDPOINT": dataproc_emulator.url,
        "ICEBERG_CATALOG": "local",
        "ICEBERG_CATALOG_TYPE": "hadoop",
        "ICEBERG_WAREHOUSE": str(warehouse),
        "DATAPROC_PROPERTIES": '{"spark.sql.catalog.local.cache-enabled": "false"}',
    }
    runner = job_runner(Settings.from_env(env), gcs_store)
    assert isinstance(runner, WarmRunner)
    jobs = {
        "turnstile-warm-orders-1": write_manifest(
            gcs_store, "turnstile-warm-orders-1", "warm_orders", "id\n1\n2\n"
        ),
        "turnstile-warm-items-1": write_manifest(
            gcs_store, "turnstile-warm-items-1", "warm_items", "id,q\n7,x\n"
        ),
    }
    before = _driver_batches(dataproc_emulator)
    for job_id, uri in jobs.items():
        runner.submit(job_id, uri)
    found = gcs_store.read(names.SEQUENCE)
    assert found is not None
    driver = driver_batch_id("turnstile", gcs_store.bucket, DriverSequence.decode(found.data, "x").number)
    assert _driver_batches(dataproc_emulator) - before == {driver}

    deadline = time.monotonic() + 300
    ended: dict[str, JobStatus] = {}
    while len(ended) < len(jobs) and time.monotonic() < deadline:
        for job_id in jobs:
            status = runner.status(job_id)
            assert status is not None
            if status.state.finished:
                ended[job_id] = status
        time.sleep(0.5)
    assert {job: s.state for job, s in ended.items()} == dict.fromkeys(jobs, JobState.SUCCEEDED), ended
    assert _driver_batches(dataproc_emulator) - before == {driver}  # one batch served both
    for job_id in jobs:
        started = gcs_store.read(names.started_name(job_id))
        assert started is not None and JobStarted.decode(started.data, "x").driver_id == driver

    orders = sorted(tuple(r) for r in spark.sql("SELECT * FROM local.ds.warm_orders").collect())
    items = sorted(tuple(r) for r in spark.sql("SELECT * FROM local.ds.warm_items").collect())
    assert (orders, items) == ([(1,), (2,)], [(7, "x")])
    [rel] = [
        r[0]
        for r in spark.sql("SELECT summary['turnstile.rel'] FROM local.ds.warm_items.snapshots").collect()
    ]
    assert rel == "2024/05/01"

    # With no history yet the policy leaves at once: the batch ends, its record says GONE.
    entry = dataproc_emulator.book.entries[f"projects/{PROJECT}/locations/{REGION}/batches/{driver}"]
    deadline = time.monotonic() + 60
    while entry.batch.state != entry.batch.State.SUCCEEDED and time.monotonic() < deadline:
        time.sleep(0.5)
    assert entry.batch.state == entry.batch.State.SUCCEEDED, entry.batch.state_message
    record = gcs_store.read(names.driver_name(driver))
    assert record is not None and DriverRecord.decode(record.data, "x").state is DriverState.GONE


def _driver_batches(emulator: DataprocEmulator) -> set[str]:
    return {
        name.rsplit("/", 1)[-1]
        for name, entry in emulator.book.entries.items()
        if entry.batch.labels.get(DRIVER_LABEL) == "true"
    }
