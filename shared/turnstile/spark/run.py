"""What the job does once its dependencies are importable: read the manifest, apply it, report.
The main file of each cloud (`spark/main.py` for GCS, `spark/main_aws.py` for S3) passes its stores."""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from pyspark.sql import SparkSession

from turnstile.config.settings import Settings
from turnstile.core import logs
from turnstile.core.clock import SystemClock
from turnstile.core.errors import BatchFailed
from turnstile.names.uris import parse_bucket_uri
from turnstile.spark import hygiene, messages
from turnstile.spark.applier import IcebergApplier
from turnstile.spark.staging import DirectStaging, LocalStaging, Staging
from turnstile.state.execution import execute, read_manifest
from turnstile.state.records import BatchOutcome, JobDone, Manifest
from turnstile.store.port import ObjectStore, object_uri
from turnstile.store.split import SplitStore

log = logs.get("job")


def _expire_snapshots(
    spark: SparkSession,
    catalog: str,
    applier: IcebergApplier,
    manifest: Manifest,
    done: JobDone,
    *,
    data: ObjectStore,
) -> None:
    """Snapshot expiry of the tables the job committed to. A failure is logged as the event
    `snapshot_expiry_failed` (an alert), never the job's: its batches are committed and recorded,
    and the next job that commits to the table tries again."""
    committed = {
        applier.table(batch): batch
        for batch in manifest.batches
        if done.outcomes.get(batch.rel)
        in (
            BatchOutcome.COMMITTED,
            BatchOutcome.REPROCESSED,
            BatchOutcome.REBUILT,
            BatchOutcome.PUBLISHED_OVERRIDE,
        )
    }
    for table, batch in committed.items():
        try:
            gone = hygiene.expire(spark, catalog, table, batch.load, datetime.now(UTC))
        except Exception as exc:  # the batches are committed and recorded: expiry waits for next time
            error = messages.reason(exc)
            log.error(
                f"{hygiene.failure_message(object_uri(data, batch.table_prefix), error)}; its batches "
                "are applied, and the next job that commits to it expires them if it can",
                extra={
                    "event": "snapshot_expiry_failed",
                    "table": batch.table_prefix,
                    "bucket": manifest.bucket,
                    "iceberg_table": table,
                    "job_id": manifest.job_id,
                    "error": error,
                },
            )
            continue
        if gone:
            print(f"expired {gone} snapshot(s) of {table}")


def _job_store(stores: Callable[[str], ObjectStore], data: str, manifest_bucket: str) -> ObjectStore:
    """The store the job records in: a manifest outside the data bucket sits in its state bucket
    (STATE_BUCKET), where the result records go too; the `.done` signal goes to the data bucket."""
    return stores(data) if manifest_bucket == data else SplitStore(stores(data), stores(manifest_bucket))


def run(
    spark: SparkSession,
    manifest_uri: str,
    stage_to: Path | None,
    stores: Callable[[str], ObjectStore],
    stop_requested: Callable[[], bool] = lambda: False,
) -> int:
    """Exit status 0 when every batch was committed or skipped, 1 otherwise. `stores` gives the
    store of a bucket of the manifest's cloud (the main file of each cloud builds it)."""
    logs.configure("INFO")  # JSON lines on stderr, which the job service keeps as the driver's output
    settings = Settings.from_env()
    where = parse_bucket_uri(manifest_uri).bucket
    staging: Staging = LocalStaging(stores, stage_to) if stage_to else DirectStaging(stores)
    try:
        manifest = read_manifest(stores(where), manifest_uri)
        store = _job_store(stores, manifest.bucket, where)
        applier = IcebergApplier(
            spark, settings.iceberg_catalog, staging, stores, manifest.bucket, ordered=manifest.ordered
        )
        done = execute(store, manifest, applier, SystemClock(), stop_requested)
    except BatchFailed as exc:
        print(f"turnstile job failed: {exc}", file=sys.stderr)
        return 1
    for rel, outcome in done.outcomes.items():
        print(f"{outcome.value:<9} {rel}")
    _expire_snapshots(spark, settings.iceberg_catalog, applier, manifest, done, data=stores(manifest.bucket))
    if not done.succeeded:
        print(f"turnstile job failed: {done.error}", file=sys.stderr)
    return 0 if done.succeeded else 1
