"""DRIVER=warm on EMR Serverless, against a real moto server through the real boto3 client: jobs
queue in the S3 bucket's spool and one EMR job run (the driver main file, `--store s3`) serves them.
moto records job runs but runs none (every run starts in SUCCESS): here the driver's part is played
by `SpoolDriver` on the same bucket, and the run's state is set as EMR would set it;
tests/e2e/test_emr_warm.py runs the recorded run's driver for real."""

from __future__ import annotations

from typing import Any

import pytest

from tests.aws.moto_emr import create_application, emr_client, runs_named, set_run_state
from tests.aws.test_emr_runner import env
from turnstile.config.settings import Settings
from turnstile.core.clock import SystemClock
from turnstile.core.errors import JobError, SettingsError
from turnstile.entrypoints import wiring_aws
from turnstile.jobs.emr import JOB_TAG, EmrRunner
from turnstile.jobs.port import JobState, JobStatus
from turnstile.jobs.warm_runner import DRIVER_LABEL, WarmRunner
from turnstile.names import driverspool as names
from turnstile.ops.check_settings import emr_problems
from turnstile.state.spooldriver import SpoolDriver
from turnstile.state.spoolrecords import DriverRecord, DriverState, SpoolBounds
from turnstile.store.s3 import S3Store

DRIVER_MAIN = "s3://deploy/turnstile/driver.py"


def manifest(bucket: str, job_id: str) -> str:
    return f"s3://{bucket}/sales/orders/_turnstile/jobs/{job_id}.manifest.json"


def warm_settings(moto_server: str, application_id: str, **extra: str) -> Settings:
    values = {"DRIVER": "warm", "DRIVER_MAIN_URI": DRIVER_MAIN, "AWS_ENDPOINT_URL": moto_server}
    return Settings.from_env(env(application_id, **(values | extra)))


@pytest.fixture
def application(moto_server: str) -> str:
    return create_application(moto_server)


@pytest.fixture
def warm(moto_server: str, application: str, s3_store: S3Store) -> WarmRunner:
    runner = wiring_aws.job_runner(warm_settings(moto_server, application), s3_store)
    assert isinstance(runner, WarmRunner)
    return runner


def driver_runs(moto_server: str, application: str) -> list[dict[str, Any]]:
    client = emr_client(moto_server)
    listed = client.list_job_runs(applicationId=application)["jobRuns"]
    runs = [client.get_job_run(applicationId=application, jobRunId=r["id"])["jobRun"] for r in listed]
    return [run for run in runs if run.get("tags", {}).get(DRIVER_LABEL) == "true"]


def test_warm_jobs_queue_in_the_s3_spool_and_one_driver_run_serves_them(
    warm: WarmRunner, moto_server: str, application: str, s3_store: S3Store
) -> None:
    warm.submit("job-a", manifest(s3_store.bucket, "job-a"))
    warm.submit("job-b", manifest(s3_store.bucket, "job-b"))

    assert len(s3_store.list_objects(names.REQUESTS)) == 2
    [run] = driver_runs(moto_server, application)  # the second submit found the driver announced
    driver_id = run["name"]
    assert runs_named(moto_server, application, "job-a") == []  # no run of a job's own
    assert run["tags"] == {JOB_TAG: driver_id, DRIVER_LABEL: "true"}
    spark_submit = run["jobDriver"]["sparkSubmit"]
    assert spark_submit["entryPoint"] == DRIVER_MAIN
    arguments = spark_submit["entryPointArguments"]
    pairs = dict(zip(arguments[::2], arguments[1::2], strict=True))
    assert pairs["--spool-bucket"] == s3_store.bucket
    assert pairs["--driver-id"] == driver_id
    assert pairs["--store"] == "s3" and pairs["--prices"] == "emr"
    assert pairs["--slots"] == "4" and pairs["--max-idle-seconds"] == "300.0"
    # The driver runs with the jobs' own Spark properties, jars and Python files.
    for expected in (
        "--conf spark.sql.catalog.lake.io-impl=org.apache.iceberg.aws.s3.S3FileIO",
        "--py-files s3://deploy/turnstile/turnstile.zip",
    ):
        assert expected in spark_submit["sparkSubmitParameters"]
    found = s3_store.read(names.driver_name(driver_id))
    assert found is not None and DriverRecord.decode(found.data, found.name).state is DriverState.STARTING
    assert warm.status("job-a") == JobStatus("job-a", JobState.PENDING)


