"""EmrRunner against EMR Serverless on a real moto server, through the real boto3 client."""

from __future__ import annotations

import pytest

from tests.aws.moto_emr import (
    ROLE_ARN,
    create_application,
    emr_client,
    runs_named,
    service_runs,
    set_run_state,
)
from tests.conftest import AWS_REGION
from turnstile.errors import JobError, JobServiceUnavailable, SettingsError
from turnstile.jobs.emr import ICEBERG_RUNTIME_ON_EMR, JOB_TAG, EmrJobSpec, EmrRunner, make_client
from turnstile.jobs.emr import client_token as request_id
from turnstile.jobs.port import JobState
from turnstile.settings import Settings

JOB = "turnstile-sales-orders-0123456789abcdef"
MANIFEST = (
    "s3://lake-bucket/sales/orders/_turnstile/jobs/turnstile-sales-orders-0123456789abcdef.manifest.json"
)


def env(application_id: str, **extra: str) -> dict[str, str]:
    return {
        "JOB_RUNNER": "emr",
        "AWS_REGION": AWS_REGION,
        "EMR_APPLICATION_ID": application_id,
        "EMR_EXECUTION_ROLE_ARN": ROLE_ARN,
        "JOB_MAIN_URI": "s3://deploy/turnstile/job_main.py",
        "JOB_PYTHON_FILE_URIS": "s3://deploy/turnstile/turnstile.zip",
        "ICEBERG_CATALOG": "lake",
        "ICEBERG_CATALOG_TYPE": "glue",
        "ICEBERG_WAREHOUSE": "s3://warehouse/iceberg",
        "EMR_SPARK_PROPERTIES": '{"spark.executor.cores": "2"}',
        **extra,
    }


@pytest.fixture
def application(moto_server: str) -> str:
    return create_application(moto_server)


def runner_for(moto_server: str, application_id: str, **extra: str) -> EmrRunner:
    settings = Settings.from_env(env(application_id, **extra) | {"AWS_ENDPOINT_URL": moto_server})
    return EmrRunner.from_settings(settings)


def test_submit_starts_one_named_tagged_run_with_the_whole_driver(moto_server: str, application: str) -> None:
    runner_for(moto_server, application).submit(JOB, MANIFEST)

    [listed] = runs_named(moto_server, application, JOB)
    run = emr_client(moto_server).get_job_run(applicationId=application, jobRunId=listed["id"])["jobRun"]
    assert run["executionRole"] == ROLE_ARN
    assert run["tags"] == {JOB_TAG: JOB}
    driver = run["jobDriver"]["sparkSubmit"]
    assert driver["entryPoint"] == "s3://deploy/turnstile/job_main.py"
    assert driver["entryPointArguments"] == ["--manifest", MANIFEST]
    parameters = driver["sparkSubmitParameters"]
    for expected in (
        "--conf spark.sql.extensions=org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        "--conf spark.sql.catalog.lake=org.apache.iceberg.spark.SparkCatalog",
        "--conf spark.sql.catalog.lake.io-impl=org.apache.iceberg.aws.s3.S3FileIO",
        "--conf spark.sql.catalog.lake.catalog-impl=org.apache.iceberg.aws.glue.GlueCatalog",
        "--conf spark.sql.catalog.lake.warehouse=s3://warehouse/iceberg",
        "--conf spark.emr-serverless.driverEnv.ICEBERG_CATALOG=lake",
        f"--conf spark.emr-serverless.driverEnv.AWS_REGION={AWS_REGION}",
        "--conf spark.executor.cores=2",
        f"--jars {ICEBERG_RUNTIME_ON_EMR}",
        "--py-files s3://deploy/turnstile/turnstile.zip",
    ):
        assert expected in parameters


def test_the_client_token_is_derived_from_the_job_id(moto_server: str, application: str) -> None:
    runner_for(moto_server, application).submit(JOB, MANIFEST)
    [run] = service_runs(application)
    assert run.client_token == request_id(JOB)


