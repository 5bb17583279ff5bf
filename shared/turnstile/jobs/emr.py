"""JobRunner adapter on EMR Serverless (boto3 `emr-serverless`).

One turnstile job is one Spark job run in the EMR Serverless application EMR_APPLICATION_ID,
named after the job id and tagged with it. EMR cannot find a run by name, so the runner records
each job's submission and run id in the bucket (`turnstile.jobs.emr_runs`), and a lookup never
pages through the application's history:

- lookup: the job's record; its run id, or else the runs created since the recorded submission
  (`ListJobRuns(createdAtAfter=...)`), newest named after the job. Without a record, only the
  application's active runs (`states`) are searched: a run from before records were kept.
- submit: record the submission (create-if-absent), then the lookup; when a run has the job,
  attach (return). Otherwise `StartJobRun(name=job_id, clientToken=client_token(job_id),
  tags={JOB_TAG: job_id})` and record its run id. EMR Serverless itself returns the first run for a
  repeated client token; the record makes a retried or repeated submit attach even where the token
  is not de-duplicated (moto), or after the token's idempotency window.
- status: the lookup, then `GetJobRun` for the run's current state and its failure details.
- cancel: `CancelJobRun` on the run, unless it has finished.
- launch: a warm driver (DRIVER=warm, `turnstile.jobs.warm_runner`) is a job run too, named after
  the driver id and tagged with it, running DRIVER_MAIN_URI with the driver's arguments; it is
  submitted, recorded, read and cancelled as a job is.

The job reads its manifest from S3 and the batch's files through EMRFS; it writes Iceberg through
Iceberg's S3FileIO (`emr_catalog_properties`). Throttling, 5xx and connection failures that outlast
botocore's retries surface as `JobServiceUnavailable`; AccessDeniedException is `JobDeferred` (a
submit refused so is retried by the protocol with backoff, as Dataproc's PERMISSION_DENIED); any
other refusal is `JobError`.
"""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

from turnstile.config.settings import Settings
from turnstile.core.errors import JobDeferred, JobError, JobServiceUnavailable, SettingsError
from turnstile.jobs.catalog import S3_FILE_IO, iceberg_catalog_properties
from turnstile.jobs.emr_runs import RunRecord, RunRecords
from turnstile.jobs.port import JobState, JobStatus
from turnstile.names.uris import parse_bucket_uri
from turnstile.store.port import ObjectStore

JOB_TAG = "turnstile-job-id"
"""Tag put on every job run turnstile starts; its value is the job id."""

ICEBERG_RUNTIME_ON_EMR = "/usr/share/aws/iceberg/lib/iceberg-spark3-runtime.jar"
"""The Iceberg Spark runtime (with its AWS module: S3FileIO, GlueCatalog) shipped on EMR images;
used when JOB_JAR_URIS names no jar."""

LOOKBACK = timedelta(days=30)
"""How far back a job without a record is searched among the application's active runs."""

_STATES: dict[str, JobState] = {
    "SUBMITTED": JobState.PENDING,
    "PENDING": JobState.PENDING,
    "SCHEDULED": JobState.PENDING,
    "QUEUED": JobState.PENDING,
    "RUNNING": JobState.RUNNING,
    "SUCCESS": JobState.SUCCEEDED,
    "FAILED": JobState.FAILED,
    "CANCELLING": JobState.CANCELLING,
    "CANCELLED": JobState.CANCELLED,
}
_ACTIVE = [name for name, state in _STATES.items() if not state.finished]
_TRANSIENT_CODES = {"ThrottlingException", "InternalServerException", "ServiceUnavailableException"}


def client_token(job_id: str) -> str:
    """Idempotency token of StartJobRun: the same job always sends the same one."""
    return hashlib.sha256(job_id.encode()).hexdigest()[:64]


