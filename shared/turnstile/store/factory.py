"""Stores by URI scheme: `gs` (GCS) or `s3` (Amazon S3), built from settings.

Each cloud's SDK is imported only when its scheme is asked for: a Cloud Function or a Dataproc job
installs no boto3, a Lambda or an EMR job no Google client.
"""

from __future__ import annotations

from collections.abc import Callable

from turnstile.errors import SettingsError
from turnstile.paths import SCHEMES
from turnstile.settings import Settings
from turnstile.store.port import ObjectStore


def store_factory(settings: Settings, scheme: str = "gs") -> Callable[[str], ObjectStore]:
    """Stores of one scheme sharing one client: `gs` (GCS, or the emulator STORAGE_EMULATOR_HOST
    names) or `s3` (S3 in AWS_REGION, or the endpoint AWS_ENDPOINT_URL names)."""
    if scheme == "s3":
        from turnstile.store import s3  # noqa: PLC0415 (boto3 only where S3 is used)

        s3_client = s3.make_client(settings.aws_region, settings.aws_endpoint_url)
        return lambda bucket: s3.S3Store(s3_client, bucket)
    if scheme == "gs":
        from turnstile.store import gcs  # noqa: PLC0415 (the Google client only where GCS is used)

        gcs_client = gcs.make_client(settings.gcp_project, settings.storage_emulator_host)
        return lambda bucket: gcs.GcsStore(gcs_client, bucket)
    raise SettingsError(f"no object store for {scheme}:// buckets; use one of {', '.join(SCHEMES)}")
