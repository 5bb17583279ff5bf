"""The job's main file, for spark-submit locally and Dataproc Serverless in the cloud.

    spark-submit [--conf ...] main.py --manifest gs://BUCKET/<table>/_turnstile/jobs/<job>.manifest.json
        [--stage-to DIR]

The Spark session's Iceberg catalog comes from the submitter's Spark properties. `--stage-to` makes
the job copy each batch's files from the bucket to DIR first (the local runner: Spark cannot read
`gs://` on this machine). Exit status 0 when every batch was committed or skipped, 1 otherwise.
`spark/main_aws.py` is the same job for S3, through `launch`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pyspark import SparkFiles
from pyspark.sql import SparkSession

from turnstile.spark.dependencies import SHIPPED_DIR, use_shipped

if TYPE_CHECKING:
    from turnstile.store.port import ObjectStore

Stores = Callable[[str], "ObjectStore"]


def launch(argv: Sequence[str] | None, stores: Callable[[], Stores], scheme: str) -> int:
    """Parse the arguments, start Spark, put the shipped dependencies first, then run the manifest
    with the stores `stores()` builds (called only then: it imports the cloud's client)."""
    parser = argparse.ArgumentParser(description="Apply a turnstile manifest to Iceberg tables.")
    parser.add_argument("--manifest", required=True, help=f"{scheme}:// URI of the manifest")
    parser.add_argument("--stage-to", type=Path, help="copy batch files here before reading (local runs)")
    args = parser.parse_args(argv)

    spark = SparkSession.builder.appName("turnstile").getOrCreate()
    try:
        # Before anything imports pydantic or a storage client: the shipped versions must win
        # over the runtime's own (turnstile.spark.dependencies).
        use_shipped([Path.cwd() / SHIPPED_DIR, Path(SparkFiles.getRootDirectory()) / SHIPPED_DIR])
        from turnstile.spark.run import run  # noqa: PLC0415 - only now are the dependencies in place

        return run(spark, args.manifest, args.stage_to, stores())
    finally:
        spark.stop()


def gcs_stores() -> Stores:
    from turnstile.config.settings import Settings  # noqa: PLC0415 - after the dependencies are in place
    from turnstile.store.gcs import GcsStore, make_client  # noqa: PLC0415

    settings = Settings.from_env()
    client = make_client(settings.gcp_project, settings.storage_emulator_host)
    return lambda bucket: GcsStore(client, bucket)


def main(argv: Sequence[str] | None = None) -> int:
    return launch(argv, gcs_stores, "gs")


if __name__ == "__main__":
    sys.exit(main())