def emr_catalog_properties(settings: Settings) -> dict[str, str]:
    """Spark properties that make `settings.iceberg_catalog` an Iceberg catalog on S3.

    Files go through Iceberg's own S3FileIO (`io-impl`), part of the Iceberg runtime on EMR. Types:
    `glue` (the Glue Data Catalog: `catalog-impl` GlueCatalog and an s3:// warehouse), `rest`
    (`uri`, e.g. S3 Tables' or Glue's Iceberg REST endpoint) and `hadoop` (an s3:// warehouse; a
    Hadoop catalog commits by rename, so only for a single writer). BigLake is Google's."""
    if settings.iceberg_catalog_type == "biglake":
        raise SettingsError(
            "ICEBERG_CATALOG_TYPE=biglake is Google's catalog; with JOB_RUNNER=emr use glue or rest"
        )
    props = iceberg_catalog_properties(
        settings.iceberg_catalog,
        settings.iceberg_catalog_type,
        warehouse=settings.iceberg_warehouse,
        uri=settings.iceberg_catalog_uri,
        io_impl=S3_FILE_IO,
    )
    # The job reads its settings on the driver, whose environment the Lambda's does not reach.
    props["spark.emr-serverless.driverEnv.ICEBERG_CATALOG"] = settings.iceberg_catalog
    if settings.aws_region:
        props["spark.emr-serverless.driverEnv.AWS_REGION"] = settings.aws_region
    return props


@dataclass(frozen=True)
class EmrJobSpec:
    """Everything of a job run that does not depend on the job: built once from settings."""

    application_id: str
    execution_role_arn: str
    entry_point: str
    python_file_uris: tuple[str, ...] = ()
    jar_uris: tuple[str, ...] = (ICEBERG_RUNTIME_ON_EMR,)
    properties: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_settings(cls, settings: Settings) -> EmrJobSpec:
        missing = [
            variable
            for variable, value in (
                ("EMR_APPLICATION_ID", settings.emr_application_id),
                ("EMR_EXECUTION_ROLE_ARN", settings.emr_execution_role_arn),
                ("JOB_MAIN_URI", settings.job_main_uri),
            )
            if not value
        ]
        application, role, main = (
            settings.emr_application_id,
            settings.emr_execution_role_arn,
            settings.job_main_uri,
        )
        if missing or not application or not role or not main:
            raise SettingsError(
                f"{', '.join(missing)} not set; JOB_RUNNER=emr needs them (docs/DEPLOY-AWS.md)"
            )
        if not main.startswith("s3://"):
            raise SettingsError(
                f"JOB_MAIN_URI={settings.job_main_uri!r}: EMR Serverless runs a main file staged in S3; "
                "use an s3:// URI"
            )
        return cls(
            application_id=application,
            execution_role_arn=role,
            entry_point=main,
            python_file_uris=tuple(settings.job_python_file_uris),
            jar_uris=tuple(settings.job_jar_uris) or (ICEBERG_RUNTIME_ON_EMR,),
            properties={**emr_catalog_properties(settings), **settings.emr_spark_properties},
        )

    def job_driver(self, manifest_uri: str) -> dict[str, Any]:
        """The `jobDriver` of one job run, reading the manifest at `manifest_uri`."""
        return self.spark_submit(self.entry_point, ["--manifest", manifest_uri])

    def spark_submit(self, entry_point: str, arguments: Sequence[str]) -> dict[str, Any]:
        """The `jobDriver` of a run of `entry_point` with `arguments`, under the spec's properties,
        jars and Python files."""
        parameters = [f"--conf {shlex.quote(f'{k}={v}')}" for k, v in self.properties.items()]
        if self.jar_uris:
            parameters.append(f"--jars {','.join(self.jar_uris)}")
        if self.python_file_uris:
            parameters.append(f"--py-files {','.join(self.python_file_uris)}")
        return {
            "sparkSubmit": {
                "entryPoint": entry_point,
                "entryPointArguments": list(arguments),
                "sparkSubmitParameters": " ".join(parameters),
            }
        }


