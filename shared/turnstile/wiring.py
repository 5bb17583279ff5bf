"""Builds real clients from settings: the one place that decides which adapter serves a port."""

from __future__ import annotations

from turnstile.jobs.dataproc import DataprocRunner
from turnstile.jobs.local import LocalRunner
from turnstile.jobs.port import JobRunner
from turnstile.settings import Settings
from turnstile.store.emulated import WriteLock
from turnstile.store.gcs import GcsStore, make_client
from turnstile.store.port import ObjectStore


def object_store(settings: Settings, bucket: str) -> ObjectStore:
    """GCS (or the emulator named by STORAGE_EMULATOR_HOST) for one bucket."""
    host = settings.storage_emulator_host
    writes = WriteLock.for_emulator(host) if host else None
    return GcsStore(make_client(settings.gcp_project, host), bucket, emulator_writes=writes)


def job_runner(settings: Settings, store: ObjectStore) -> JobRunner:
    """The runner JOB_RUNNER names: Dataproc Serverless, or spark-submit on this machine."""
    if settings.job_runner == "dataproc":
        return DataprocRunner.from_settings(settings)
    return LocalRunner.from_settings(settings)
