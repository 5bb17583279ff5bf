"""The job's main file, for spark-submit locally and Dataproc or EMR Serverless in the cloud.

    spark-submit [--conf ...] main.py --manifest gs://BUCKET/<table>/_turnstile/jobs/<job>.manifest.json
        [--stage-to DIR]

The Spark session's Iceberg catalog comes from the submitter's Spark properties. `--stage-to` makes
the job copy each batch's files from the bucket to DIR first (the local runner: Spark cannot read
`gs://` or `s3://` on this machine); the manifest's scheme picks the store, GCS or S3. Exit status 0
when every batch was committed or skipped, 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from pyspark.sql import SparkSession

from turnstile.clock import SystemClock
from turnstile.jobs.execution import BatchFailed, execute, read_manifest
from turnstile.paths import parse_bucket_uri
from turnstile.settings import Settings
from turnstile.spark.applier import IcebergApplier
from turnstile.spark.staging import DirectStaging, LocalStaging, Staging
from turnstile.store.factory import store_factory


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Apply a turnstile manifest to Iceberg tables.")
    parser.add_argument("--manifest", required=True, help="gs:// or s3:// URI of the manifest")
    parser.add_argument("--stage-to", type=Path, help="copy batch files here before reading (local runs)")
    args = parser.parse_args(argv)

    settings = Settings.from_env()
    where = parse_bucket_uri(args.manifest)  # the batches' files live in the manifest's cloud
    stores = store_factory(settings, where.scheme)
    bucket = where.bucket
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