def test_a_driver_run_that_failed_mid_job_makes_the_job_a_transient_failure(
    warm: WarmRunner, moto_server: str, application: str, s3_store: S3Store
) -> None:
    warm.submit("job-a", manifest(s3_store.bucket, "job-a"))
    [run] = driver_runs(moto_server, application)
    served = SpoolDriver(s3_store, SystemClock(), run["name"], batch=run["name"], bounds=SpoolBounds())
    assert served.register()
    claimed = served.take()
    assert claimed is not None and served.start(claimed)
    set_run_state(application, run["jobRunId"], "RUNNING")
    assert warm.status("job-a") == JobStatus("job-a", JobState.RUNNING)

    set_run_state(application, run["jobRunId"], "FAILED", "Job failed, ExitCode: 137")
    status = warm.status("job-a")
    assert status is not None and status.state is JobState.FAILED
    assert status.detail is not None and "transient" in status.detail
    assert f"EMR Serverless job run {run['name']} ended FAILED: Job failed, ExitCode: 137" in status.detail
    found = s3_store.read(names.driver_name(run["name"]))
    assert found is not None and DriverRecord.decode(found.data, found.name).state is DriverState.DEAD
    # The retry's submit starts the next driver run.
    warm.submit("job-a-retry", manifest(s3_store.bucket, "job-a-retry"))
    assert len(driver_runs(moto_server, application)) == 2


def test_a_refused_driver_run_keeps_the_request_and_the_next_submit_launches_again(
    moto_server: str, application: str, s3_store: S3Store
) -> None:
    # Its driver_launch_failed ERROR is the warm runner's own, checked in tests/unit/test_dataproc_warm.py.
    refused = wiring_aws.job_runner(warm_settings(moto_server, "00fakeapplication"), s3_store)
    with pytest.raises(JobError, match="check EMR_APPLICATION_ID"):
        refused.submit("job-a", manifest(s3_store.bucket, "job-a"))
    assert len(s3_store.list_objects(names.REQUESTS)) == 1  # queued, not lost
    assert s3_store.list_objects(names.DRIVERS) == []  # the announcement withdrawn

    warm = wiring_aws.job_runner(warm_settings(moto_server, application), s3_store)
    warm.submit("job-a", manifest(s3_store.bucket, "job-a"))  # the protocol's retry of the submit
    assert len(driver_runs(moto_server, application)) == 1
    assert len(s3_store.list_objects(names.REQUESTS)) == 1


def test_per_job_stays_one_run_per_job(moto_server: str, application: str, s3_store: S3Store) -> None:
    runner = wiring_aws.job_runner(warm_settings(moto_server, application, DRIVER="per_job"), s3_store)
    assert isinstance(runner, EmrRunner)


@pytest.mark.parametrize(
    ("main", "problem"),
    [(None, "DRIVER_MAIN_URI is not set"), ("gs://deploy/driver.py", "s3://")],
)
def test_warm_on_emr_needs_the_driver_main_file_in_s3(
    moto_server: str, application: str, s3_store: S3Store, main: str | None, problem: str
) -> None:
    values = env(application, DRIVER="warm", AWS_ENDPOINT_URL=moto_server)
    if main is not None:
        values["DRIVER_MAIN_URI"] = main
    settings = Settings.from_env(values)
    with pytest.raises(SettingsError, match="DRIVER_MAIN_URI"):
        wiring_aws.job_runner(settings, s3_store)
    [found] = [p for p in emr_problems(settings) if p.variable == "DRIVER_MAIN_URI"]
    assert problem in found.problem
