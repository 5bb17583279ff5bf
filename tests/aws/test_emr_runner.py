"""EmrRunner against EMR Serverless on a real moto server, through the real boto3 client, with its
run records in a moto S3 bucket."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.aws.lambda_harness import start_lambda_host
from tests.aws.moto_emr import (
    ROLE_ARN,
    create_application,
    emr_client,
    runs_named,
    service_runs,
    set_run_created,
    set_run_state,
)
from tests.conftest import AWS_REGION
from turnstile.config.settings import Settings
from turnstile.core.errors import JobDeferred, JobError, JobServiceUnavailable, SettingsError
from turnstile.jobs.emr import ICEBERG_RUNTIME_ON_EMR, JOB_TAG, EmrJobSpec, EmrRunner, make_client
from turnstile.jobs.emr import client_token as request_id
from turnstile.jobs.emr_runs import RunRecord, RunRecords
from turnstile.jobs.port import JobState
from turnstile.state.records import BatchFailure
from turnstile.store.memory import MemoryStore
from turnstile.store.s3 import S3Store

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


@pytest.fixture
def runner_for(moto_server: str, s3_store: S3Store) -> Any:
    """A runner for an application, as wiring_aws builds one: run records in the test's bucket."""

    def build(application_id: str, **extra: str) -> EmrRunner:
        settings = Settings.from_env(env(application_id, **extra) | {"AWS_ENDPOINT_URL": moto_server})
        return EmrRunner.from_settings(settings, s3_store)

    return build


def test_submit_starts_one_named_tagged_run_with_the_whole_driver(
    runner_for: Any, moto_server: str, application: str
) -> None:
    runner_for(application).submit(JOB, MANIFEST)

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


def test_the_client_token_is_derived_from_the_job_id(
    runner_for: Any, moto_server: str, application: str
) -> None:
    runner_for(application).submit(JOB, MANIFEST)
    [run] = service_runs(application)
    assert run.client_token == request_id(JOB)


def test_a_repeated_submit_attaches_instead_of_starting_a_second_run(
    runner_for: Any, moto_server: str, application: str
) -> None:
    # moto does not de-duplicate client tokens: only the runner's own lookup keeps this at one run.
    runner = runner_for(application)
    runner.submit(JOB, MANIFEST)
    runner_for(application).submit(JOB, MANIFEST)  # another invocation, same job
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
    runner_for: Any, application: str, service_state: str, expected: JobState
) -> None:
    runner = runner_for(application)
    runner.submit(JOB, MANIFEST)
    run_id = runner.run_id(JOB)
    assert run_id is not None
    set_run_state(application, run_id, service_state, "exit code 1" if service_state == "FAILED" else None)
    status = runner.status(JOB)
    assert status is not None
    assert status.state is expected
    assert status.detail == ("exit code 1" if expected is JobState.FAILED else None)


def test_a_gcs_manifest_is_refused_with_what_to_use_instead(
    runner_for: Any, moto_server: str, application: str
) -> None:
    with pytest.raises(JobError, match=r"reads manifests from S3.*JOB_RUNNER=dataproc"):
        runner_for(application).submit(JOB, "gs://bucket/sales/orders/m.json")
    assert runs_named(moto_server, application, JOB) == []


def test_an_unknown_application_is_a_terminal_error_naming_the_setting(
    runner_for: Any, s3_store: S3Store
) -> None:
    with pytest.raises(JobError, match="EMR_APPLICATION_ID"):
        runner_for("00nosuchapp0000").submit(JOB, MANIFEST)
    assert s3_store.read(RunRecords.name(JOB)) is None  # a refused submission leaves no record


def test_an_unreachable_service_is_transient(application: str, s3_store: S3Store) -> None:
    spec = EmrJobSpec.from_settings(Settings.from_env(env(application)))
    client = make_client(AWS_REGION, "http://127.0.0.1:9", max_attempts=2)  # nothing listens there
    with pytest.raises(JobServiceUnavailable, match="emr-serverless"):
        EmrRunner(client, spec, s3_store).status(JOB)
    with pytest.raises(JobServiceUnavailable, match="emr-serverless"):
        EmrRunner(client, spec, s3_store).submit(JOB, MANIFEST)
    assert s3_store.read(RunRecords.name(JOB)) is not None  # the run may exist: its window is kept


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
        EmrRunner.from_settings(settings, MemoryStore("lake"))


