"""The warm Dataproc runner (DRIVER=warm) against the Dataproc emulator and fake-gcs-server: its
driver batches really run (spark-submit of the warm driver's main file and the turnstile zip
`make package` builds) and serve the spool in the bucket. The job is a stand-in that sleeps
(tests/contract/warm_driver_stand_in.py); tests/e2e/test_dataproc_warm.py runs real jobs."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from turnstile.deploy import packaging
from turnstile.jobs.dataproc import DataprocBatchSpec, DataprocRunner, make_client
from turnstile.jobs.port import JobState, JobStatus
from turnstile.jobs.warm_runner import DRIVER_LABEL, WarmRunner, driver_batch_id
from turnstile.local.emulator import Emulator
from turnstile.names import driverspool as names
from turnstile.state.spoollaunch import DriverSequence
from turnstile.state.spoolrecords import DriverRecord, DriverState, JobStarted
from turnstile.store.gcs import GcsStore
from turnstile.store.gcs import make_client as gcs_client
from turnstile.store.port import StoredObject
from turnstile_dev.dataproc_emulator import DataprocEmulator

pytestmark = [pytest.mark.spark, pytest.mark.emulator]

PROJECT, REGION = "local", "europe-west1"
STAND_IN = Path(__file__).with_name("warm_driver_stand_in.py")
# A deployment that has seen a burst: its next driver stays up through 20-second gaps.
BURST = b'{"gaps": [20.0, 20.0, 20.0, 20.0], "shortfall": 0.0}'


@pytest.fixture(scope="module")
def staged(gcs_emulator: Emulator, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """The turnstile zip (the job's and the driver's modules) and the stand-in driver main file,
    uploaded as terraform uploads `make package`'s."""
    _, package = packaging.build_job(
        tmp_path_factory.mktemp("build"), packaging.JOB_MAIN, packaging.DRIVER_MAIN
    )
    bucket = "warm-artifacts"
    gcs_emulator.create_bucket(bucket)
    store = GcsStore(gcs_client("local", gcs_emulator.url), bucket)
    store.write("job/turnstile.zip", package.read_bytes())
    store.write("job/driver.py", STAND_IN.read_bytes())
    return {"package": f"gs://{bucket}/job/turnstile.zip", "driver": f"gs://{bucket}/job/driver.py"}


class Paused:
    """The spool's store, holding readers of the driver sequence until two have read it while
    `racing` is set: two submitters that both find no driver and read the same number."""

    def __init__(self, store: GcsStore) -> None:
        self._store = store
        self.racing = threading.Event()
        self._barrier = threading.Barrier(2, timeout=30)

    def read(self, name: str) -> StoredObject | None:
        found = self._store.read(name)
        if name == names.SEQUENCE and self.racing.is_set():
            self._barrier.wait()
        return found

    def __getattr__(self, name: str) -> object:
        return getattr(self._store, name)


def warm_runner(emulator: DataprocEmulator, spool: object, bucket: str, uris: dict[str, str]) -> WarmRunner:
    spec = DataprocBatchSpec(
        main_python_file_uri="gs://warm-artifacts/job/main.py", python_file_uris=(uris["package"],)
    )
    batches = DataprocRunner(make_client(REGION, emulator.url), PROJECT, REGION, spec)
    return WarmRunner(
        batches,
        spool,  # type: ignore[arg-type]
        spool_bucket=bucket,
        prefix="warm",
        driver_main_uri=uris["driver"],
        driver_args=("--poll-seconds", "0.5", "--max-idle-seconds", "20"),
    )


def driver_batches(emulator: DataprocEmulator) -> list[str]:
    return sorted(
        name.rsplit("/", 1)[-1]
        for name, entry in emulator.book.entries.items()
        if entry.batch.labels.get(DRIVER_LABEL) == "true"
    )


def follow(
    runner: WarmRunner, job_id: str, until: Callable[[JobStatus], bool], timeout: float = 240
) -> JobStatus:
    deadline = time.monotonic() + timeout
    status = None
    while time.monotonic() < deadline:
        status = runner.status(job_id)
        assert status is not None, f"{job_id} is unknown"
        if until(status):
            return status
        time.sleep(0.5)
    raise AssertionError(f"{job_id}: {status} after {timeout}s")


