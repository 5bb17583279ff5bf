"""The job's main file on AWS, for EMR Serverless and spark-submit locally: `spark/main.py` with the
batches and the manifest on S3 (its store from AWS_REGION and AWS_ENDPOINT_URL; boto3, which EMR's
runtime carries). On EMR the Iceberg tables are written through S3FileIO (`jobs/catalog.py`)."""

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
    parser.add_argument("--manifest", required=True, help="s3:// URI of the manifest")
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
        from turnstile.store.s3 import S3Store, make_client  # noqa: PLC0415

        settings = Settings.from_env()
        client = make_client(settings.aws_region, settings.aws_endpoint_url)
        return run(spark, args.manifest, args.stage_to, lambda bucket: S3Store(client, bucket))
    finally:
        spark.stop()


if __name__ == "__main__":
    sys.exit(main())