def test_a_main_file_outside_s3_and_a_google_catalog_are_refused() -> None:
    with pytest.raises(SettingsError, match="use an s3:// URI"):
        EmrRunner.from_settings(
            Settings.from_env(env("app-1", JOB_MAIN_URI="gs://deploy/main.py")), MemoryStore("lake")
        )
    with pytest.raises(SettingsError, match="biglake is Google's"):
        EmrRunner.from_settings(
            Settings.from_env(env("app-1", ICEBERG_CATALOG_TYPE="biglake")), MemoryStore("lake")
        )


FOREIGN_ROLE = "arn:aws:iam::999999999999:role/turnstile-jobs"
"""A role of another account: EMR answers AccessDeniedException, as it does while the Lambda's
iam:PassRole on the execution role is missing or still propagating."""


def test_a_role_it_may_not_pass_is_deferred_naming_the_grants(
    runner_for: Any, application: str, s3_store: S3Store
) -> None:
    runner = runner_for(application, EMR_EXECUTION_ROLE_ARN=FOREIGN_ROLE)
    with pytest.raises(JobDeferred, match="AccessDeniedException") as refused:
        runner.submit(JOB, MANIFEST)
    assert "iam:PassRole on EMR_EXECUTION_ROLE_ARN" in str(refused.value)
    assert "emr-serverless:StartJobRun and emr-serverless:TagResource" in str(refused.value)
    assert s3_store.read(RunRecords.name(JOB)) is None  # no run exists: the retry submits afresh


def test_an_unordered_batch_whose_submit_is_refused_is_reported_failed_and_retried_later(
    monkeypatch: pytest.MonkeyPatch, runner_for: Any, application: str, s3_store: S3Store
) -> None:
    host = start_lambda_host(
        monkeypatch, s3_store, lambda _store: runner_for(application, EMR_EXECUTION_ROLE_ARN=FOREIGN_ROLE)
    )
    host.put_batch("web/clicks/2024/05/01/10")
    host.drain()
    assert host.outcomes.count("failed") == 1 and "submitted" not in host.outcomes
    [listed] = s3_store.list_objects("web/clicks/_turnstile/failures/")
    stored = s3_store.read(listed.name)
    assert stored is not None
    failure = BatchFailure.decode(stored.data, listed.name)
    assert failure.transient and failure.retry_at is not None and "iam:PassRole" in failure.error


# -- the lookup stays bounded: records, not the application's history ------------------------------------


EPOCH = datetime.fromtimestamp(0, UTC)
ACTIVE = {"SUBMITTED", "PENDING", "SCHEDULED", "QUEUED", "RUNNING", "CANCELLING"}


@dataclass
class Listings:
    """What the runner's `ListJobRuns` calls asked for and got, seen through botocore's own event
    hooks on the real client."""

    requests: list[dict[str, Any]] = field(default_factory=list)
    names: list[str] = field(default_factory=list)

    def watch(self, client: Any) -> Any:
        client.meta.events.register(
            "provide-client-params.emr-serverless.ListJobRuns",
            lambda params, **_: self.requests.append(params),
        )
        client.meta.events.register(
            "after-call.emr-serverless.ListJobRuns",
            lambda parsed, **_: self.names.extend(run.get("name", "") for run in parsed.get("jobRuns", [])),
        )
        return client


@pytest.fixture
def history(moto_server: str, application: str) -> Iterator[list[str]]:
    """120 finished runs of other jobs over the last 29 days, as an application shared by many
    tables holds (EMR lists 50 a page): the names of the runs."""
    client = emr_client(moto_server)
    names = []
    for i in range(120):
        name = f"turnstile-other-table-{i:016x}"
        client.start_job_run(
            applicationId=application,
            clientToken=name,
            executionRoleArn=ROLE_ARN,
            name=name,
            jobDriver={"sparkSubmit": {"entryPoint": "s3://deploy/turnstile/job_main.py"}},
        )
        names.append(name)
    for i, run in enumerate(service_runs(application)):
        set_run_created(application, run.id, datetime.now(UTC) - timedelta(days=29, minutes=-i))
    yield names


def watched_runner(moto_server: str, application: str, store: S3Store, listings: Listings) -> EmrRunner:
    spec = EmrJobSpec.from_settings(Settings.from_env(env(application)))
    return EmrRunner(listings.watch(emr_client(moto_server)), spec, store)


