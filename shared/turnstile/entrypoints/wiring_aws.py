"""Builds real clients from settings on AWS: the S3 store and the EMR Serverless runner, for the
Lambda entry points and the CLI on s3:// buckets (boto3 is imported only here and below)."""

from __future__ import annotations

from turnstile.config.settings import Settings
from turnstile.core.errors import SettingsError
from turnstile.jobs.emr import EmrRunner
from turnstile.jobs.local import LocalRunner
from turnstile.jobs.local_spool import local_spool_runner
from turnstile.jobs.port import JobRunner
from turnstile.jobs.warm_runner import WarmRunner, driver_main
from turnstile.store.port import ObjectStore
from turnstile.store.s3 import S3Store, make_client
from turnstile.store.split import MovedBuckets, SplitStore

STATE_MOVED = MovedBuckets()
"""This process's memory of the data buckets whose state has all moved to their state bucket."""
LOCAL_ON_S3 = (
    "JOB_RUNNER is local (its default), which runs jobs on this machine, not for Amazon S3: set "
    "JOB_RUNNER=emr and the EMR_* settings (docs/DEPLOY-AWS.md)"
)


def s3_store(settings: Settings, bucket: str) -> ObjectStore:
    """S3 (or the endpoint named by AWS_ENDPOINT_URL) for one bucket, with turnstile's own objects
    in STATE_BUCKET when that is set (`store.split`)."""
    client = make_client(settings.aws_region, settings.aws_endpoint_url)
    data = S3Store(client, bucket)
    state = settings.state_bucket
    if state is None or state == bucket:
        return data
    return SplitStore(data, S3Store(client, state), moved=STATE_MOVED)


def job_runner(settings: Settings, store: ObjectStore) -> JobRunner:
    """The runner JOB_RUNNER names on AWS: EMR Serverless (warm drivers fed through `store`'s
    spool, each an EMR job run, or one job run per job: DRIVER), or spark-submit on this machine
    (LOCAL_DRIVER=spool: the same spool and warm drivers, each driver a spark-submit)."""
    if settings.job_runner == "emr":
        runs = EmrRunner.from_settings(settings, store)
        if settings.driver == "warm":
            args = ("--store", "s3", "--prices", "emr")
            return WarmRunner.on(runs, settings, store, driver_main(settings, "s3"), args)
        return runs
    if not settings.aws_endpoint_url:
        # Only an S3 endpoint override (moto, MinIO) may run jobs on this machine: on S3 a local
        # job would commit to a local warehouse, and a Lambda has no Spark to run it anyway.
        raise SettingsError(LOCAL_ON_S3)
    local = LocalRunner.from_settings(settings)
    if settings.local_driver == "spool":
        return local_spool_runner(settings, store, local, cloud="s3")
    return local