def launched(store: GcsStore) -> int:
    """The number of the last driver launched (the driver sequence)."""
    found = store.read(names.SEQUENCE)
    assert found is not None
    return DriverSequence.decode(found.data, "x").number


def request(job: str, table: str, sleep: float = 0) -> str:
    """A manifest URI; the stand-in job sleeps the seconds of its fragment."""
    return f"gs://nowhere/ds/{table}/_turnstile/jobs/{job}.manifest.json#sleep={sleep}"


def test_racing_submits_start_one_driver_that_serves_every_job_and_rejects_garbage(
    dataproc_emulator: DataprocEmulator, gcs_store: GcsStore, staged: dict[str, str]
) -> None:
    gcs_store.write(names.HISTORY, BURST)
    garbage = f"{names.REQUESTS}00000000000000000001-job-garbage.json"
    gcs_store.write(garbage, b"{not a request")
    spool = Paused(gcs_store)
    runner = warm_runner(dataproc_emulator, spool, gcs_store.bucket, staged)
    before = driver_batches(dataproc_emulator)
    spool.racing.set()
    jobs = {"job-a": request("job-a", "orders", sleep=5), "job-b": request("job-b", "customers")}
    racing = [threading.Thread(target=runner.submit, args=job) for job in jobs.items()]
    for thread in racing:
        thread.start()
    for thread in racing:
        thread.join()
    spool.racing.clear()
    (driver,) = sorted(set(driver_batches(dataproc_emulator)) - set(before))
    assert driver == driver_batch_id("warm", gcs_store.bucket, launched(gcs_store))

    # While the driver runs the first job, a job submitted goes to it.
    follow(runner, "job-a", lambda s: s.state is JobState.RUNNING)
    runner.submit("job-c", request("job-c", "orders"))
    assert len(driver_batches(dataproc_emulator)) == len(before) + 1  # no new CreateBatch
    for job in ("job-a", "job-b", "job-c"):
        assert follow(runner, job, lambda s: s.state.finished).state is JobState.SUCCEEDED, job
        started = gcs_store.read(names.started_name(job))
        assert started is not None and JobStarted.decode(started.data, "x").driver_id == driver

    rejected = gcs_store.read(names.rejected_name(garbage))
    assert rejected is not None and b"does not hold a turnstile spool request" in rejected.data
    status = runner.status("job-garbage")
    assert status is not None and status.state is JobState.FAILED
    assert gcs_store.read(garbage) is None


def test_a_driver_batch_cancelled_mid_job_makes_the_job_a_transient_failure(
    dataproc_emulator: DataprocEmulator, gcs_store: GcsStore, staged: dict[str, str]
) -> None:
    runner = warm_runner(dataproc_emulator, gcs_store, gcs_store.bucket, staged)
    # The stand-in job sleeps as long as the request says.
    gcs_store.write(names.HISTORY, BURST)
    runner.submit("job-long", request("job-long", "orders", sleep=300))
    driver = driver_batch_id("warm", gcs_store.bucket, launched(gcs_store))
    follow(runner, "job-long", lambda s: s.state is JobState.RUNNING)
    DataprocRunner(make_client(REGION, dataproc_emulator.url), PROJECT, REGION, runner_spec()).cancel(driver)
    status = follow(runner, "job-long", lambda s: s.state.finished, timeout=60)
    assert status.state is JobState.FAILED
    assert status.detail is not None and "transient" in status.detail and "CANCELLED" in status.detail
    record = gcs_store.read(names.driver_name(driver))
    assert record is not None and DriverRecord.decode(record.data, "x").state is DriverState.DEAD
    assert gcs_store.list_objects(names.REQUESTS) == []


def runner_spec() -> DataprocBatchSpec:
    return DataprocBatchSpec(main_python_file_uri="gs://warm-artifacts/job/main.py")
