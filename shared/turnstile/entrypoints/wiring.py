"""Builds real clients from settings on Google Cloud: the one place that decides which adapter serves
a port for the Cloud Functions (the AWS entry points have `wiring_aws`)."""

from __future__ import annotations

from turnstile.config.settings import Settings
from turnstile.core.errors import SettingsError
from turnstile.jobs.dataproc import DataprocRunner
from turnstile.jobs.dataproc_warm import WarmDataprocRunner
from turnstile.jobs.local import DRIVERS, LocalRunner
from turnstile.jobs.local_spark import CORES
from turnstile.jobs.local_worker import spool_driver_file
from turnstile.jobs.port import JobRunner
from turnstile.store.emulated import WriteLock
from turnstile.store.gcs import GcsStore, make_client
from turnstile.store.port import ObjectStore
from turnstile.store.split import MovedBuckets, SplitStore

LOCAL_POLL_SECONDS = 0.2  # a laptop's spool driver looks this often, unless DRIVER_POLL_SECONDS says

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
            return WarmDataprocRunner.from_settings(settings, store)
        return DataprocRunner.from_settings(settings)
    if settings.job_runner == "emr":
        raise SettingsError(
            "JOB_RUNNER=emr runs jobs on EMR Serverless for S3 buckets; on Google Cloud use dataproc "
            "(docs/DEPLOY.md), on AWS deploy functions/aws_lambda.py (docs/DEPLOY-AWS.md)"
        )
    local = LocalRunner.from_settings(settings)
    if settings.local_driver == "spool":
        # Spark here cannot read gs:// (fake-gcs-server): the driver stages each job's files first.
        local_args = (
            "--stage-to",
            str(local.home / DRIVERS / "staged"),
            "--prices",
            settings.local_driver_prices,
        )
        return WarmDataprocRunner.on(
            local,
            settings,
            store,
            str(spool_driver_file()),
            local_args,
            slots=CORES,  # as many jobs at once as local Spark has cores, as the folder spool's driver
            poll_seconds=None if "driver_poll_seconds" in settings.model_fields_set else LOCAL_POLL_SECONDS,
        )
    return local