def test_a_repeated_submit_attaches_instead_of_starting_a_second_run(
    moto_server: str, application: str
) -> None:
    # moto does not de-duplicate client tokens: only the runner's own lookup keeps this at one run.
    runner = runner_for(moto_server, application)
    runner.submit(JOB, MANIFEST)
    runner_for(moto_server, application).submit(JOB, MANIFEST)  # another invocation, same job
    assert len(runs_named(moto_server, application, JOB)) == 1
    runner.submit("turnstile-sales-orders-fedcba9876543210", MANIFEST)
    assert len(runs_named(moto_server, application, "turnstile-sales-orders-fedcba9876543210")) == 1


@pytest.mark.parametrize(
    ("service_state", "expected"),
    [
        ("SUBMITTED", JobState.PENDING),
        ("PENDING", JobState.PENDING),
        ("SCHEDULED", JobState.PENDING),
        ("QUEUED", JobState.PENDING),
        ("RUNNING", JobState.RUNNING),
        ("SUCCESS", JobState.SUCCEEDED),
        ("FAILED", JobState.FAILED),
        ("CANCELLING", JobState.CANCELLING),
        ("CANCELLED", JobState.CANCELLED),
    ],
)
def test_every_service_state_maps_to_a_job_state(
    moto_server: str, application: str, service_state: str, expected: JobState
) -> None:
    runner = runner_for(moto_server, application)
    runner.submit(JOB, MANIFEST)
    run_id = runner.run_id(JOB)
    assert run_id is not None
    set_run_state(application, run_id, service_state, "exit code 1" if service_state == "FAILED" else None)
    status = runner.status(JOB)
    assert status is not None
    assert status.state is expected
    assert status.detail == ("exit code 1" if expected is JobState.FAILED else None)


def test_a_gcs_manifest_is_refused_with_what_to_use_instead(moto_server: str, application: str) -> None:
    with pytest.raises(JobError, match=r"reads manifests from S3.*JOB_RUNNER=dataproc"):
        runner_for(moto_server, application).submit(JOB, "gs://bucket/sales/orders/m.json")
    assert runs_named(moto_server, application, JOB) == []


def test_an_unknown_application_is_a_terminal_error_naming_the_setting(moto_server: str) -> None:
    with pytest.raises(JobError, match="EMR_APPLICATION_ID"):
        runner_for(moto_server, "00nosuchapp0000").submit(JOB, MANIFEST)


def test_an_unreachable_service_is_transient(application: str) -> None:
    spec = EmrJobSpec.from_settings(Settings.from_env(env(application)))
    client = make_client(AWS_REGION, "http://127.0.0.1:9", max_attempts=2)  # nothing listens there
    with pytest.raises(JobServiceUnavailable, match="emr-serverless"):
        EmrRunner(client, spec).status(JOB)


@pytest.mark.parametrize(
    ("missing", "message"),
    [
        ("EMR_APPLICATION_ID", "EMR_APPLICATION_ID not set"),
        ("EMR_EXECUTION_ROLE_ARN", "EMR_EXECUTION_ROLE_ARN not set"),
        ("JOB_MAIN_URI", "JOB_MAIN_URI not set"),
        ("AWS_REGION", "AWS_REGION is not set"),
    ],
)
def test_missing_settings_are_named(missing: str, message: str) -> None:
    settings = Settings.from_env({k: v for k, v in env("app-1").items() if k != missing})
    with pytest.raises(SettingsError, match=message):
        EmrRunner.from_settings(settings)


def test_a_main_file_outside_s3_and_a_google_catalog_are_refused() -> None:
    with pytest.raises(SettingsError, match="use an s3:// URI"):
        EmrRunner.from_settings(Settings.from_env(env("app-1", JOB_MAIN_URI="gs://deploy/main.py")))
    with pytest.raises(SettingsError, match="biglake is Google's"):
        EmrRunner.from_settings(Settings.from_env(env("app-1", ICEBERG_CATALOG_TYPE="biglake")))
