"""The local stack's runner for LOCAL_DRIVER=spool: production's warm runner and spool in the bucket
(fake-gcs-server or moto), with `LocalRunner.launch` (a spark-submit of the driver main file) where
Dataproc creates a batch or EMR starts a job run."""

from __future__ import annotations

from turnstile.config.settings import Settings
from turnstile.jobs.local import DRIVERS, LocalRunner
from turnstile.jobs.local_spark import CORES
from turnstile.jobs.local_worker import spool_driver_file
from turnstile.jobs.warm_runner import WarmRunner
from turnstile.store.port import ObjectStore

LOCAL_POLL_SECONDS = 0.2  # a laptop's spool driver looks this often, unless DRIVER_POLL_SECONDS says


def local_spool_runner(
    settings: Settings, store: ObjectStore, local: LocalRunner, *, cloud: str
) -> WarmRunner:
    """The warm runner whose drivers `local` launches, on the spool in `store` (`cloud`: the
    driver main's `--store`, gcs or s3)."""
    # Spark here reads neither gs:// nor s3:// (no connectors): the driver stages each job's files first.
    args = (
        "--store",
        cloud,
        "--stage-to",
        str(local.home / DRIVERS / "staged"),
        "--prices",
        settings.local_driver_prices,
    )
    return WarmRunner.on(
        local,
        settings,
        store,
        str(spool_driver_file()),
        args,
        slots=CORES,  # as many jobs at once as local Spark has cores, as the folder spool's driver
        poll_seconds=None if "driver_poll_seconds" in settings.model_fields_set else LOCAL_POLL_SECONDS,
    )
