"""The job's main file, for spark-submit locally and Dataproc Serverless in the cloud.

    spark-submit [--conf ...] main.py --manifest gs://BUCKET/<table>/_turnstile/jobs/<job>.manifest.json
        [--stage-to DIR]

The Spark session's Iceberg catalog comes from the submitter's Spark properties. `--stage-to` makes
the job copy each batch's files from the bucket to DIR first (the local runner: Spark cannot read
`gs://` on this machine). Exit status 0 when every batch was committed or skipped, 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Apply a turnstile manifest to Iceberg tables.")
    parser.add_argument("--manifest", required=True, help="gs:// URI of the manifest")
    parser.add_argument("--stage-to", type=Path, help="copy batch files here before reading (local runs)")
    args = parser.parse_args(argv)

    settings = Settings.from_env()
    client = make_client(settings.gcp_project, settings.storage_emulator_host)

    def stores(bucket: str) -> ObjectStore:
        return GcsStore(client, bucket)

    bucket, _ = parse_gs_uri(args.manifest)
    store = stores(bucket)
    staging: Staging = LocalStaging(stores, args.stage_to) if args.stage_to else DirectStaging(stores)
    spark = SparkSession.builder.appName("turnstile").getOrCreate()
    try:
        manifest = read_manifest(store, args.manifest)
        applier = IcebergApplier(spark, settings.iceberg_catalog, staging, stores, bucket)
        done = execute(store, manifest, applier, SystemClock())
    except BatchFailed as exc:
        print(f"turnstile job failed: {exc}", file=sys.stderr)
        return 1
    finally:
        spark.stop()
    for rel, outcome in done.outcomes.items():
        print(f"{outcome.value:<9} {rel}")
    if not done.succeeded:
        print(f"turnstile job failed: {done.error}", file=sys.stderr)
    return 0 if done.succeeded else 1


if __name__ == "__main__":
    sys.exit(main())
