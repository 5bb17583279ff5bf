"""The job's main file on AWS, for EMR Serverless and spark-submit locally: `spark/main.py` with the
batches and the manifest on S3 (its store from AWS_REGION and AWS_ENDPOINT_URL; boto3, which EMR's
runtime carries). On EMR the Iceberg tables are written through S3FileIO (`jobs/catalog.py`)."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from turnstile.spark.main import Stores, launch


def s3_stores() -> Stores:
    from turnstile.config.settings import Settings  # noqa: PLC0415 - after the dependencies are in place
    from turnstile.store.s3 import S3Store, make_client  # noqa: PLC0415

    settings = Settings.from_env()
    client = make_client(settings.aws_region, settings.aws_endpoint_url)
    return lambda bucket: S3Store(client, bucket)


def main(argv: Sequence[str] | None = None) -> int:
    return launch(argv, s3_stores, "s3")


if __name__ == "__main__":
    sys.exit(main())
