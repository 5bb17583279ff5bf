"""Where the commands talk to: the local stack when `<TURNSTILE_HOME>/stack.json` exists and
STORAGE_EMULATOR_HOST is not set, otherwise the emulator it names or GCS (the one place that decides)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from turnstile.cli._errors import BUCKET, SCHEME, STORAGE
from turnstile.config.cascade import ConfigReader
from turnstile.config.settings import Settings
from turnstile.core.errors import ConfigError, PathError, SettingsError
from turnstile.entrypoints import wiring, wiring_aws
from turnstile.jobs.port import JobRunner
from turnstile.local import stackinfo
from turnstile.local.stackinfo import StackInfo
from turnstile.names.paths import LOCK, Table, parse_success, table_of_state_object
from turnstile.names.placement import STATE_MARKER, declared_state_bucket
from turnstile.names.uris import parse_bucket_uri
from turnstile.ops.errors import Refused
from turnstile.store.port import ObjectStore, object_uri


@dataclass(frozen=True)
class Target:
    """Settings with the local stack applied, and a phrase naming where storage calls go."""

    settings: Settings
    stack: StackInfo | None
    home: Path

    @property
    def storage(self) -> str:
        if SCHEME.get() == "s3":
            endpoint = self.settings.aws_endpoint_url
            return f"the S3 endpoint at {endpoint}" if endpoint else "Amazon S3"
        host = self.settings.storage_emulator_host
        if self.stack is not None and host == self.stack.storage_url:
            return f"the local stack at {host}"
        return f"the emulator at {host}" if host else "Google Cloud Storage"

    def store(self, bucket: str) -> ObjectStore:
        """The bucket's store: S3 when the command was given an s3:// URI, else GCS; with the state
        bucket the data bucket declares (`placement.STATE_MARKER`) when STATE_BUCKET is not set."""
        build = wiring_aws.s3_store if SCHEME.get() == "s3" else wiring.object_store
        plain = self.settings.model_copy(update={"state_bucket": None})
        data = build(plain, bucket)
        found = data.read(STATE_MARKER)
        declared = declared_state_bucket(found.data) if found is not None else None
        chosen = self.settings.state_bucket
        if declared and chosen and declared != chosen:
            raise SettingsError(
                f"STATE_BUCKET is {chosen}, but {object_uri(data, STATE_MARKER)} says the backlog "
                f"and locks of {bucket} are in {declared}: unset STATE_BUCKET, or set it to {declared}"
            )
        if not (declared or chosen):
            return data
        return build(plain.model_copy(update={"state_bucket": declared or chosen}), bucket)

    def runner(self, store: ObjectStore) -> JobRunner:
        """The runner JOB_RUNNER names, for the store's cloud; never this machine's Spark for a
        cloud bucket: its job would commit to a local warehouse, and the bucket would record the
        batch as applied while the deployment's table never got it."""
        self.refuse_local_jobs_on_cloud(store)
        if store.scheme == "s3":
            return wiring_aws.job_runner(self.settings, store)
        return wiring.job_runner(self.settings, store)

    def refuse_local_jobs_on_cloud(self, store: ObjectStore) -> None:
        """Refuse the local runner (JOB_RUNNER unset or `local`) for real GCS or S3: only the local
        stack, an emulator (STORAGE_EMULATOR_HOST) or an S3 endpoint override (AWS_ENDPOINT_URL) may
        run jobs on this machine. `runner` calls it; commands that always need a runner (retry,
        cancel) call it first too, so they refuse before they change anything."""
        if store.scheme == "s3":
            if self.settings.job_runner == "emr" or self.settings.aws_endpoint_url:
                return
            cloud, fix = "Amazon S3", "set JOB_RUNNER=emr and the deployment's EMR_* and JOB_* settings"
        else:
            if self.settings.job_runner != "local" or self.settings.storage_emulator_host:
                return
            cloud, fix = (
                "Google Cloud Storage",
                "set JOB_RUNNER=dataproc and the deployment's job settings, e.g. "
                'eval "export $(terraform -chdir=terraform output -raw operator_job_env_prefix)" '
                "(docs/CLI.md, Where the commands talk to)",
            )
        runner = self.settings.job_runner + (" (its default)" if self.settings.job_runner == "local" else "")
        raise SettingsError(
            f"JOB_RUNNER is {runner} while this command talks to {cloud}: the job would run on this "
            f"machine and write a local warehouse, not the deployment's tables; {fix}"
        )


