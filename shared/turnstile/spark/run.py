"""What the job does once its dependencies are importable: read the manifest, apply it, report.
The main file of each cloud (`spark/main.py` for GCS, `spark/main_aws.py` for S3) passes its stores."""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from pyspark.sql import SparkSession

from turnstile.config.settings import Settings
from turnstile.core.clock import SystemClock
from turnstile.core.errors import BatchFailed
from turnstile.names.uris import parse_bucket_uri
from turnstile.spark import hygiene
from turnstile.spark.applier import IcebergApplier
from turnstile.spark.staging import DirectStaging, LocalStaging, Staging
from turnstile.state.execution import execute, read_manifest
from turnstile.state.records import BatchOutcome, JobDone, Manifest
from turnstile.store.port import ObjectStore
from turnstile.store.split import SplitStore


def _expire_snapshots(
    spark: SparkSession, catalog: str, applier: IcebergApplier, manifest: Manifest, done: JobDone
) -> None:
    """Snapshot expiry of the tables the job committed to; a failure is reported, never the job's."""
    committed = {
        applier.table(batch): batch.load
        for batch in manifest.batches
        if done.outcomes.get(batch.rel) in (BatchOutcome.COMMITTED, BatchOutcome.REPROCESSED)
    }
    for table, load in committed.items():
        try:
            gone = hygiene.expire(spark, catalog, table, load, datetime.now(UTC))
        except Exception as exc:  # the batches are committed and recorded: expiry waits for next time
            print(f"turnstile: expiring snapshots of {table} failed: {exc}", file=sys.stderr)
            continue
        if gone:
            print(f"expired {gone} snapshot(s) of {table}")


def _job_store(stores: Callable[[str], ObjectStore], data: str, manifest_bucket: str) -> ObjectStore:
    """The store the job records in: a manifest outside the data bucket sits in its state bucket
    (STATE_BUCKET), where the result records go too; the `.done` signal goes to the data bucket."""
    return stores(data) if manifest_bucket == data else SplitStore(stores(data), stores(manifest_bucket))


def run(
    spark: SparkSession, manifest_uri: str, stage_to: Path | None, stores: Callable[[str], ObjectStore]
) -> int:
    """Exit status 0 when every batch was committed or skipped, 1 otherwise. `stores` gives the
    store of a bucket of the manifest's cloud (the main file of each cloud builds it)."""
    settings = Settings.from_env()
    where = parse_bucket_uri(manifest_uri).bucket
    staging: Staging = LocalStaging(stores, stage_to) if stage_to else DirectStaging(stores)
    try:
        manifest = read_manifest(stores(where), manifest_uri)
        store = _job_store(stores, manifest.bucket, where)
        applier = IcebergApplier(spark, settings.iceberg_catalog, staging, stores, manifest.bucket)
        done = execute(store, manifest, applier, SystemClock())
    except BatchFailed as exc:
        print(f"turnstile job failed: {exc}", file=sys.stderr)
        return 1
    for rel, outcome in done.outcomes.items():
        print(f"{outcome.value:<9} {rel}")
    _expire_snapshots(spark, settings.iceberg_catalog, applier, manifest, done)
    if not done.succeeded:
        print(f"turnstile job failed: {done.error}", file=sys.stderr)
    return 0 if done.succeeded else 1
