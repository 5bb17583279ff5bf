"""JobRunner on Dataproc Serverless: one job is one PySpark batch whose id is the job id.

Submit is CreateBatch with a request id derived from the job id (a retry attaches; ALREADY_EXISTS
attaches too) and never waits on the operation; status is GetBatch; cancel cancels the batch's
operation. Transient failures are retried, then `JobServiceUnavailable`; PERMISSION_DENIED is
`JobDeferred` (retried by the protocol with backoff); anything else is `JobError`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import requests
from google.api_core import exceptions as gexc
from google.api_core.retry import Retry
from google.auth import exceptions as auth_exc
from google.auth.credentials import AnonymousCredentials
from google.cloud import dataproc_v1

from turnstile.config.settings import Settings
from turnstile.core.errors import JobDeferred, JobError, JobServiceUnavailable, SettingsError
from turnstile.jobs.catalog import iceberg_catalog_properties
from turnstile.jobs.port import JobState, JobStatus

JOB_LABEL = "turnstile-job"
"""Label put on every batch turnstile submits (value `true`), to find them in the console."""

_STATES: dict[int, JobState] = {  # Batch.State (an IntEnum) -> JobState
    dataproc_v1.Batch.State.STATE_UNSPECIFIED: JobState.PENDING,
    dataproc_v1.Batch.State.PENDING: JobState.PENDING,
    dataproc_v1.Batch.State.RUNNING: JobState.RUNNING,
    dataproc_v1.Batch.State.CANCELLING: JobState.CANCELLING,
    dataproc_v1.Batch.State.CANCELLED: JobState.CANCELLED,
    dataproc_v1.Batch.State.SUCCEEDED: JobState.SUCCEEDED,
    dataproc_v1.Batch.State.FAILED: JobState.FAILED,
}

# What "the service did not answer" looks like: HTTP 429/5xx and their gRPC twins
# (RESOURCE_EXHAUSTED, INTERNAL, UNAVAILABLE, DEADLINE_EXCEEDED are subclasses of these), ABORTED,
# and connection-level failures of the REST transport (the gRPC transport reports those as
# UNAVAILABLE) or of the credentials refresh.
_TRANSIENT: tuple[type[BaseException], ...] = (
    gexc.TooManyRequests,
    gexc.ServerError,
    gexc.Aborted,
    requests.exceptions.ConnectionError,
    requests.exceptions.Timeout,
    auth_exc.TransportError,
)


def _error_status(exc: gexc.GoogleAPICallError) -> str | None:
    """The canonical status name (`ALREADY_EXISTS`, `ABORTED`) of an error.

    The gRPC transport raises the precise class; the REST transport maps by HTTP code only, so a
    409 is a bare `Conflict` and the name is read from the JSON error body (`error.status`)."""
    if exc.grpc_status_code is not None:
        return str(exc.grpc_status_code.name)
    response = exc.response
    if isinstance(response, requests.Response):
        try:
            status = response.json().get("error", {}).get("status")
        except ValueError:
            return None
        return status if isinstance(status, str) else None
    return None


def _is_transient(exc: BaseException) -> bool:
    if isinstance(exc, _TRANSIENT):
        return True
    return isinstance(exc, gexc.Conflict) and _error_status(exc) == "ABORTED"


def _already_exists(exc: gexc.GoogleAPICallError) -> bool:
    # CreateBatch answers 409 for an existing batch id; ABORTED (also 409) is a retryable race.
    return isinstance(exc, gexc.Conflict) and _error_status(exc) != "ABORTED"


def request_id(job_id: str) -> str:
    """Idempotency key of the create call: the same job always sends the same one (at most 40
    characters, as CreateBatchRequest.request_id allows)."""
    return hashlib.sha256(job_id.encode()).hexdigest()[:40]


DEFAULT_RETRY = Retry(predicate=_is_transient, initial=1.0, maximum=10.0, multiplier=2.0, timeout=60.0)
"""Backoff for every call; CreateBatch is safe to repeat because it carries a request id."""

DEFAULT_TIMEOUT = 60.0
"""Overall deadline of one runner call (all attempts), in seconds; below a function's budget."""


def catalog_properties(settings: Settings) -> dict[str, str]:
    """The Iceberg catalog of `settings`, plus the driver environment the job reads its settings
    from. The BigLake location is the Dataproc region (settings have no separate variable for it)."""
    if settings.iceberg_catalog_type == "glue":
        raise SettingsError(
            "ICEBERG_CATALOG_TYPE=glue is AWS's catalog; with JOB_RUNNER=dataproc use biglake or rest"
        )
    props = iceberg_catalog_properties(
        settings.iceberg_catalog,
        settings.iceberg_catalog_type,
        warehouse=settings.iceberg_warehouse,
        uri=settings.iceberg_catalog_uri,
        gcp_project=settings.gcp_project,
        location=settings.dataproc_region,
    )
    # The job reads its settings on the driver, whose environment the functions' does not reach.
    props["spark.dataproc.driverEnv.ICEBERG_CATALOG"] = settings.iceberg_catalog
    if settings.gcp_project:
        props["spark.dataproc.driverEnv.GOOGLE_CLOUD_PROJECT"] = settings.gcp_project
    return props