def test_no_lookup_pages_through_the_applications_old_runs(
    moto_server: str, application: str, s3_store: S3Store, history: list[str]
) -> None:
    listings = Listings()
    runner = watched_runner(moto_server, application, s3_store, listings)
    assert runner.status(JOB) is None  # an unknown job: the protocol asks before choosing a job id
    runner.submit(JOB, MANIFEST)
    runner.submit(JOB, MANIFEST)  # a duplicate event: attaches
    status = runner.status(JOB)
    assert status is not None and status.state is JobState.SUCCEEDED
    runner.cancel(JOB)
    assert len(runs_named(moto_server, application, JOB)) == 1
    assert not set(listings.names) & set(history), "a lookup listed runs of other jobs"
    assert len(listings.requests) == 2  # the unknown job, and the first submit (runs older than records)
    for request in listings.requests:  # each listing is bounded by state or by a recent creation time
        recent = request.get("createdAtAfter", EPOCH) > datetime.now(UTC) - timedelta(hours=1)
        assert recent or set(request.get("states", [])) <= ACTIVE, request


def test_the_record_keeps_the_submission_and_its_run(
    runner_for: Any, application: str, s3_store: S3Store
) -> None:
    runner = runner_for(application)
    runner.submit(JOB, MANIFEST)
    found = s3_store.read(RunRecords.name(JOB))
    assert found is not None and RunRecords.name(JOB) == f"_turnstile/emr-runs/{JOB}.json"
    record = RunRecord.decode(found)
    assert record is not None
    assert (record.application_id, record.run_id) == (application, runner.run_id(JOB))
    assert datetime.now(UTC) - record.submitted_at < timedelta(minutes=1)


def test_a_submit_that_crashed_before_recording_its_run_is_found_by_its_time(
    moto_server: str, application: str, s3_store: S3Store, history: list[str]
) -> None:
    listings = Listings()
    runner = watched_runner(moto_server, application, s3_store, listings)
    runner.submit(JOB, MANIFEST)
    [run] = runs_named(moto_server, application, JOB)
    set_run_created(application, run["id"], datetime.now(UTC))  # moto stamps midnight; EMR stamps now
    crashed = RunRecord(application, datetime.now(UTC) - timedelta(seconds=30))  # no run id recorded
    s3_store.write(RunRecords.name(JOB), crashed.encode())
    assert runner.run_id(JOB) == run["id"]
    runner.submit(JOB, MANIFEST)  # the retried submit attaches, and records the run
    assert len(runs_named(moto_server, application, JOB)) == 1
    record = RunRecords(s3_store, application).get(JOB)
    assert record is not None and record.run_id == run["id"]
    assert not set(listings.names) & set(history)


def test_a_run_started_before_records_were_kept_is_found_while_it_is_active(
    moto_server: str, application: str, s3_store: S3Store, history: list[str]
) -> None:
    runner = watched_runner(moto_server, application, s3_store, Listings())
    started = emr_client(moto_server).start_job_run(
        applicationId=application,
        clientToken=request_id(JOB),
        executionRoleArn=ROLE_ARN,
        name=JOB,
        jobDriver={"sparkSubmit": {"entryPoint": "s3://deploy/turnstile/job_main.py"}},
    )
    set_run_state(application, started["jobRunId"], "RUNNING")
    status = runner.status(JOB)
    assert status is not None and status.state is JobState.RUNNING
    runner.submit(JOB, MANIFEST)  # an upgrade while it runs: attaches
    assert len(runs_named(moto_server, application, JOB)) == 1
    assert runner.run_id(JOB) == started["jobRunId"]


def test_a_recorded_run_the_application_no_longer_has_is_unknown(
    runner_for: Any, application: str, s3_store: S3Store
) -> None:
    gone = RunRecord(application, datetime.now(UTC) - timedelta(days=40), "00nosuchrun0000")
    s3_store.write(RunRecords.name(JOB), gone.encode())
    assert runner_for(application).status(JOB) is None


def test_a_record_of_another_application_is_not_this_ones(
    runner_for: Any, moto_server: str, application: str, s3_store: S3Store
) -> None:
    s3_store.write(RunRecords.name(JOB), RunRecord("00otherapp", datetime.now(UTC), "00run").encode())
    runner = runner_for(application)
    assert runner.status(JOB) is None
    runner.submit(JOB, MANIFEST)
    assert len(runs_named(moto_server, application, JOB)) == 1
    assert runner.status(JOB) is not None
