"""What the job does once its dependencies are importable: read the manifest, apply it, report."""

from __future__ import annotations

import sys
from pathlib import Path

from pyspark.sql import SparkSession

from turnstile.clock import SystemClock
from turnstile.errors import BatchFailed
from turnstile.execution import execute, read_manifest
from turnstile.paths import parse_gs_uri
from turnstile.settings import Settings
from turnstile.spark.applier import IcebergApplier
from turnstile.spark.staging import DirectStaging, LocalStaging, Staging
from turnstile.store.gcs import GcsStore, make_client
from turnstile.store.port import ObjectStore


def run(spark: SparkSession, manifest_uri: str, stage_to: Path | None) -> int:
    """Exit status 0 when every batch was committed or skipped, 1 otherwise."""
    settings = Settings.from_env()
    client = make_client(settings.gcp_project, settings.storage_emulator_host)

    def stores(bucket: str) -> ObjectStore:
        return GcsStore(client, bucket)

    bucket, _ = parse_gs_uri(manifest_uri)
    store = stores(bucket)
    staging: Staging = LocalStaging(stores, stage_to) if stage_to else DirectStaging(stores)
    try:
        manifest = read_manifest(store, manifest_uri)
        applier = IcebergApplier(spark, settings.iceberg_catalog, staging, stores, bucket)
        done = execute(store, manifest, applier, SystemClock())
    except BatchFailed as exc:
        print(f"turnstile job failed: {exc}", file=sys.stderr)
        return 1
    for rel, outcome in done.outcomes.items():
        print(f"{outcome.value:<9} {rel}")
    if not done.succeeded:
        print(f"turnstile job failed: {done.error}", file=sys.stderr)
    return 0 if done.succeeded else 1
