"""Settings: the only module that reads the environment, once per invocation, into a frozen value.

Every field is named after its environment variable (the alias) and documented by its docstring;
docs/CONFIGURATION.md and the Terraform structural tests are checked against this class.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from turnstile.config.validation import explain
from turnstile.core.errors import SettingsError


def _comma_list(value: Any) -> Any:
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return value


def _upper(value: Any) -> Any:
    """Accept `info` for `INFO`; anything else stays as given so the error shows it."""
    if isinstance(value, str) and value.upper() in ("DEBUG", "INFO", "WARNING", "ERROR"):
        return value.upper()
    return value


def _json_object(value: Any) -> Any:
    if isinstance(value, str):
        return json.loads(value) if value.strip() else {}
    return value


# Suffixes of turnstile's job records (<table>/_turnstile/jobs/), which the deployed bucket's
# lifecycle rule deletes by suffix alone (it cannot match the folder): no marker may end with them.
JOB_RECORD_SUFFIXES = (".manifest.json", ".done")

CommaList = Annotated[tuple[str, ...], BeforeValidator(_comma_list)]
JsonObject = Annotated[dict[str, str], BeforeValidator(_json_object)]


class Settings(BaseModel):
    """Everything turnstile reads from its environment."""

    model_config = ConfigDict(
        frozen=True, extra="ignore", use_attribute_docstrings=True, populate_by_name=True
    )

    success_filename: str = Field("_SUCCESS", alias="SUCCESS_FILENAME", min_length=1)
    """Name of the marker upstream writes last into a complete batch folder."""

    destination_regex: str | None = Field(None, alias="DESTINATION_REGEX")
    """Regex over a batch folder path with named groups `dataset` and `table` (and optionally
    `kind`, `partition`, `yyyy`, `mm`, `dd`, `hh`, `batch`); default: the layout in README."""

    order_per_table: bool = Field(False, alias="ORDER_PER_TABLE")
    """Order every table, as if each had `_config/ORDERME`."""

    start_backfill_filename: str | None = Field(None, alias="START_BACKFILL_FILENAME")
    """When set (e.g. `_HISTORYDONE`), ordered batches only queue until this file exists at the
    table prefix; its arrival starts the subscriber."""

    wait_for_validation: bool = Field(False, alias="WAIT_FOR_VALIDATION")
    """Pause an ordered table after each job until a new `_BACKFILL` is uploaded."""

    function_timeout_sec: int = Field(540, alias="FUNCTION_TIMEOUT_SEC", ge=10, le=3600)
    """The function's deployed timeout; the subscriber hands over before it."""

    restart_buffer_seconds: int = Field(30, alias="RESTART_BUFFER_SECONDS", ge=0, le=600)
    """How long before the timeout the subscriber stops working and retriggers itself."""

    job_prefix: str = Field("turnstile", alias="JOB_PREFIX")
    """Prefix of every job id (lowercase letters, digits, hyphens; at most 20 characters)."""

    job_runner: Literal["local", "dataproc", "emr"] = Field("local", alias="JOB_RUNNER")
    """Where jobs run: `dataproc` (Dataproc Serverless), `emr` (EMR Serverless) or `local`
    (spark-submit on this machine)."""

    gcp_project: str | None = Field(None, alias="GOOGLE_CLOUD_PROJECT")
    """Project for storage and Dataproc clients; defaults to the credentials' project."""

    storage_emulator_host: str | None = Field(None, alias="STORAGE_EMULATOR_HOST")
    """URL of a GCS emulator (fake-gcs-server); unset means real GCS."""

    state_bucket: str | None = Field(None, alias="STATE_BUCKET")
    """A bucket with no trigger for turnstile's own objects (backlog pointers, locks, claims,
    manifests, result records), so that they cost no function invocation; unset keeps them in the
    data bucket beside the batches, as gcs_ocn_bq_ingest does. Switch only with nothing queued or
    running (docs/DEPLOY.md)."""

    log_level: Annotated[Literal["DEBUG", "INFO", "WARNING", "ERROR"], BeforeValidator(_upper)] = Field(
        "INFO", alias="LOG_LEVEL"
    )
    """Threshold of the JSON logs."""

    stale_claim_seconds: int = Field(3600, alias="STALE_CLAIM_SECONDS", ge=60)
    """Age after which the sweeper deletes a claim object."""

    dataproc_region: str = Field("us-central1", alias="DATAPROC_REGION")
    """Region of the Dataproc Serverless batches (the bucket's region is a good choice)."""

    dataproc_endpoint: str | None = Field(None, alias="DATAPROC_ENDPOINT")
    """Override of the Dataproc API endpoint (tests point it at a local stub)."""

    dataproc_runtime_version: str = Field("2.2", alias="DATAPROC_RUNTIME_VERSION")
    """Dataproc Serverless runtime (2.2: Spark 3.5.1, Scala 2.13, Python 3.12)."""

    dataproc_service_account: str | None = Field(None, alias="DATAPROC_SERVICE_ACCOUNT")
    """Service account the batches run as."""

    dataproc_subnetwork: str | None = Field(None, alias="DATAPROC_SUBNETWORK")
    """Subnetwork URI for the batches (needs Private Google Access)."""

    dataproc_staging_bucket: str | None = Field(None, alias="DATAPROC_STAGING_BUCKET")
    """Bucket (a name, not a URI) where the batches stage their dependencies, driver output and
    Spark history; unset: the project-level staging and temp buckets Dataproc creates itself."""

    dataproc_properties: JsonObject = Field(default_factory=dict, alias="DATAPROC_PROPERTIES")
    """JSON object of extra Spark properties for every batch."""

    dataproc_labels: JsonObject = Field(default_factory=dict, alias="DATAPROC_LABELS")
    """JSON object of labels put on every batch."""

    driver: Literal["warm", "per_job"] = Field("per_job", alias="DRIVER")
    """With JOB_RUNNER=dataproc or emr: `warm`, jobs queue in the bucket's spool and a long-lived
    driver (a Dataproc batch, an EMR job run) serves them (docs/DRIVER.md); `per_job`, one batch or
    job run per job. Terraform sets `warm`."""

    driver_main_uri: str | None = Field(None, alias="DRIVER_MAIN_URI")
    """gs:// (Dataproc) or s3:// (EMR) URI of the staged warm driver's main file (DRIVER=warm)."""

    driver_max_idle_seconds: float = Field(300.0, gt=0, alias="DRIVER_MAX_IDLE_SECONDS")
    """No warm driver stays idle longer than this, whatever its stay-up policy predicts."""

    driver_max_lifetime_seconds: float = Field(3600.0, gt=0, alias="DRIVER_MAX_LIFETIME_SECONDS")
    """Past this age a warm driver takes no new job and leaves (its successor runs the current
    code); keep it below the batch TTL (4 hours) minus the longest job."""

    driver_start_timeout_seconds: float = Field(600.0, gt=0, alias="DRIVER_START_TIMEOUT_SECONDS")
    """A warm job queued this long while no driver runs (launches refused, or batches that never
    start) fails as a transient failure naming why, which the protocol retries with backoff and
    blocks on once job_retries run out: no request waits silently."""

    driver_poll_seconds: float = Field(2.0, gt=0, le=60, alias="DRIVER_POLL_SECONDS")
    """How often an idle warm driver lists the spool for requests."""

    driver_max_count: int = Field(4, ge=1, le=16, alias="DRIVER_MAX_COUNT")
    """Warm drivers taking requests at once. Another starts beside those up when requests waited
    longer than a start-up (60 s); extra drivers leave first when idle. 1: never more than one."""

    driver_slots: int = Field(4, ge=1, le=32, alias="DRIVER_SLOTS")
    """How many jobs (of different tables) a warm driver runs side by side, each on a thread of its
    Spark application: the driver's cores (Dataproc Serverless gives a driver 4 by default)."""

    job_main_uri: str | None = Field(None, alias="JOB_MAIN_URI")
    """gs:// (Dataproc) or s3:// (EMR) URI of the staged PySpark main file."""

    job_python_file_uris: CommaList = Field((), alias="JOB_PYTHON_FILE_URIS")
    """Comma-separated gs:// or s3:// URIs of staged Python files (the turnstile package zip)."""

    job_jar_uris: CommaList = Field((), alias="JOB_JAR_URIS")
    """Comma-separated gs:// or s3:// URIs of staged jars (the Iceberg runtime)."""

    aws_region: str | None = Field(None, alias="AWS_REGION")
    """AWS region of the S3 buckets and the EMR Serverless application (Lambda sets it)."""

    aws_endpoint_url: str | None = Field(None, alias="AWS_ENDPOINT_URL")
    """Override of the S3 and EMR Serverless endpoints (tests point it at a moto server)."""

    emr_application_id: str | None = Field(None, alias="EMR_APPLICATION_ID")
    """Id of the EMR Serverless Spark application the `emr` runner starts job runs in."""

    emr_execution_role_arn: str | None = Field(None, alias="EMR_EXECUTION_ROLE_ARN")
    """ARN of the IAM role EMR Serverless job runs assume (reads the bucket, writes the warehouse)."""

    emr_spark_properties: JsonObject = Field(default_factory=dict, alias="EMR_SPARK_PROPERTIES")
    """JSON object of extra Spark properties for every EMR Serverless job run."""

    job_archive_uris: CommaList = Field((), alias="JOB_ARCHIVE_URIS")
    """Comma-separated gs:// URIs of archives extracted for the job (the job's dependencies,
    `deps.zip#turnstile_deps`)."""

    iceberg_catalog: str = Field("turnstile", alias="ICEBERG_CATALOG")
    """Spark catalog name the Iceberg tables live in (`<catalog>.<dataset>.<table>`)."""

    iceberg_catalog_type: Literal["biglake", "rest", "hadoop", "glue"] = Field(
        "hadoop", alias="ICEBERG_CATALOG_TYPE"
    )
    """Iceberg catalog implementation: BigLake metastore, Glue (on AWS) or REST in production,
    hadoop locally."""

    iceberg_warehouse: str | None = Field(None, alias="ICEBERG_WAREHOUSE")
    """Warehouse location (gs:// or s3:// in the cloud, a folder locally)."""

    iceberg_catalog_uri: str | None = Field(None, alias="ICEBERG_CATALOG_URI")
    """URI of a REST catalog."""

    turnstile_home: str = Field(".turnstile", alias="TURNSTILE_HOME")
    """Folder of the local stack: emulator data, warehouse, job logs, stack.json."""

    config_cache_seconds: float = Field(60.0, ge=0, alias="CONFIG_CACHE_SECONDS")
    """How long a function instance reuses what it read of a `_config/` level (0: read it on every
    invocation). A `_config/` object's own event refreshes the instance that receives it at once."""

    local_driver_idle_seconds: float = Field(300.0, gt=0, alias="LOCAL_DRIVER_IDLE_SECONDS")
    """How long the local runner's warm Spark driver waits for another job before it exits."""

    local_driver: Literal["warm", "cold", "spool"] = Field("spool", alias="LOCAL_DRIVER")
    """How the local runner runs a job on the local stack: `spool`, production's path: queued in the
    bucket's spool and served by the warm driver of DRIVER=warm (docs/DRIVER.md), launched as a
    spark-submit where Dataproc creates a batch; `warm`, in a long-lived driver fed through a
    local folder; `cold`, in a spark-submit of its own (its own JVM and session, as every Dataproc
    Serverless batch is): for comparison. S3 stacks (moto) run `warm` for `spool`."""

    local_driver_prices: Literal["laptop", "dataproc"] = Field("laptop", alias="LOCAL_DRIVER_PRICES")
    """The stay-up policy's prices for `LOCAL_DRIVER=spool`'s drivers: `laptop`, an idle driver costs
    nothing, so it waits its max idle as the folder driver does; `dataproc`, Dataproc Serverless's
    (`make bench` measures production's path with them)."""

    @field_validator("job_prefix")
    @classmethod
    def _job_prefix_shape(cls, value: str) -> str:
        if not re.fullmatch(r"[a-z][a-z0-9-]{0,19}", value):
            raise ValueError(
                "must be 1-20 characters of lowercase letters, digits and hyphens, starting with a letter"
            )
        return value.rstrip("-")  # the original's default `gcf-ingest-`: ids join parts with a hyphen

    @field_validator("success_filename", "start_backfill_filename")
    @classmethod
    def _not_a_job_record_suffix(cls, value: str | None) -> str | None:
        # The deployment's lifecycle rule deletes objects with these suffixes (terraform/storage.tf).
        if value is not None and value.endswith(JOB_RECORD_SUFFIXES):
            raise ValueError(
                f"must not end with {' or '.join(JOB_RECORD_SUFFIXES)}: the inbound bucket's lifecycle "
                "rule deletes such objects (job manifests and done signals) after some weeks"
            )
        return value

    @field_validator("state_bucket", "dataproc_staging_bucket")
    @classmethod
    def _a_bucket_name(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]", value):
            bare = value.split("://", 1)[-1].strip("/").split("/", 1)[0] if "://" in value else None
            hint = f": {bare}, not a URI" if bare else ""
            raise ValueError(f"must be a bucket's name (lowercase letters, digits, '-', '_', '.'){hint}")
        return value

    @field_validator("destination_regex")
    @classmethod
    def _regex_compiles(cls, value: str | None) -> str | None:
        if value is None:
            return None
        try:
            groups = re.compile(value).groupindex
        except re.error as exc:
            raise ValueError(f"is not a valid regular expression ({exc})") from exc
        missing = {"dataset", "table"} - set(groups)
        if missing:
            raise ValueError(f"needs the named groups {sorted(missing)}")
        return value

    @model_validator(mode="after")
    def _buffer_inside_timeout(self) -> Settings:
        if self.restart_buffer_seconds >= self.function_timeout_sec:
            raise ValueError(
                f"RESTART_BUFFER_SECONDS ({self.restart_buffer_seconds}) must be less than "
                f"FUNCTION_TIMEOUT_SEC ({self.function_timeout_sec}), or the subscriber has no time to work"
            )
        return self

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Resolve settings from `environ` (default: this process's environment, read now)."""
        try:
            return cls._validate(environ)
        except ValidationError as exc:
            problems = "; ".join(line.replace("key ", "environment variable ", 1) for line in explain(exc))
            raise SettingsError(f"bad settings: {problems}") from exc
        except json.JSONDecodeError as exc:
            raise SettingsError(f"bad settings: a JSON environment variable does not parse: {exc}") from exc

    @classmethod
    def _validate(cls, environ: Mapping[str, str] | None) -> Settings:
        # An empty variable means unset: Terraform and shells often export "" for "no value".
        source = {k: v for k, v in (os.environ if environ is None else environ).items() if v != ""}
        return cls.model_validate(source, by_alias=True, by_name=False)  # `log_level` is not LOG_LEVEL

    @classmethod
    def problems(cls, environ: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
        """Every problem `from_env` would refuse, one per variable: (variable, what is wrong). A
        problem of two variables together is reported on the first variable its message names."""
        try:
            cls._validate(environ)
        except ValidationError as exc:
            found = []
            for problem in exc.errors(include_url=False):
                message = problem["msg"].removeprefix("Value error, ")
                if problem["loc"]:
                    variable = str(problem["loc"][0])
                    found.append((variable, f"got {problem['input']!r}; {message}"))
                else:
                    named = [name for name in cls.variables() if name in message]
                    found.append((min(named, key=message.index) if named else "(settings)", message))
            return found
        return []

    @classmethod
    def variables(cls) -> dict[str, str]:
        """Environment variable name -> its documentation, for docs and deployment checks."""
        return {str(f.alias): f.description or "" for f in cls.model_fields.values()}


def child_environment(extra: Mapping[str, str]) -> dict[str, str]:
    """This process's environment plus `extra`, for a child process (the local stack's hosts)."""
    return dict(os.environ) | dict(extra)
