"""EMR Serverless on the session's moto server: applications, and run states set as the service would."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from moto.core import DEFAULT_ACCOUNT_ID
from moto.emrserverless.models import emrserverless_backends

from tests.conftest import AWS_REGION
from turnstile.jobs.emr import make_client

ROLE_ARN = f"arn:aws:iam::{DEFAULT_ACCOUNT_ID}:role/turnstile-jobs"


def emr_client(moto_url: str) -> Any:
    return make_client(AWS_REGION, moto_url)


def create_application(moto_url: str, name: str = "turnstile") -> str:
    """A Spark application; each test gets its own, so runs never mix."""
    created = emr_client(moto_url).create_application(name=name, releaseLabel="emr-7.5.0", type="SPARK")
    return str(created["applicationId"])


def service_runs(application_id: str) -> list[Any]:
    """The runs as the service holds them (the server runs in this process): what the API hides,
    such as each run's client token."""
    return list(emrserverless_backends[DEFAULT_ACCOUNT_ID][AWS_REGION].job_runs.get(application_id, []))


def set_run_state(application_id: str, run_id: str, state: str, details: str | None = None) -> None:
    """Move a run to `state` (moto starts every run in SUCCESS)."""
    [run] = [r for r in service_runs(application_id) if r.id == run_id]
    run.state = state
    run.state_details = details


def set_run_created(application_id: str, run_id: str, when: datetime) -> None:
    """Stamp a run's creation time (moto stamps every run with midnight of the day, in naive UTC)."""
    [run] = [r for r in service_runs(application_id) if r.id == run_id]
    run.created_at = when.astimezone(UTC).replace(tzinfo=None)


def runs_named(moto_url: str, application_id: str, name: str) -> list[dict[str, Any]]:
    client = emr_client(moto_url)
    runs: list[dict[str, Any]] = []
    request: dict[str, Any] = {"applicationId": application_id}
    while True:
        try:
            page = client.list_job_runs(**request)
        except client.exceptions.ResourceNotFoundException:
            return []  # moto's answer for an application without runs
        runs.extend(run for run in page["jobRuns"] if run.get("name") == name)
        if not page.get("nextToken"):
            return runs
        request["nextToken"] = page["nextToken"]