def resolve_settings(environ: dict[str, str] | None = None) -> Target:
    """Settings from the environment; when `<TURNSTILE_HOME>/stack.json` exists and
    STORAGE_EMULATOR_HOST is unset, the stack's emulator, warehouse and catalog fill them in."""
    settings = Settings.from_env(environ)
    home = Path(settings.turnstile_home)
    try:
        stack = stackinfo.load(home)
    except (ValueError, TypeError) as exc:
        raise SettingsError(
            f"{home / stackinfo.STACK_FILE} is not a stack file ({exc}); remove it, or run turnstile up again"
        ) from exc
    if stack is not None and not settings.storage_emulator_host:
        settings = settings.model_copy(
            update={
                "storage_emulator_host": stack.storage_url,
                "iceberg_warehouse": settings.iceberg_warehouse or stack.warehouse,
                "iceberg_catalog": stack.catalog,
            }
        )
    return Target(settings, stack, home)


def current() -> Target:
    """The target of this command; storage errors from now on name it in their hints."""
    target = resolve_settings()
    STORAGE.set(target.storage)
    return target


def parse(uri: str) -> tuple[str, str]:
    """(bucket, path) of a gs:// or s3:// URI; the command's stores follow the URI's scheme."""
    where = parse_bucket_uri(uri)
    SCHEME.set(where.scheme)
    BUCKET.set(where.bucket)
    if where.scheme == "s3":
        STORAGE.set("S3")
    return where.bucket, where.path


def batch_success(target: Target, uri: str) -> tuple[str, str]:
    """(bucket, name of the batch's success marker) for a URI naming a batch folder or its marker."""
    bucket, name = parse(uri)
    if not name:
        raise PathError(
            f"{uri} names a bucket; pass the batch's folder, {SCHEME.get()}://BUCKET/DS/TABLE/REL"
        )
    success = target.settings.success_filename
    folder = name.rstrip("/").removesuffix(f"/{success}") if name.rstrip("/") != success else ""
    return bucket, f"{folder}/{success}" if folder else success


def bucket_and_prefix(target: Target, uri: str | None) -> tuple[str, str]:
    """The bucket and prefix a URI names; without one, the local stack's bucket."""
    if uri is not None:
        return parse(uri)
    if target.stack is None:
        raise Refused(
            f"no bucket given and no local stack at {target.home / stackinfo.STACK_FILE}; "
            "pass gs://BUCKET[/PREFIX], or start the local stack with turnstile up"
        )
    return target.stack.bucket, ""


def layout_settings(settings: Settings, store: ObjectStore, prefix: str) -> Settings:
    """The settings with the destination regex that applies at `prefix`: a `destinationRegex` in the
    `_config/load.json` cascade down to it wins over DESTINATION_REGEX, as for the function. A
    cascade that does not validate gives DESTINATION_REGEX: a bad config must not keep an operator
    from `status`, `pause` or `cancel` (status shows the error)."""
    folder = f"{prefix.strip('/')}/" if prefix.strip("/") else ""
    try:
        regex = ConfigReader(store).resolve(folder, partial=True).load.destination_regex
    except ConfigError:
        regex = None
    return settings.model_copy(update={"destination_regex": regex}) if regex else settings


def table_at(target: Target, uri: str) -> Table:
    """The table a URI names, read with the destination regex in force there: DESTINATION_REGEX,
    or a `destinationRegex` in the `_config/load.json` cascade down to it (as the function reads it)."""
    bucket, prefix = parse(uri)
    regex = layout_settings(target.settings, target.store(bucket), prefix).destination_regex
    return table_of(uri, regex)


def table_of(uri: str, destination_regex: str | None = None) -> Table:
    """The table a `gs://BUCKET/DATASET/TABLE` URI names (with a DESTINATION_REGEX: the table
    prefix the regex matches)."""
    bucket, prefix = parse(uri)
    if len([p for p in prefix.split("/") if p]) < 2:
        raise Refused(f"{uri} does not name a table; pass {SCHEME.get()}://BUCKET/DATASET/TABLE")
    try:
        batch = parse_success(bucket, f"{prefix.strip('/')}/_SUCCESS", destination_regex)
    except PathError:
        batch = None  # not a batch folder either: the table's own parse says what is wrong
    if batch is not None and batch.rel:
        table = f"{uri.partition('://')[0]}://{bucket}/{batch.table.prefix}"
        raise Refused(f"{uri} names batch {batch.rel!r} of table {table}, not a table; pass {table}")
    return table_of_state_object(bucket, f"{prefix.strip('/')}/{LOCK}", destination_regex)


def require_table(store: ObjectStore, table: Table) -> None:
    """Refuse a table prefix with nothing under it: a typo would otherwise be paused, resumed or
    unlocked as if it were a table, while the real one went on."""
    require_stored(store, table.prefix, "no table there")


def require_stored(store: ObjectStore, prefix: str, there: str = "nothing to check there") -> None:
    """Refuse a prefix with nothing under it (a typo): a command would report nothing wrong with it."""
    if prefix.strip("/") and not store.list_entries(f"{prefix.strip('/')}/", limit=1):
        raise Refused(
            f"nothing is stored under {object_uri(store, prefix.strip('/'))}: {there}; check the name "
            f"(turnstile status {object_uri(store, '').rstrip('/')} lists the tables)"
        )
