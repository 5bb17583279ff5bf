"""The real Dataproc runner submits the real job package (built by `turnstile.deploy.packaging`, staged
in fake-gcs-server) to the Dataproc emulator, which runs it with spark-submit: a real Iceberg commit,
a failed batch with its reason, a cancelled one."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from google.cloud import dataproc_v1

from turnstile.config.load_config import LoadConfig
from turnstile.config.settings import Settings
from turnstile.deploy import packaging
from turnstile.jobs.dataproc import DataprocRunner
from turnstile.jobs.port import JobState, JobStatus
from turnstile.state.records import Manifest, ManifestBatch
from turnstile.store.gcs import GcsStore
from turnstile_dev.dataproc_emulator import DataprocEmulator

pytestmark = [pytest.mark.spark, pytest.mark.emulator]

PROJECT, REGION = "local", "europe-west1"
_jobs = itertools.count()


@pytest.fixture(scope="module")
def runner(dataproc_emulator: DataprocEmulator, job_uris: dict[str, str], warehouse: Path) -> DataprocRunner:
    env = job_uris | {
        "JOB_RUNNER": "dataproc",
        "GOOGLE_CLOUD_PROJECT": PROJECT,
        "DATAPROC_REGION": REGION,
        "DATAPROC_ENDPOINT": dataproc_emulator.url,
        "ICEBERG_CATALOG": "local",
        "ICEBERG_CATALOG_TYPE": "hadoop",
        "ICEBERG_WAREHOUSE": str(warehouse),
        # The session fixture `spark` reads the same warehouse: always current metadata.
        "DATAPROC_PROPERTIES": '{"spark.sql.catalog.local.cache-enabled": "false"}',
    }
    return DataprocRunner.from_settings(Settings.from_env(env))


def write_manifest(store: GcsStore, job_id: str, table: str, rows: str) -> str:
    data = f"ds/{table}/2024/05/01/part-0.csv"
    store.write(data, rows.encode())
    batch = ManifestBatch(
        dataset="ds",
        table=table,
        table_prefix=f"ds/{table}",
        rel="2024/05/01",
        success_generation=1,
        data_uris=(f"gs://{store.bucket}/{data}",),
        load=LoadConfig(),
        config_digest="d",
        result=f"ds/{table}/_turnstile/results/2024/05/01/1.json",
        failed_prefix=f"ds/{table}/_failed/2024/05/01/",
    )
    manifest = Manifest(
        job_id=job_id,
        bucket=store.bucket,
        batches=(batch,),
        done_signal=f"ds/{table}/_turnstile/jobs/{job_id}.done",
        ordered=True,
    )
    name = f"ds/{table}/_turnstile/jobs/{job_id}.manifest.json"
    store.write(name, manifest.encode())
    return f"gs://{store.bucket}/{name}"


def _follow(
    runner: DataprocRunner, job_id: str, until: Callable[[JobStatus], bool], timeout: float = 240
) -> list[JobStatus]:
    """Every status read until `until` holds (the last one)."""
    seen: list[JobStatus] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = runner.status(job_id)
        assert status is not None, f"{job_id} is unknown to the emulator"
        seen.append(status)
        if until(status):
            return seen
        time.sleep(0.3)
    raise AssertionError(f"{job_id}: {seen[-1] if seen else None} after {timeout}s")


def _batch(emulator: DataprocEmulator, job_id: str) -> dataproc_v1.Batch:
    entry = emulator.book.entries[f"projects/{PROJECT}/locations/{REGION}/batches/{job_id}"]
    return entry.batch


def test_the_job_package_commits_an_iceberg_table(
    runner: DataprocRunner, dataproc_emulator: DataprocEmulator, gcs_store: GcsStore, spark: Any
) -> None:
    job_id = f"turnstile-ok-{next(_jobs)}"
    manifest = write_manifest(gcs_store, job_id, "viaproc", "id,name\n1,a\n2,b\n")
    runner.submit(job_id, manifest)
    runner.submit(job_id, manifest)  # a retried submit attaches: its request id names the same operation
    seen = _follow(runner, job_id, lambda s: s.state.finished)
    states = [s.state for s in seen]
    assert states[-1] is JobState.SUCCEEDED, seen[-1]
    assert set(states[:-1]) <= {JobState.PENDING, JobState.RUNNING}
    history = [h.state.name for h in _batch(dataproc_emulator, job_id).state_history]
    assert history == ["PENDING", "RUNNING"]
    assert len(dataproc_emulator.book.entries) >= 1
    rows = sorted(tuple(r) for r in spark.sql("SELECT * FROM local.ds.viaproc").collect())
    assert rows == [(1, "a"), (2, "b")]
    [rel] = [
        r[0] for r in spark.sql("SELECT summary['turnstile.rel'] FROM local.ds.viaproc.snapshots").collect()
    ]
    assert rel == "2024/05/01"
    workdir = dataproc_emulator.executor.workdir(job_id)
    assert (workdir / packaging.JOB_DEPS_FRAGMENT / "pydantic").is_dir()  # deps.zip extracted by its alias


def test_a_failing_batch_is_failed_with_its_reason(runner: DataprocRunner, gcs_store: GcsStore) -> None:
    job_id = f"turnstile-fails-{next(_jobs)}"
    missing = f"gs://{gcs_store.bucket}/ds/none/_turnstile/jobs/{job_id}.manifest.json"
    runner.submit(job_id, missing)
    status = _follow(runner, job_id, lambda s: s.state.finished)[-1]
    assert status.state is JobState.FAILED
    assert status.detail is not None
    assert f"the manifest {missing} does not exist" in status.detail
    assert "driveroutput.log" in status.detail


def test_cancel_of_a_running_batch_is_cancelled(
    runner: DataprocRunner, dataproc_emulator: DataprocEmulator, gcs_store: GcsStore
) -> None:
    job_id = f"turnstile-cancelled-{next(_jobs)}"
    runner.submit(job_id, write_manifest(gcs_store, job_id, "cancelled", "id\n1\n"))
    _follow(runner, job_id, lambda s: s.state is JobState.RUNNING, timeout=120)
    runner.cancel(job_id)
    status = _follow(runner, job_id, lambda s: s.state.finished, timeout=60)[-1]
    assert status.state is JobState.CANCELLED
    history = [h.state.name for h in _batch(dataproc_emulator, job_id).state_history]
    assert history == ["PENDING", "RUNNING", "CANCELLING"]
    assert not dataproc_emulator.executor._processes  # the process group is gone
    runner.cancel(job_id)  # a finished batch: nothing to cancel
