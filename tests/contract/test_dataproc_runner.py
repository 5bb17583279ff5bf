"""DataprocRunner against a local stub of the Dataproc REST API, through the REAL client.

`BatchControllerClient(transport="rest", credentials=AnonymousCredentials(),
client_options={"api_endpoint": "http://127.0.0.1:PORT"})` sends its genuine requests to the stub:
the REST transport keeps an explicit `http://` scheme in the endpoint (it only prepends its
`url_scheme`, `https`, to a bare host), so no extra option is needed. What is asserted here is what
goes over the wire: paths, query parameters and the JSON body.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import google.auth
import pytest
from google.api_core.retry import Retry
from google.auth.credentials import AnonymousCredentials

from tests.contract.dataproc_stub import DataprocStub
from turnstile.config.settings import Settings
from turnstile.core.errors import JobError, JobServiceUnavailable, SettingsError, Terminal, Transient
from turnstile.jobs.dataproc import DEFAULT_RETRY, DataprocBatchSpec, DataprocRunner, make_client, request_id
from turnstile.jobs.port import JobState

PROJECT, REGION = "proj-1", "europe-west1"
# The job reads its settings on the driver: the runner forwards what it needs.
DRIVER_ENV = {
    "spark.dataproc.driverEnv.ICEBERG_CATALOG": "lake",
    "spark.dataproc.driverEnv.GOOGLE_CLOUD_PROJECT": "proj-1",
}
JOB = "turnstile-sales-orders-0123456789abcdef"
MANIFEST = "gs://bucket/sales/orders/_jobs/turnstile-sales-orders-0123456789abcdef/manifest.json"
CREATE = rf"/v1/projects/{PROJECT}/locations/{REGION}/batches"
# Short backoff. The retry deadline only matters while the service fails: tests that expect an
# eventual answer get a generous one (no flakiness on a loaded machine), tests of a service that
# never answers a short one (fast). No test asserts a count that depends on timing.
PATIENT: Retry = DEFAULT_RETRY.with_delay(initial=0.01, maximum=0.02, multiplier=1.5).with_timeout(10.0)
GIVE_UP_SOON: Retry = PATIENT.with_timeout(0.2)

ENV = {
    "GOOGLE_CLOUD_PROJECT": PROJECT,
    "DATAPROC_REGION": REGION,
    "JOB_MAIN_URI": "gs://deploy/turnstile/job_main.py",
    "JOB_PYTHON_FILE_URIS": "gs://deploy/turnstile/turnstile.zip, gs://deploy/turnstile/deps.zip",
    "JOB_JAR_URIS": "gs://deploy/jars/iceberg-spark-runtime-3.5_2.13-1.10.2.jar,gs://deploy/jars/biglake.jar",
    "DATAPROC_RUNTIME_VERSION": "2.2",
    "DATAPROC_SERVICE_ACCOUNT": "turnstile-jobs@proj-1.iam.gserviceaccount.com",
    "DATAPROC_SUBNETWORK": "projects/proj-1/regions/europe-west1/subnetworks/jobs",
    "DATAPROC_PROPERTIES": '{"spark.executor.instances": "2"}',
    "DATAPROC_LABELS": '{"team": "data"}',
    "ICEBERG_CATALOG": "lake",
    "ICEBERG_CATALOG_TYPE": "biglake",
    "ICEBERG_WAREHOUSE": "gs://warehouse/iceberg",
}


@pytest.fixture
def stub() -> Iterator[DataprocStub]:
    server = DataprocStub().start()
    yield server
    server.stop()


def runner_for(
    stub: DataprocStub, env: dict[str, str] | None = None, retry: Retry = PATIENT
) -> DataprocRunner:
    settings = Settings.from_env(ENV if env is None else env)
    spec = DataprocBatchSpec.from_settings(settings)
    return DataprocRunner(make_client(REGION, stub.url), PROJECT, REGION, spec, retry=retry, timeout=2.0)


# -- submit ---------------------------------------------------------------------------------------


def test_submit_sends_the_whole_batch_and_does_not_wait(stub: DataprocStub) -> None:
    runner_for(stub).submit(JOB, MANIFEST)

    [create] = stub.sent("POST", CREATE)
    assert create.query["batchId"] == JOB
    assert create.query["requestId"] == request_id(JOB)
    assert len(create.query["requestId"]) <= 40
    assert create.body == {
        "pysparkBatch": {
            "mainPythonFileUri": "gs://deploy/turnstile/job_main.py",
            "args": ["--manifest", MANIFEST],
            "pythonFileUris": ["gs://deploy/turnstile/turnstile.zip", "gs://deploy/turnstile/deps.zip"],
            "jarFileUris": [
                "gs://deploy/jars/iceberg-spark-runtime-3.5_2.13-1.10.2.jar",
                "gs://deploy/jars/biglake.jar",
            ],
        },
        "runtimeConfig": {
            "version": "2.2",
            "properties": {
                "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
                "spark.sql.catalog.lake": "org.apache.iceberg.spark.SparkCatalog",
                "spark.sql.catalog.lake.catalog-impl": "org.apache.iceberg.gcp.biglake.BigLakeCatalog",
                "spark.sql.catalog.lake.gcp_project": PROJECT,
                "spark.sql.catalog.lake.gcp_location": REGION,
                "spark.sql.catalog.lake.blms_catalog": "lake",
                "spark.sql.catalog.lake.warehouse": "gs://warehouse/iceberg",
                **DRIVER_ENV,
                "spark.executor.instances": "2",
            },
        },
        "environmentConfig": {
            "executionConfig": {
                "serviceAccount": "turnstile-jobs@proj-1.iam.gserviceaccount.com",
                "subnetworkUri": "projects/proj-1/regions/europe-west1/subnetworks/jobs",
            }
        },
        "labels": {"team": "data", "turnstile-job": "true"},
    }
    # Only the create went out: nobody polled the returned long-running operation.
    assert [(r.method, r.path) for r in stub.requests] == [("POST", CREATE)]
    assert stub.batches[JOB].resource["name"] == f"projects/{PROJECT}/locations/{REGION}/batches/{JOB}"


def test_the_request_id_is_the_same_for_every_submit_of_a_job(stub: DataprocStub) -> None:
    runner_for(stub).submit(JOB, MANIFEST)
    runner_for(stub).submit(JOB, MANIFEST)  # a fresh runner, as in the next function invocation
    first, second = stub.sent("POST", CREATE)
    assert first.query["requestId"] == second.query["requestId"]


@pytest.mark.parametrize(
    ("catalog", "expected"),
    [
        (
            {
                "ICEBERG_CATALOG_TYPE": "rest",
                "ICEBERG_CATALOG_URI": "https://biglake.googleapis.com/iceberg/v1/restcatalog",
            },
            {
                "spark.sql.catalog.lake.type": "rest",
                "spark.sql.catalog.lake.uri": "https://biglake.googleapis.com/iceberg/v1/restcatalog",
                "spark.sql.catalog.lake.warehouse": "gs://warehouse/iceberg",
            },
        ),
        (
            {"ICEBERG_CATALOG_TYPE": "hadoop"},
            {
                "spark.sql.catalog.lake.type": "hadoop",
                "spark.sql.catalog.lake.warehouse": "gs://warehouse/iceberg",
            },
        ),
    ],
)
def test_other_catalog_types(stub: DataprocStub, catalog: dict[str, str], expected: dict[str, str]) -> None:
    runner_for(stub, {**ENV, **catalog}).submit(JOB, MANIFEST)
    [create] = stub.sent("POST", CREATE)
    properties = create.body["runtimeConfig"]["properties"]
    assert properties == {
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        "spark.sql.catalog.lake": "org.apache.iceberg.spark.SparkCatalog",
        **expected,
        **DRIVER_ENV,
        "spark.executor.instances": "2",
    }


def test_dataproc_properties_override_the_catalog_defaults(stub: DataprocStub) -> None:
    env = {**ENV, "DATAPROC_PROPERTIES": '{"spark.sql.catalog.lake.gcp_location": "us"}'}
    runner_for(stub, env).submit(JOB, MANIFEST)
    [create] = stub.sent("POST", CREATE)
    assert create.body["runtimeConfig"]["properties"]["spark.sql.catalog.lake.gcp_location"] == "us"


def test_the_batches_stage_in_the_staging_bucket_given(stub: DataprocStub) -> None:
    """DATAPROC_STAGING_BUCKET: the batches' own bucket for dependencies, driver output and Spark
    history, rather than the project-level buckets Dataproc would create (docs/DEPLOY.md)."""
    env = {**ENV, "DATAPROC_STAGING_BUCKET": "proj-1-turnstile-dataproc"}
    runner_for(stub, env).submit(JOB, MANIFEST)
    [create] = stub.sent("POST", CREATE)
    assert create.body["environmentConfig"]["executionConfig"] == {
        "serviceAccount": "turnstile-jobs@proj-1.iam.gserviceaccount.com",
        "subnetworkUri": "projects/proj-1/regions/europe-west1/subnetworks/jobs",
        "stagingBucket": "proj-1-turnstile-dataproc",
    }
    alone = {k: v for k, v in env.items() if k not in ("DATAPROC_SERVICE_ACCOUNT", "DATAPROC_SUBNETWORK")}
    runner_for(stub, alone).submit("turnstile-sales-orders-fedcba9876543210", MANIFEST)
    second = stub.sent("POST", CREATE)[1]
    assert second.body["environmentConfig"] == {
        "executionConfig": {"stagingBucket": "proj-1-turnstile-dataproc"}
    }


def test_optional_execution_fields_are_left_out(stub: DataprocStub) -> None:
    env = {k: v for k, v in ENV.items() if k not in ("DATAPROC_SERVICE_ACCOUNT", "DATAPROC_SUBNETWORK")}
    runner_for(stub, env).submit(JOB, MANIFEST)
    [create] = stub.sent("POST", CREATE)
    assert "environmentConfig" not in create.body  # the service's defaults apply


def test_a_second_submit_of_the_same_id_attaches(stub: DataprocStub) -> None:
    runner = runner_for(stub)
    runner.submit(JOB, MANIFEST)
    stub.set_state(JOB, "RUNNING")
    runner.submit(JOB, "gs://bucket/other-manifest.json")  # 409 ALREADY_EXISTS: returns normally

    assert len(stub.sent("POST", CREATE)) == 2
    assert list(stub.batches) == [JOB]
    assert stub.batches[JOB].resource["pysparkBatch"]["args"] == ["--manifest", MANIFEST]
    status = runner.status(JOB)
    assert status is not None and status.state is JobState.RUNNING


def test_a_repeated_request_id_gets_the_first_operation(stub: DataprocStub) -> None:
    # What CreateBatchRequest.request_id documents: the second request is ignored and the first
    # operation comes back (200, not 409). Either answer is an attach for the runner.
    stub.remember_request_ids = True
    runner = runner_for(stub)
    runner.submit(JOB, MANIFEST)
    runner.submit(JOB, MANIFEST)
    assert len(stub.sent("POST", CREATE)) == 2
    assert list(stub.batches) == [JOB]


def test_a_batch_created_elsewhere_is_attached_to(stub: DataprocStub) -> None:
    stub.add_batch(PROJECT, REGION, JOB, state="SUCCEEDED")
    runner = runner_for(stub)
    runner.submit(JOB, MANIFEST)
    status = runner.status(JOB)
    assert status is not None and status.state is JobState.SUCCEEDED


def test_a_service_that_keeps_answering_503_is_unavailable(stub: DataprocStub) -> None:
    stub.fail(10_000, 503)
    with pytest.raises(JobServiceUnavailable) as caught:
        runner_for(stub, retry=GIVE_UP_SOON).submit(JOB, MANIFEST)
    assert isinstance(caught.value, Transient)
    assert JOB in str(caught.value)
    assert "503" in str(caught.value)
    assert stub.batches == {}


@pytest.mark.parametrize(
    ("code", "status"), [(429, "RESOURCE_EXHAUSTED"), (500, "INTERNAL"), (503, "UNAVAILABLE")]
)
def test_transient_answers_are_retried_with_the_same_request_id(
    stub: DataprocStub, code: int, status: str
) -> None:
    stub.fail(2, code, status)
    runner_for(stub).submit(JOB, MANIFEST)
    creates = stub.sent("POST", CREATE)
    assert len(creates) == 3
    assert {c.query["requestId"] for c in creates} == {request_id(JOB)}
    assert list(stub.batches) == [JOB]


def test_aborted_is_retried_not_taken_for_an_attach(stub: DataprocStub) -> None:
    stub.fail(2, 409, "ABORTED", "concurrent modification")  # the same HTTP code as ALREADY_EXISTS
    runner_for(stub).submit(JOB, MANIFEST)
    assert len(stub.sent("POST", CREATE)) == 3
    assert list(stub.batches) == [JOB]


def test_aborted_for_good_is_unavailable(stub: DataprocStub) -> None:
    stub.fail(10_000, 409, "ABORTED", "concurrent modification")
    with pytest.raises(JobServiceUnavailable):
        runner_for(stub, retry=GIVE_UP_SOON).submit(JOB, MANIFEST)


@pytest.mark.parametrize(
    ("code", "status"), [(400, "INVALID_ARGUMENT"), (403, "PERMISSION_DENIED"), (400, "FAILED_PRECONDITION")]
)
def test_a_refused_batch_is_a_terminal_job_error(stub: DataprocStub, code: int, status: str) -> None:
    stub.fail(1, code, status, "Runtime version 9.9 is not supported")
    with pytest.raises(JobError) as caught:
        runner_for(stub).submit(JOB, MANIFEST)
    assert isinstance(caught.value, Terminal)
    assert JOB in str(caught.value)
    assert "Runtime version 9.9 is not supported" in str(caught.value)
    assert len(stub.sent("POST", CREATE)) == 1  # not retried


def test_an_unreachable_service_is_unavailable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again when the block ends: connection refused
    spec = DataprocBatchSpec(main_python_file_uri="gs://deploy/main.py")
    runner = DataprocRunner(
        make_client(REGION, f"http://127.0.0.1:{port}"),
        PROJECT,
        REGION,
        spec,
        retry=GIVE_UP_SOON,
        timeout=2.0,
    )
    with pytest.raises(JobServiceUnavailable):
        runner.submit(JOB, MANIFEST)
    with pytest.raises(JobServiceUnavailable):
        runner.status(JOB)


# -- status ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("api_state", "expected"),
    [
        ("STATE_UNSPECIFIED", JobState.PENDING),
        ("PENDING", JobState.PENDING),
        ("RUNNING", JobState.RUNNING),
        ("CANCELLING", JobState.CANCELLING),
        ("CANCELLED", JobState.CANCELLED),
        ("SUCCEEDED", JobState.SUCCEEDED),
        ("FAILED", JobState.FAILED),
    ],
)
def test_every_batch_state_maps(stub: DataprocStub, api_state: str, expected: JobState) -> None:
    runner = runner_for(stub)
    runner.submit(JOB, MANIFEST)
    stub.set_state(JOB, api_state)
    status = runner.status(JOB)
    assert status is not None
    assert (status.job_id, status.state) == (JOB, expected)
    [get] = stub.sent("GET", rf"/v1/projects/{PROJECT}/locations/{REGION}/batches/{JOB}")
    assert get.body is None


def test_a_failed_batch_carries_its_state_message(stub: DataprocStub) -> None:
    runner = runner_for(stub)
    runner.submit(JOB, MANIFEST)
    stub.set_state(JOB, "FAILED", "Job failed with message [AnalysisException: table not found]")
    status = runner.status(JOB)
    assert status is not None and status.state is JobState.FAILED
    assert status.detail == "Job failed with message [AnalysisException: table not found]"


def test_only_a_failed_batch_has_a_detail(stub: DataprocStub) -> None:
    runner = runner_for(stub)
    runner.submit(JOB, MANIFEST)
    stub.set_state(JOB, "SUCCEEDED", "done")
    status = runner.status(JOB)
    assert status is not None and status.detail is None


def test_an_unknown_batch_has_no_status(stub: DataprocStub) -> None:
    assert runner_for(stub).status("turnstile-never-submitted") is None


def test_status_when_the_service_keeps_failing(stub: DataprocStub) -> None:
    stub.fail(10_000, 503)
    with pytest.raises(JobServiceUnavailable):
        runner_for(stub, retry=GIVE_UP_SOON).status(JOB)


def test_status_refused_is_a_job_error(stub: DataprocStub) -> None:
    stub.fail(1, 403, "PERMISSION_DENIED", "dataproc.batches.get denied")
    with pytest.raises(JobError, match=r"dataproc\.batches\.get denied"):
        runner_for(stub).status(JOB)


# -- cancel ---------------------------------------------------------------------------------------


def test_cancel_cancels_the_batch_operation(stub: DataprocStub) -> None:
    runner = runner_for(stub)
    runner.submit(JOB, MANIFEST)
    stub.set_state(JOB, "RUNNING")
    runner.cancel(JOB)
    [cancel] = stub.sent("POST", r"/v1/.*:cancel")
    assert cancel.path == f"/v1/{stub.batches[JOB].operation}:cancel"
    assert cancel.path == f"/v1/projects/{PROJECT}/regions/{REGION}/operations/op-1:cancel"
    status = runner.status(JOB)
    assert status is not None and status.state is JobState.CANCELLING


@pytest.mark.parametrize("state", ["SUCCEEDED", "FAILED", "CANCELLED"])
def test_cancel_leaves_a_finished_batch_alone(stub: DataprocStub, state: str) -> None:
    runner = runner_for(stub)
    runner.submit(JOB, MANIFEST)
    stub.set_state(JOB, state)
    runner.cancel(JOB)
    assert stub.sent("POST", r"/v1/.*:cancel") == []
    status = runner.status(JOB)
    assert status is not None and status.state.value == state


def test_cancel_of_an_unknown_batch_is_a_no_op(stub: DataprocStub) -> None:
    runner_for(stub).cancel("turnstile-never-submitted")
    assert stub.sent("POST", r"/v1/.*:cancel") == []


# -- from_settings --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("missing", "variable"),
    [
        ("GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_PROJECT"),
        ("JOB_MAIN_URI", "JOB_MAIN_URI"),
        ("ICEBERG_WAREHOUSE", "ICEBERG_WAREHOUSE"),
    ],
)
def test_from_settings_names_a_missing_variable(missing: str, variable: str) -> None:
    env = {k: v for k, v in ENV.items() if k != missing}
    with pytest.raises(SettingsError, match=variable):
        DataprocRunner.from_settings(Settings.from_env(env))


def test_a_rest_catalog_needs_its_uri() -> None:
    env = {**ENV, "ICEBERG_CATALOG_TYPE": "rest"}
    with pytest.raises(SettingsError, match="ICEBERG_CATALOG_URI"):
        DataprocRunner.from_settings(Settings.from_env(env))


def test_from_settings_with_an_endpoint_talks_to_it(stub: DataprocStub) -> None:
    runner = DataprocRunner.from_settings(Settings.from_env({**ENV, "DATAPROC_ENDPOINT": stub.url}))
    runner.submit(JOB, MANIFEST)
    [create] = stub.sent("POST", CREATE)
    assert create.query["batchId"] == JOB
    assert create.body["pysparkBatch"]["args"] == ["--manifest", MANIFEST]
    status = runner.status(JOB)
    assert status is not None and status.state is JobState.PENDING


def test_without_an_endpoint_the_client_targets_the_regional_api(monkeypatch: pytest.MonkeyPatch) -> None:
    # Default credentials are not available here; stand in anonymous ones to build the client.
    monkeypatch.setattr(google.auth, "default", lambda *a, **k: (AnonymousCredentials(), PROJECT))  # type: ignore[no-untyped-call]
    runner = DataprocRunner.from_settings(Settings.from_env(ENV))
    client = runner._client
    assert client.api_endpoint == f"{REGION}-dataproc.googleapis.com:443"
    # The transport the stub tests exercise, not the library's default gRPC.
    assert client.transport.kind == "rest"


def test_the_job_dependencies_archive_goes_with_the_batch(stub: DataprocStub) -> None:
    archive = "gs://deploy/turnstile/deps.zip#turnstile_deps"
    runner_for(stub, {**ENV, "JOB_ARCHIVE_URIS": archive}).submit(JOB, MANIFEST)
    [create] = stub.sent("POST", CREATE)
    assert create.body["pysparkBatch"]["archiveUris"] == [archive]