def make_client(region: str | None, endpoint: str | None = None, *, max_attempts: int = 5) -> Any:
    """An `emr-serverless` client for `region`, or for `endpoint` (moto in tests); botocore retries
    throttling, 5xx and dropped connections, up to `max_attempts` calls in all."""
    if not region:
        raise SettingsError(
            "AWS_REGION is not set; the EMR runner needs the region of the EMR Serverless application"
        )
    config = Config(
        retries={"mode": "standard", "total_max_attempts": max_attempts}, connect_timeout=10, read_timeout=60
    )
    session = boto3.session.Session()  # credentials resolved now, not cached by boto3's default session
    return session.client("emr-serverless", region_name=region, endpoint_url=endpoint, config=config)


class EmrRunner:
    """EMR Serverless job runs behind the `JobRunner` port."""

    service = "EMR Serverless job run"

    def __init__(self, client: Any, spec: EmrJobSpec, store: ObjectStore) -> None:
        """`store`: the bucket whose jobs this runner submits, where it keeps their run records."""
        self._client = client
        self._spec = spec
        self._records = RunRecords(store, spec.application_id)

    @classmethod
    def from_settings(cls, settings: Settings, store: ObjectStore) -> EmrRunner:
        spec = EmrJobSpec.from_settings(settings)
        return cls(make_client(settings.aws_region, settings.aws_endpoint_url), spec, store)

    def _call(self, job_id: str, what: str, method: Any, *, tolerate: str = "", **request: Any) -> Any:
        """One call; an error whose code is `tolerate` returns None."""
        try:
            return method(applicationId=self._spec.application_id, **request)
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code and code == tolerate:
                return None
            message = exc.response.get("Error", {}).get("Message", str(exc))
            status = int(exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0) or 0)
            if code in _TRANSIENT_CODES or status == 429 or status >= 500:
                raise JobServiceUnavailable(f"emr-serverless: {what} {job_id}: {message}") from exc
            if code == "AccessDeniedException":  # often a role or grant still propagating after a deploy
                raise JobDeferred(
                    f"emr-serverless: {what} {job_id}: {code}: {message}; if the Lambda's role or "
                    "EMR_EXECUTION_ROLE_ARN was just created or granted, this passes within minutes "
                    "(retried with backoff); otherwise grant the Lambda's role iam:PassRole on "
                    "EMR_EXECUTION_ROLE_ARN (condition iam:PassedToService=emr-serverless.amazonaws.com) "
                    "and emr-serverless:StartJobRun and emr-serverless:TagResource on the application "
                    "(docs/DEPLOY-AWS.md, IAM)"
                ) from exc
            if code == "ResourceNotFoundException" and "Application" in message:
                raise JobError(
                    f"emr-serverless: {what} {job_id}: {message}; check EMR_APPLICATION_ID and AWS_REGION"
                ) from exc
            raise JobError(f"emr-serverless: {what} {job_id}: {code}: {message}") from exc
        except NoCredentialsError as exc:
            raise JobError(
                f"emr-serverless: {what} {job_id}: no AWS credentials found; run with an IAM role or set "
                "AWS_ACCESS_KEY_ID / AWS_PROFILE"
            ) from exc
        except BotoCoreError as exc:
            raise JobServiceUnavailable(f"emr-serverless: {what} {job_id}: no answer: {exc}") from exc

    def _runs(self, job_id: str, **bounds: Any) -> Iterator[Mapping[str, Any]]:
        """The application's runs within `bounds` (createdAtAfter, states), page by page."""
        request: dict[str, Any] = dict(bounds)
        while True:
            page = self._call(
                job_id,
                "list job runs",
                self._client.list_job_runs,
                tolerate="ResourceNotFoundException",
                **request,
            )
            if page is None:
                # moto answers "no such application" for an application without runs: make sure it exists.
                self._call(job_id, "describe application", self._client.get_application)
                return
            yield from page.get("jobRuns", [])
            token = page.get("nextToken")
            if not token:
                return
            request["nextToken"] = token

    def _newest(self, job_id: str, **bounds: Any) -> str | None:
        named = [run for run in self._runs(job_id, **bounds) if run.get("name") == job_id]
        if not named:
            return None
        newest = max(named, key=lambda run: run.get("createdAt") or datetime.min.replace(tzinfo=UTC))
        return str(newest["id"])

    def _located(self, job_id: str, record: RunRecord) -> str | None:
        """The run of a recorded submission: recorded, or created since it was recorded."""
        return record.run_id or self._newest(job_id, createdAtAfter=record.listed_since)

    def _active(self, job_id: str) -> str | None:
        """The job's run among the application's active ones: a run submitted before its records
        were kept (bounded by the application's concurrency, not by its history)."""
        return self._newest(job_id, createdAtAfter=datetime.now(UTC) - LOOKBACK, states=_ACTIVE)

    def run_id(self, job_id: str) -> str | None:
        """The id of the job's run, or None when there is none."""
        record = self._records.get(job_id)
        return self._active(job_id) if record is None else self._located(job_id, record)

    def submit(self, job_id: str, manifest_uri: str, *, more_queued: bool = False) -> None:
        if parse_bucket_uri(manifest_uri).scheme != "s3":
            raise JobError(
                f"the EMR runner reads manifests from S3, not {manifest_uri}; "
                "use JOB_RUNNER=dataproc for a GCS bucket"
            )
        self._submit(job_id, self._spec.job_driver(manifest_uri), {})

    def launch(self, batch_id: str, main: str, args: list[str], labels: Mapping[str, str]) -> None:
        """A run of `main` with `args` named `batch_id` (a warm driver), tagged with `labels` too;
        a second launch of the id attaches to the first's run."""
        self._submit(batch_id, self._spec.spark_submit(main, args), labels)

    def _submit(self, job_id: str, job_driver: Mapping[str, Any], labels: Mapping[str, str]) -> None:
        record, first = self._records.begin(job_id, datetime.now(UTC))
        try:
            # A run found is attached to: the caller learns its fate from `status`.
            found = self._active(job_id) if first else self._located(job_id, record)
            run_id = found or self._start(job_id, job_driver, labels)
        except JobError:
            self._records.forget(job_id, record)  # refused: no run exists (a transient error may have one)
            raise
        if run_id != record.run_id:
            self._records.started(job_id, record, run_id)

    def _start(self, job_id: str, job_driver: Mapping[str, Any], labels: Mapping[str, str]) -> str:
        started = self._call(
            job_id,
            "start job run",
            self._client.start_job_run,
            clientToken=client_token(job_id),
            executionRoleArn=self._spec.execution_role_arn,
            name=job_id,
            jobDriver=job_driver,
            tags={**labels, JOB_TAG: job_id},
        )
        return str(started["jobRunId"])

    def _job_run(self, job_id: str) -> Mapping[str, Any] | None:
        run_id = self.run_id(job_id)
        if run_id is None:
            return None
        found = self._call(
            job_id,
            "get job run",
            self._client.get_job_run,
            tolerate="ResourceNotFoundException",
            jobRunId=run_id,
        )
        if found is None:
            # A recorded run the application no longer has (past EMR's retention): unknown, once the
            # application itself is known to exist.
            self._call(job_id, "describe application", self._client.get_application)
            return None
        run: Mapping[str, Any] = found["jobRun"]
        return run

    def status(self, job_id: str) -> JobStatus | None:
        run = self._job_run(job_id)
        if run is None:
            return None
        state = _STATES.get(str(run.get("state")), JobState.PENDING)
        detail = (
            (run.get("stateDetails") or f"job run {run.get('jobRunId')} failed")
            if state is JobState.FAILED
            else None
        )
        return JobStatus(job_id, state, detail)

    def cancel(self, job_id: str) -> None:
        run = self._job_run(job_id)
        if run is None or _STATES.get(str(run.get("state")), JobState.PENDING).finished:
            return
        # A run that finished between the read and the cancel is refused as invalid: nothing to stop.
        self._call(
            job_id,
            "cancel job run",
            self._client.cancel_job_run,
            tolerate="ValidationException",
            jobRunId=run["jobRunId"],
        )
