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

from pyspark import SparkFiles
from pyspark.sql import SparkSession

from turnstile.spark.dependencies import SHIPPED_DIR, use_shipped


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Apply a turnstile manifest to Iceberg tables.")
    parser.add_argument("--manifest", required=True, help="gs:// URI of the manifest")
    parser.add_argument("--stage-to", type=Path, help="copy batch files here before reading (local runs)")
    args = parser.parse_args(argv)

    spark = SparkSession.builder.appName("turnstile").getOrCreate()
    try:
        # Before anything imports pydantic or google-cloud-storage: the shipped versions must win
        # over the runtime's own (turnstile.spark.dependencies).
        use_shipped([Path.cwd() / SHIPPED_DIR, Path(SparkFiles.getRootDirectory()) / SHIPPED_DIR])
        # Only now are the dependencies in place.
        from turnstile.settings import Settings  # noqa: PLC0415
        from turnstile.spark.run import run  # noqa: PLC0415
        from turnstile.store.gcs import GcsStore, make_client  # noqa: PLC0415

        settings = Settings.from_env()
        client = make_client(settings.gcp_project, settings.storage_emulator_host)
        return run(spark, args.manifest, args.stage_to, lambda bucket: GcsStore(client, bucket))
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())