@dataclass(frozen=True)
class DataprocBatchSpec:
    """Everything of a batch that does not depend on the job: built once from settings."""

    main_python_file_uri: str
    runtime_version: str = "2.2"
    service_account: str | None = None
    subnetwork: str | None = None
    staging_bucket: str | None = None
    """The batches' own bucket for dependencies, driver output and Spark history (a name)."""
    properties: Mapping[str, str] = field(default_factory=dict)
    """Extra Spark properties (DATAPROC_PROPERTIES); they override `catalog_properties`."""
    labels: Mapping[str, str] = field(default_factory=dict)
    python_file_uris: tuple[str, ...] = ()
    jar_file_uris: tuple[str, ...] = ()
    archive_uris: tuple[str, ...] = ()
    """Extracted into the job's working directory: its shipped dependencies (turnstile.spark.dependencies)."""
    catalog_properties: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_settings(cls, settings: Settings) -> DataprocBatchSpec:
        if not settings.job_main_uri:
            raise SettingsError(
                "JOB_MAIN_URI is not set; the Dataproc runner needs the staged PySpark main file"
            )
        return cls(
            main_python_file_uri=settings.job_main_uri,
            runtime_version=settings.dataproc_runtime_version,
            service_account=settings.dataproc_service_account,
            subnetwork=settings.dataproc_subnetwork,
            staging_bucket=settings.dataproc_staging_bucket,
            properties=dict(settings.dataproc_properties),
            labels=dict(settings.dataproc_labels),
            python_file_uris=tuple(settings.job_python_file_uris),
            jar_file_uris=tuple(settings.job_jar_uris),
            archive_uris=tuple(settings.job_archive_uris),
            catalog_properties=catalog_properties(settings),
        )

    def batch(self, manifest_uri: str) -> dataproc_v1.Batch:
        """The Batch resource of one job, reading the manifest at `manifest_uri`."""
        return self.program(self.main_python_file_uri, ["--manifest", manifest_uri])

    def program(
        self, main_uri: str, args: list[str], labels: Mapping[str, str] | None = None
    ) -> dataproc_v1.Batch:
        """The Batch resource running `main_uri` with `args` (a job's main, or the warm driver's)."""
        execution = dataproc_v1.ExecutionConfig()
        if self.service_account:
            execution.service_account = self.service_account
        if self.subnetwork:
            execution.subnetwork_uri = self.subnetwork
        if self.staging_bucket:
            execution.staging_bucket = self.staging_bucket
        return dataproc_v1.Batch(
            pyspark_batch=dataproc_v1.PySparkBatch(
                main_python_file_uri=main_uri,
                args=args,
                python_file_uris=list(self.python_file_uris),
                jar_file_uris=list(self.jar_file_uris),
                archive_uris=list(self.archive_uris),
            ),
            runtime_config=dataproc_v1.RuntimeConfig(
                version=self.runtime_version,
                properties={**self.catalog_properties, **self.properties},
            ),
            # Left empty when nothing is set, so the service's defaults apply.
            environment_config=dataproc_v1.EnvironmentConfig(execution_config=execution)
            if self.service_account or self.subnetwork or self.staging_bucket
            else None,
            labels={**self.labels, **(labels or {}), JOB_LABEL: "true"},
        )


def make_client(region: str, endpoint: str | None) -> dataproc_v1.BatchControllerClient:
    """A REST client for the regional Dataproc endpoint (default credentials), or for `endpoint`.

    REST in production too, not the library's default gRPC: the tests drive the runner end to end
    through this transport against a local stub of the REST API, so production runs exactly the
    code the tests exercise (request encoding, error mapping by HTTP status and `error.status`,
    retries on connection errors). A Cloud Function makes a handful of calls per event, so gRPC's
    connection reuse buys nothing here.

    With `endpoint` (DATAPROC_ENDPOINT, a local stub in tests) anonymous credentials are used. The
    REST transport keeps an explicit scheme: `http://127.0.0.1:8123` is used as is, while a bare
    `host:port` gets `https://` prepended (its `url_scheme`)."""
    if endpoint:
        return dataproc_v1.BatchControllerClient(
            transport="rest",
            credentials=AnonymousCredentials(),  # type: ignore[no-untyped-call]
            client_options={"api_endpoint": endpoint},
        )
    return dataproc_v1.BatchControllerClient(
        transport="rest", client_options={"api_endpoint": f"{region}-dataproc.googleapis.com:443"}
    )


