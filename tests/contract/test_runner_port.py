"""One contract for every cloud JobRunner: Dataproc Serverless (the local stub of its REST API) and
EMR Serverless (a moto server, run records in a moto S3 bucket), each through its real client library."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from tests.aws.moto_emr import ROLE_ARN, create_application, runs_named, set_run_state
from tests.conftest import AWS_REGION
from tests.contract.dataproc_stub import DataprocStub
from turnstile.config.settings import Settings
from turnstile.jobs.dataproc import DEFAULT_RETRY, DataprocBatchSpec, DataprocRunner
from turnstile.jobs.dataproc import make_client as dataproc_client
from turnstile.jobs.emr import EmrRunner
from turnstile.jobs.port import JobRunner, JobState
from turnstile.store.s3 import S3Store

JOB = "turnstile-sales-orders-0123456789abcdef"
OTHER = "turnstile-sales-orders-fedcba9876543210"
PROJECT, REGION = "proj-1", "europe-west1"


@dataclass
class Service:
    """A runner, and the test's hands on the service behind it."""

    runner: JobRunner
    manifest: str
    set_state: Callable[[str, str, str], None]  # job id, service state, message
    jobs_started: Callable[[str], int]  # how many jobs the service holds under this id
    states: dict[JobState, str]  # the service's name of each turnstile state


@pytest.fixture
def dataproc() -> Iterator[Service]:
    stub = DataprocStub().start()
    settings = Settings.from_env(
        {
            "GOOGLE_CLOUD_PROJECT": PROJECT,
            "JOB_MAIN_URI": "gs://deploy/main.py",
            "ICEBERG_WAREHOUSE": "gs://wh/iceberg",
        }
    )
    retry = DEFAULT_RETRY.with_delay(initial=0.01, maximum=0.02).with_timeout(5.0)
    runner = DataprocRunner(
        dataproc_client(REGION, stub.url),
        PROJECT,
        REGION,
        DataprocBatchSpec.from_settings(settings),
        retry=retry,
    )
    yield Service(
        runner,
        "gs://lake/sales/orders/_turnstile/jobs/m.json",
        stub.set_state,
        lambda job_id: int(job_id in stub.batches),
        {s: s.value for s in JobState},
    )
    stub.stop()


@pytest.fixture
def emr(moto_server: str, s3_store: S3Store) -> Service:
    application = create_application(moto_server)
    settings = Settings.from_env(
        {
            "AWS_REGION": AWS_REGION,
            "AWS_ENDPOINT_URL": moto_server,
            "EMR_APPLICATION_ID": application,
            "EMR_EXECUTION_ROLE_ARN": ROLE_ARN,
            "JOB_MAIN_URI": "s3://deploy/main.py",
            "ICEBERG_WAREHOUSE": "s3://warehouse/iceberg",
        }
    )
    runner = EmrRunner.from_settings(settings, s3_store)  # its run records in a moto bucket

    def set_state(job_id: str, state: str, message: str) -> None:
        run_id = runner.run_id(job_id)
        assert run_id is not None
        set_run_state(application, run_id, state, message or None)

    return Service(
        runner,
        "s3://lake/sales/orders/_turnstile/jobs/m.json",
        set_state,
        lambda job_id: len(runs_named(moto_server, application, job_id)),
        {s: s.value for s in JobState} | {JobState.SUCCEEDED: "SUCCESS"},
    )


@pytest.fixture(params=["dataproc", "emr"])
def service(request: pytest.FixtureRequest) -> Service:
    return request.getfixturevalue(request.param)  # type: ignore[no-any-return]


def test_an_unknown_job_has_no_status(service: Service) -> None:
    assert service.runner.status(JOB) is None


def test_a_submitted_job_is_known_and_has_not_failed(service: Service) -> None:
    service.runner.submit(JOB, service.manifest)
    status = service.runner.status(JOB)
    assert status is not None
    assert status.job_id == JOB
    assert status.state in (JobState.PENDING, JobState.RUNNING, JobState.SUCCEEDED)
    assert service.runner.status(OTHER) is None


def test_submitting_the_same_job_twice_starts_it_once(service: Service) -> None:
    service.runner.submit(JOB, service.manifest)
    service.runner.submit(JOB, service.manifest)
    assert service.jobs_started(JOB) == 1
    service.runner.submit(OTHER, service.manifest)
    assert service.jobs_started(OTHER) == 1


@pytest.mark.parametrize("state", list(JobState))
def test_the_service_state_reads_as_the_same_job_state(service: Service, state: JobState) -> None:
    service.runner.submit(JOB, service.manifest)
    service.set_state(JOB, service.states[state], "")
    status = service.runner.status(JOB)
    assert status is not None and status.state is state


def test_a_failed_job_says_why(service: Service) -> None:
    service.runner.submit(JOB, service.manifest)
    service.set_state(JOB, service.states[JobState.FAILED], "Job aborted: executor lost")
    status = service.runner.status(JOB)
    assert status is not None
    assert (status.state, status.detail) == (JobState.FAILED, "Job aborted: executor lost")


def test_cancelling_an_unknown_job_does_nothing(service: Service) -> None:
    service.runner.cancel(JOB)
    assert service.runner.status(JOB) is None


def test_cancelling_a_running_job_stops_it(service: Service) -> None:
    service.runner.submit(JOB, service.manifest)
    service.set_state(JOB, service.states[JobState.RUNNING], "")
    service.runner.cancel(JOB)
    status = service.runner.status(JOB)
    assert status is not None and status.state in (JobState.CANCELLING, JobState.CANCELLED)


def test_cancelling_a_finished_job_leaves_it_as_it_ended(service: Service) -> None:
    service.runner.submit(JOB, service.manifest)
    service.set_state(JOB, service.states[JobState.SUCCEEDED], "")
    service.runner.cancel(JOB)
    status = service.runner.status(JOB)
    assert status is not None and status.state is JobState.SUCCEEDED
