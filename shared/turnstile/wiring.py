"""Builds real clients from settings: the one place that decides which adapter serves a port."""

from __future__ import annotations

from turnstile.jobs.dataproc import DataprocRunner
from turnstile.jobs.local import LocalRunner
from turnstile.jobs.port import JobRunner
from turnstile.settings import Settings
from turnstile.store.factory import store_factory
from turnstile.store.port import ObjectStore


def object_store(settings: Settings, bucket: str) -> ObjectStore:
    """GCS (or the emulator named by STORAGE_EMULATOR_HOST) for one bucket."""
    return store_factory(settings, "gs")(bucket)


def s3_store(settings: Settings, bucket: str) -> ObjectStore:
    """S3 (or the endpoint named by AWS_ENDPOINT_URL) for one bucket: the AWS entry points' store."""
    return store_factory(settings, "s3")(bucket)


def job_runner(settings: Settings, store: ObjectStore) -> JobRunner:
    """The runner JOB_RUNNER names: Dataproc Serverless, EMR Serverless, or spark-submit here."""
    if settings.job_runner == "dataproc":
        return DataprocRunner.from_settings(settings)
    if settings.job_runner == "emr":
        from turnstile.jobs.emr import EmrRunner  # noqa: PLC0415 (boto3 only on AWS: see store.factory)

        return EmrRunner.from_settings(settings)
    return LocalRunner.from_settings(settings)