class DataprocRunner:
    """Dataproc Serverless batches behind the `JobRunner` port."""

    service = "Dataproc batch"

    def __init__(
        self,
        client: dataproc_v1.BatchControllerClient,
        project: str,
        region: str,
        spec: DataprocBatchSpec,
        *,
        retry: Retry = DEFAULT_RETRY,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self._client = client
        self._parent = f"projects/{project}/locations/{region}"
        self._spec = spec
        self._retry = retry
        self._timeout = timeout

    @classmethod
    def from_settings(cls, settings: Settings) -> DataprocRunner:
        if not settings.gcp_project:
            raise SettingsError("GOOGLE_CLOUD_PROJECT is not set; the Dataproc runner needs the project")
        spec = DataprocBatchSpec.from_settings(settings)
        client = make_client(settings.dataproc_region, settings.dataproc_endpoint)
        return cls(client, settings.gcp_project, settings.dataproc_region, spec)

    def batch_name(self, job_id: str) -> str:
        return f"{self._parent}/batches/{job_id}"

    def _call(self, job_id: str, what: str, method: Any, **request: Any) -> Any:
        try:
            return method(**request, retry=self._retry, timeout=self._timeout)
        except gexc.RetryError as exc:
            cause = exc.cause if exc.cause is not None else exc
            raise JobServiceUnavailable(
                f"dataproc: {what} {job_id}: no answer after retries: {cause}"
            ) from exc
        except _TRANSIENT as exc:
            raise JobServiceUnavailable(f"dataproc: {what} {job_id}: {exc}") from exc

    @property
    def spec(self) -> DataprocBatchSpec:
        return self._spec

    def submit(self, job_id: str, manifest_uri: str, *, more_queued: bool = False) -> None:
        self.create(job_id, self._spec.batch(manifest_uri))

    def launch(self, batch_id: str, main: str, args: list[str], labels: Mapping[str, str]) -> None:
        """CreateBatch of `main` with `args` (the warm driver's), as a job's batch is configured."""
        self.create(batch_id, self._spec.program(main, args, labels))

    def create(self, job_id: str, batch: dataproc_v1.Batch) -> None:
        """CreateBatch of `batch` under the id `job_id`; an existing batch of that id attaches."""
        try:
            # Returns an operation future at once; waiting on it would block for the whole batch.
            self._call(
                job_id,
                "create batch",
                self._client.create_batch,
                # request_id is not a flattened argument of create_batch: only the request has it.
                request=dataproc_v1.CreateBatchRequest(
                    parent=self._parent,
                    batch=batch,
                    batch_id=job_id,
                    request_id=request_id(job_id),
                ),
            )
        except gexc.GoogleAPICallError as exc:
            if _already_exists(exc):
                return  # attach: the batch exists; the caller learns its fate from `status`
            if _is_transient(exc):
                raise JobServiceUnavailable(f"dataproc: create batch {job_id}: {exc.message}") from exc
            if isinstance(exc, gexc.Forbidden):  # often a grant still propagating after a deploy
                raise JobDeferred(
                    f"dataproc refused batch {job_id}: {exc.message}; if the service account was just "
                    "granted its roles, this passes within minutes (retried with backoff); otherwise "
                    "grant it roles/dataproc.editor's batches.create (see docs/DEPLOY.md)"
                ) from exc
            raise JobError(f"dataproc refused batch {job_id}: {exc.message}") from exc

    def _get(self, job_id: str, what: str) -> dataproc_v1.Batch | None:
        try:
            batch: dataproc_v1.Batch = self._call(
                job_id, what, self._client.get_batch, name=self.batch_name(job_id)
            )
        except gexc.NotFound:
            return None
        except gexc.GoogleAPICallError as exc:
            raise JobError(f"dataproc: {what} {job_id}: {exc.message}") from exc
        return batch

    def status(self, job_id: str) -> JobStatus | None:
        batch = self._get(job_id, "get batch")
        if batch is None:
            return None
        state = _STATES.get(batch.state, JobState.PENDING)
        detail = (batch.state_message or f"batch {job_id} failed") if state is JobState.FAILED else None
        return JobStatus(job_id, state, detail)

    def cancel(self, job_id: str) -> None:
        batch = self._get(job_id, "describe batch")
        if batch is None or not batch.operation:
            return
        if _STATES.get(batch.state, JobState.PENDING).finished:
            return
        try:
            self._call(
                job_id, "cancel batch", self._client.cancel_operation, request={"name": batch.operation}
            )
        except gexc.GoogleAPICallError as exc:
            # Gone, or finished between the describe and the cancel (over REST a bare BadRequest).
            if _error_status(exc) in ("NOT_FOUND", "FAILED_PRECONDITION"):
                return
            raise JobError(f"dataproc: cancel batch {job_id}: {exc.message}") from exc
