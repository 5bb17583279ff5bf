"""Builds real clients from settings on Google Cloud: the one place that decides which adapter serves
a port for the Cloud Functions (the AWS entry points have `wiring_aws`)."""

from __future__ import annotations

from turnstile.config.settings import Settings
from turnstile.core.errors import SettingsError
from turnstile.jobs.dataproc import DataprocRunner
from turnstile.jobs.local import LocalRunner
from turnstile.jobs.local_spool import local_spool_runner
from turnstile.jobs.port import JobRunner
from turnstile.jobs.warm_runner import WarmRunner, driver_main
from turnstile.store.emulated import WriteLock
from turnstile.store.gcs import GcsStore, make_client
from turnstile.store.port import ObjectStore
from turnstile.store.split import MovedBuckets, SplitStore

STATE_MOVED = MovedBuckets()
"""This process's memory of the data buckets whose state has all moved to their state bucket: a
function instance reads the state bucket's marker once, not at every invocation."""


def object_store(settings: Settings, bucket: str) -> ObjectStore:
    """GCS (or the emulator named by STORAGE_EMULATOR_HOST) for one bucket, with turnstile's own
    objects in STATE_BUCKET when that is set (`store.split`)."""
    host = settings.storage_emulator_host
    writes = WriteLock.for_emulator(host) if host else None  # fake-gcs-server: see store.emulated
    client = make_client(settings.gcp_project, host)
    data = GcsStore(client, bucket, emulator_writes=writes)
    state = settings.state_bucket
    if state is None or state == bucket:
        return data
    return SplitStore(data, GcsStore(client, state, emulator_writes=writes), moved=STATE_MOVED)


def job_runner(settings: Settings, store: ObjectStore) -> JobRunner:
    """The runner JOB_RUNNER names: Dataproc Serverless (warm drivers fed through `store`'s spool,
    or one batch per job: DRIVER), or spark-submit on this machine (LOCAL_DRIVER=spool: the same
    spool and warm drivers as on Dataproc, each driver a spark-submit)."""
    if settings.job_runner == "dataproc":
        if settings.driver == "warm":
            return WarmRunner.on(
                DataprocRunner.from_settings(settings), settings, store, driver_main(settings, "gs")
            )
        return DataprocRunner.from_settings(settings)
    if settings.job_runner == "emr":
        raise SettingsError(
            "JOB_RUNNER=emr runs jobs on EMR Serverless for S3 buckets; on Google Cloud use dataproc "
            "(docs/DEPLOY.md), on AWS deploy functions/aws_lambda.py (docs/DEPLOY-AWS.md)"
        )
    local = LocalRunner.from_settings(settings)
    if settings.local_driver == "spool":
        return local_spool_runner(settings, store, local, cloud="gcs")
    return local
